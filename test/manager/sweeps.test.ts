// Issue 22, "sweep after a crash", the manager's part: reconcile() runs the
// host's sweeps with a live view of its agents (tracked, spawning, and untracked
// ones a backend still runs), never when the live set is unknown, and a failing
// sweep is an outcome and an event, never a rejection.

import {
  type ReconcileSweep,
  type ScalerBackend,
  type ScalerEvent,
  ScalerManager,
} from 'scaler-primitives/manager';
import { FakeBackend, TestClock } from 'scaler-primitives/testing';
import { describe, expect, it } from 'vitest';

const config = {
  globalMaxAgents: 10,
  scalers: [{ name: 'linux', type: 'container', maxAgents: 5, labelSets: [{ labels: ['linux'] }] }],
};

// A FakeBackend that also lists agents a crashed run left running.
function withSurvivors(fake: FakeBackend, survivors: string[]): ScalerBackend {
  return {
    spawn: (request) => fake.spawn(request),
    destroy: (agentId) => fake.destroy(agentId),
    list: async () => [...(await fake.list()), ...survivors],
  };
}

function setup(
  sweeps: Record<string, ReconcileSweep>,
  backend?: (f: FakeBackend) => ScalerBackend,
) {
  const clock = new TestClock('2026-01-05T09:00:00Z');
  const fake = new FakeBackend({ clock, name: 'linux' });
  const events: ScalerEvent[] = [];
  let n = 0;
  const manager = new ScalerManager({
    config,
    backends: [{ name: 'linux', backend: backend ? backend(fake) : fake }],
    clock,
    generateAgentId: () => `linux-${++n}`,
    onEvent: (e) => events.push(e),
    sweeps,
  });
  fake.attach(manager);
  return { manager, fake, events };
}

describe('reconcile() sweeps', () => {
  it('passes a live view of tracked and untracked agents and reports what each removed', async () => {
    const seen: string[][] = [];
    const sweep: ReconcileSweep = async (live) => {
      const alive = new Set(live);
      seen.push([...alive].sort());
      const left = ['linux-1', 'survivor', 'dead-1', 'dead-2'];
      return { removedAgents: left.filter((id) => !alive.has(id)) };
    };
    const { manager, events } = setup({ agentCaps: sweep, isolation: sweep }, (f) =>
      withSurvivors(f, ['survivor']),
    );
    expect((await manager.requestScale({ jobId: 'job-1', labels: ['linux'] })).kind).toBe(
      'spawned',
    );
    const result = await manager.reconcile();
    expect(result.untracked).toEqual([{ scaler: 'linux', agentId: 'survivor' }]);
    expect(seen).toEqual([
      ['linux-1', 'survivor'],
      ['linux-1', 'survivor'],
    ]);
    expect(result.sweeps).toEqual([
      { name: 'agentCaps', removedAgents: ['dead-1', 'dead-2'] },
      { name: 'isolation', removedAgents: ['dead-1', 'dead-2'] },
    ]);
    expect(
      events
        .filter((e) => e.kind === 'swept')
        .map((e) => (e.data as { sweep?: string } | undefined)?.sweep),
    ).toEqual(['agentCaps', 'isolation']);
    await manager.shutdownAll();
  });

  it('the view is read when iterated: an agent tracked after the call began is alive', async () => {
    let manager!: ScalerManager;
    const sweep: ReconcileSweep = async (live) => {
      // The sweep reads its own state first (here: a spawn happens meanwhile), then the view.
      await manager.requestScale({ jobId: 'late-job', labels: ['linux'] });
      return { removedAgents: ['linux-1', 'x'].filter((id) => !new Set(live).has(id)) };
    };
    ({ manager } = setup({ s: sweep }));
    expect((await manager.reconcile()).sweeps).toEqual([{ name: 's', removedAgents: ['x'] }]);
    await manager.shutdownAll();
  });

  it('skips every sweep when a backend cannot list its agents (the live set is unknown)', async () => {
    let calls = 0;
    const sweep: ReconcileSweep = async () => {
      calls++;
      return { removedAgents: [] };
    };
    const noList = setup({ caps: sweep }, (f) => ({
      spawn: (r) => f.spawn(r),
      destroy: (id) => f.destroy(id),
    }));
    expect((await noList.manager.reconcile()).sweeps).toEqual([
      { name: 'caps', removedAgents: [], skipped: 'live-set-unknown' },
    ]);
    expect(noList.events.map((e) => e.kind)).toContain('sweeps-skipped');

    const failing = setup({ caps: sweep });
    failing.fake.failNext(1, new Error('list broke'), 'list');
    const result = await failing.manager.reconcile();
    expect(result.failed).toHaveLength(1);
    expect(result.sweeps).toEqual([
      { name: 'caps', removedAgents: [], skipped: 'live-set-unknown' },
    ]);
    expect(calls).toBe(0);
    // Next pass, list() answers again: the sweep runs.
    expect((await failing.manager.reconcile()).sweeps).toEqual([
      { name: 'caps', removedAgents: [] },
    ]);
    expect(calls).toBe(1);
  });

  it('a failing sweep or a malformed answer is an outcome and an event; the others still run', async () => {
    const boom = new Error('nats down');
    const { manager, events } = setup({
      first: async () => {
        throw boom;
      },
      second: async () => ({ removed: ['a'] }) as never,
      third: async () => ({ removedAgents: ['gone'] }),
    });
    const result = await manager.reconcile();
    expect(result.sweeps?.[0]).toEqual({ name: 'first', removedAgents: [], error: boom });
    expect(result.sweeps?.[1]).toMatchObject({ name: 'second', removedAgents: [] });
    expect(String((result.sweeps![1]!.error as Error).message)).toMatch(/removedAgents/);
    expect(result.sweeps?.[2]).toEqual({ name: 'third', removedAgents: ['gone'] });
    expect(events.filter((e) => e.kind === 'sweep-failed')).toHaveLength(2);
  });

  it('without sweeps, the result has no `sweeps` field', async () => {
    const clock = new TestClock('2026-01-05T09:00:00Z');
    const manager = new ScalerManager({
      config,
      backends: [{ name: 'linux', backend: new FakeBackend({ clock }) }],
      clock,
    });
    expect(await manager.reconcile()).toEqual({ released: [], untracked: [], failed: [] });
  });

  it.each([
    [[], /object of functions/],
    ['x', /object of functions/],
    [{ caps: 'sweep' }, /sweep `caps` to be a function/],
    [{ '': async () => ({ removedAgents: [] }) }, /1 to 63 characters/],
  ])('refuses sweeps %j at construction', (sweeps, message) => {
    expect(
      () =>
        new ScalerManager({
          config,
          backends: [{ name: 'linux', backend: new FakeBackend() }],
          sweeps: sweeps as never,
        }),
    ).toThrow(message);
  });
});
