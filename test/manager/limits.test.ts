/**
 * Idle timeout on every scaler, maxJobsPerAgent, maxAgentLifetimeSeconds, and
 * strict input at the manager's edge. Time is a fake clock.
 */

import {
  type ScalerConfigInput,
  type ScalerEvent,
  ScalerManager,
  type ScalerManagerOptions,
} from 'scaler-primitives/manager';
import { FakeBackend, TestClock } from 'scaler-primitives/testing';
import { describe, expect, it } from 'vitest';
import { isInvalidInputError } from '../../src/errors/input.js';
import type { ScalerEntryInput } from '../../src/manager/config/config.js';

/** A manager on a TestClock and a FakeBackend; maintenance runs when the test calls it. */
function fleet({
  config,
  ...options
}: Partial<ScalerManagerOptions> & { config: ScalerConfigInput }) {
  const clock = new TestClock('2026-01-05T12:00:00Z');
  const backend = new FakeBackend({ clock, shutdown: false });
  const events: ScalerEvent[] = [];
  const manager = new ScalerManager({
    config,
    backends: [{ name: 'vm', backend }],
    clock,
    onEvent: (e) => events.push(e),
    random: () => 0.5,
    ...options,
  });
  return { manager, backend, clock, events };
}

function withScaler(extra: Partial<ScalerEntryInput>): ScalerConfigInput {
  return {
    globalMaxAgents: 10,
    scalers: [
      {
        name: 'vm',
        type: 'c',
        maxAgents: 5,
        labelSets: [{ labels: ['linux'], resources: { cpus: 1 } }],
        ...extra,
      },
    ],
  };
}

async function agent(manager: ScalerManager, job: string) {
  const result = await manager.requestScale({ jobId: job, labels: ['linux'] });
  if (result.kind !== 'spawned') throw new Error(`expected spawned, got ${result.kind}`);
  manager.onAgentRegistered(result.agentId, []);
  return result.agentId;
}

describe('idleTimeoutSeconds', () => {
  it('reaps idle agents of a scaler without a warm pool', async () => {
    const { manager, backend, clock } = fleet({ config: withScaler({ idleTimeoutSeconds: 120 }) });
    const id = await agent(manager, 'j1');
    manager.onJobComplete(id);
    await clock.advance(119_999);
    await manager.maintain();
    expect(backend.destroyed()).toEqual([]);
    await clock.advance(1);
    await manager.maintain();
    expect(backend.destroyed()).toEqual([id]);
    expect(manager.getStatus().counters.idleDestroyed).toBe(1);
  });

  it('without any idle timeout, idle agents stay', async () => {
    const { manager, backend, clock } = fleet({ config: withScaler({}) });
    const id = await agent(manager, 'j1');
    manager.onJobComplete(id);
    await clock.advance(86_400_000);
    await manager.maintain();
    expect(backend.destroyed()).toEqual([]);
  });

  it("keeps the idle agents the warm pool's target needs (the most recently idle)", async () => {
    const { manager, backend, clock } = fleet({
      config: withScaler({ idleTimeoutSeconds: 60, warmPool: { size: 1 } }),
      demandHoldMs: 0,
    });
    const a = await agent(manager, 'j1');
    const b = await agent(manager, 'j2');
    manager.onJobComplete(a);
    await clock.advance(10_000);
    manager.onJobComplete(b);
    await clock.advance(60_000);
    await manager.maintain();
    expect(backend.destroyed()).toEqual([a]);
    expect(manager.getStatus().scalers[0]!.idleCount).toBe(1);
    // No respawn: the kept agent is the warm pool.
    expect(backend.spawned()).toHaveLength(2);
  });
});

describe('maxJobsPerAgent', () => {
  it('1 makes ephemeral agents: destroyed after their first job', async () => {
    const { manager, backend, clock } = fleet({ config: withScaler({ maxJobsPerAgent: 1 }) });
    const id = await agent(manager, 'j1');
    manager.onJobComplete(id);
    expect(manager.canRunJob(id, ['linux'])).toBe(false);
    await clock.settle();
    expect(backend.destroyed()).toEqual([id]);
  });

  it('3 keeps the agent for three jobs', async () => {
    const { manager, backend, clock } = fleet({ config: withScaler({ maxJobsPerAgent: 3 }) });
    const id = await agent(manager, 'j1');
    manager.onJobComplete(id);
    manager.correlateAgentToJob(id, 'r', 'j2');
    manager.onJobComplete(id);
    manager.correlateAgentToJob(id, 'r', 'j3');
    await clock.settle();
    expect(backend.destroyed()).toEqual([]);
    manager.onJobComplete(id);
    await clock.settle();
    expect(backend.destroyed()).toEqual([id]);
  });
});

