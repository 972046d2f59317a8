/**
 * onConfigAck: the backend that runs the agent may implement the hook itself
 * (a microVM backend clears its MMDS data there); the manager calls it first,
 * then the host's `onConfigAck` option. A failure of either is an event and
 * never keeps the other from running.
 */

import {
  type ScalerBackend,
  type ScalerEvent,
  ScalerManager,
  type ScalerManagerOptions,
} from 'scaler-primitives/manager';
import { FakeBackend, TestClock } from 'scaler-primitives/testing';
import { describe, expect, it } from 'vitest';

/** A microVM-style backend: a FakeBackend plus its own onConfigAck. */
function mmdsBackend(
  clock: TestClock,
  onConfigAck: (agentId: string) => void | Promise<void>,
): ScalerBackend & { fake: FakeBackend } {
  const fake = new FakeBackend({ clock, shutdown: false });
  return {
    fake,
    spawn: (request) => fake.spawn(request),
    destroy: (agentId) => fake.destroy(agentId),
    onConfigAck,
  };
}

function fleet(
  backends: { vm: ScalerBackend; box: ScalerBackend },
  options: Partial<ScalerManagerOptions> = {},
) {
  const clock = new TestClock('2026-01-05T12:00:00Z');
  const events: ScalerEvent[] = [];
  const manager = new ScalerManager({
    config: {
      globalMaxAgents: 10,
      scalers: [
        { name: 'vm', type: 'microvm', maxAgents: 5, labelSets: [{ labels: ['vm'] }] },
        { name: 'box', type: 'container', maxAgents: 5, labelSets: [{ labels: ['box'] }] },
      ],
    },
    backends: [
      { name: 'vm', backend: backends.vm },
      { name: 'box', backend: backends.box },
    ],
    clock,
    onEvent: (e) => events.push(e),
    random: () => 0.5,
    ...options,
  });
  return { manager, clock, events };
}

async function agent(manager: ScalerManager, label: string, job: string) {
  const result = await manager.requestScale({ jobId: job, labels: [label] });
  if (result.kind !== 'spawned') throw new Error(`expected spawned, got ${result.kind}`);
  manager.onAgentRegistered(result.agentId, []);
  return result.agentId;
}

const failures = (events: ScalerEvent[]) =>
  events
    .filter((e) => e.kind === 'config-ack-failed')
    .map((e) => {
      const data = e.data as { hook?: string; error?: unknown } | undefined;
      return [e.agentId, data?.hook, (data?.error as Error | undefined)?.message];
    });

describe('onConfigAck on the backend', () => {
  it("calls the owning backend's hook with no wiring by the host, and only that backend's", async () => {
    const clock = new TestClock('2026-01-05T12:00:00Z');
    const cleared: string[] = [];
    const vm = mmdsBackend(clock, (agentId) => {
      cleared.push(agentId);
    });
    const { manager } = fleet({ vm, box: new FakeBackend({ clock, shutdown: false }) });
    const vmAgent = await agent(manager, 'vm', 'j1');
    const boxAgent = await agent(manager, 'box', 'j2');
    manager.onConfigAck(boxAgent); // a backend without the hook: nothing to call
    manager.onConfigAck('static-1'); // not ours: ignored
    manager.onConfigAck(vmAgent);
    manager.onConfigAck(vmAgent); // every ack calls it again
    expect(cleared).toEqual([vmAgent, vmAgent]);
  });

  it('runs the backend hook first, then the option', async () => {
    const clock = new TestClock('2026-01-05T12:00:00Z');
    const calls: string[] = [];
    const vm = mmdsBackend(clock, (agentId) => {
      calls.push(`backend ${agentId}`);
    });
    const { manager } = fleet(
      { vm, box: new FakeBackend({ clock }) },
      { onConfigAck: (agentId, scaler) => calls.push(`option ${agentId} ${scaler}`) },
    );
    const id = await agent(manager, 'vm', 'j1');
    manager.onConfigAck(id);
    expect(calls).toEqual([`backend ${id}`, `option ${id} vm`]);
  });

  it('a throwing backend hook is an event, and the option still runs', async () => {
    const clock = new TestClock('2026-01-05T12:00:00Z');
    const options: string[] = [];
    const vm = mmdsBackend(clock, () => {
      throw new Error('mmds down');
    });
    const { manager, events } = fleet(
      { vm, box: new FakeBackend({ clock }) },
      { onConfigAck: (agentId) => options.push(agentId) },
    );
    const id = await agent(manager, 'vm', 'j1');
    expect(() => manager.onConfigAck(id)).not.toThrow();
    expect(options).toEqual([id]);
    expect(failures(events)).toEqual([[id, 'backend', 'mmds down']]);
  });

  it('a rejected promise of an async backend hook is an event, never an unhandled rejection', async () => {
    const clock = new TestClock('2026-01-05T12:00:00Z');
    const vm = mmdsBackend(clock, async () => {
      await new Promise<void>((resolve) => clock.setTimeout(() => resolve(), 10));
      throw new Error('mmds timeout');
    });
    const { manager, events } = fleet({ vm, box: new FakeBackend({ clock }) });
    const id = await agent(manager, 'vm', 'j1');
    manager.onConfigAck(id);
    expect(failures(events)).toEqual([]);
    await clock.advance(10);
    expect(failures(events)).toEqual([[id, 'backend', 'mmds timeout']]);
  });

  it('a throwing option is an event too, after the backend hook ran', async () => {
    const clock = new TestClock('2026-01-05T12:00:00Z');
    const cleared: string[] = [];
    const vm = mmdsBackend(clock, (agentId) => {
      cleared.push(agentId);
    });
    const { manager, events } = fleet(
      { vm, box: new FakeBackend({ clock }) },
      {
        onConfigAck: () => {
          throw new Error('host hook');
        },
      },
    );
    const id = await agent(manager, 'vm', 'j1');
    manager.onConfigAck(id);
    expect(cleared).toEqual([id]);
    expect(failures(events)).toEqual([[id, 'option', 'host hook']]);
  });
});