describe('maxAgentLifetimeSeconds', () => {
  it('drains a busy agent past its lifetime and destroys an idle one', async () => {
    const { manager, backend, clock } = fleet({
      config: withScaler({ maxAgentLifetimeSeconds: 3600 }),
    });
    const busy = await agent(manager, 'j1');
    const idle = await agent(manager, 'j2');
    manager.onJobComplete(idle);
    await clock.advance(3_600_000);
    await manager.maintain();
    expect(backend.destroyed()).toEqual([idle]);
    expect(manager.getStatus().scalers[0]!.draining).toEqual([busy]);
    manager.onJobComplete(busy);
    await clock.settle();
    expect(backend.destroyed()).toEqual([idle, busy]);
  });
});

describe('strict input at the edge', () => {
  it('refuses a typo in requestScale resources, naming the key and the nearest accepted one', async () => {
    const { manager } = fleet({ config: withScaler({}) });
    const error = await manager
      .requestScale({
        jobId: 'j1',
        labels: ['linux'],
        resources: { reqeusts: { cpus: 2 } } as never,
      })
      .catch((e: unknown) => e);
    expect(isInvalidInputError(error)).toBe(true);
    expect((error as Error).message).toMatch(/reqeusts.*did you mean `requests`/);
  });

  it('refuses the legacy flat { cpus, memory } form', async () => {
    const { manager } = fleet({ config: withScaler({}) });
    await expect(
      manager.requestScale({ jobId: 'j1', labels: ['linux'], resources: { cpus: 2 } as never }),
    ).rejects.toThrow(/resources\.cpus.*flat form/);
    await expect(
      manager.requestScale({
        jobId: 'j1',
        labels: ['linux'],
        resources: { requests: { cpu: 2 } } as never,
      }),
    ).rejects.toThrow(/resources\.requests\.cpu.*did you mean `cpus`/);
    expect(manager.getStatus().globalActiveCount).toBe(0);
  });

  it('length-limits job ids, agent ids and labels', async () => {
    const { manager } = fleet({ config: withScaler({}) });
    const long = 'x'.repeat(4000);
    await expect(manager.requestScale({ jobId: long, labels: ['linux'] })).rejects.toSatisfy(
      isInvalidInputError,
    );
    await expect(manager.requestScale({ jobId: 'j1', labels: [long] })).rejects.toSatisfy(
      isInvalidInputError,
    );
    const many = Array.from({ length: 65 }, (_, i) => `l${i}`);
    await expect(manager.requestScale({ jobId: 'j1', labels: many })).rejects.toSatisfy(
      isInvalidInputError,
    );
    expect(() => manager.onAgentRegistered(long)).toThrow(/at most 253/);
    expect(() => manager.canRunJob(long, [])).toThrow(/at most 253/);
    expect(() => manager.onJobComplete(long)).toThrow(/at most 253/);
    expect(() => manager.correlateAgentToJob('a', 'r', long)).toThrow(/at most 253/);
  });

  it('refuses unknown scaler config keys and an over-long scaler name', () => {
    expect(() => fleet({ config: withScaler({ idleTimeout: 5 } as never) })).toThrow(/idleTimeout/);
    expect(() =>
      fleet({
        config: {
          globalMaxAgents: 1,
          scalers: [{ name: 'v'.repeat(64), type: 'c', maxAgents: 1, labelSets: [{ labels: [] }] }],
        },
      }),
    ).toThrow(/1-63 characters/);
  });

  it('refuses an unknown lost-reservation policy', () => {
    expect(() =>
      fleet({ config: withScaler({}), policies: { reservationLost: 'ignore' as never } }),
    ).toThrow(/report, stop-spawning, drain/);
  });
});

describe('onConfigAck', () => {
  it('calls the hook for a tracked agent; a throwing hook becomes an event', async () => {
    const acks: Array<[string, string]> = [];
    const { manager, events } = fleet({
      config: withScaler({}),
      onConfigAck: (agentId, scaler) => {
        acks.push([agentId, scaler]);
        if (acks.length === 2) throw new Error('mmds down');
      },
    });
    const id = await agent(manager, 'j1');
    manager.onConfigAck('static-1');
    manager.onConfigAck(id);
    expect(acks).toEqual([[id, 'vm']]);
    manager.onConfigAck(id);
    expect(events.find((e) => e.kind === 'config-ack-failed')).toMatchObject({ agentId: id });
  });
});
