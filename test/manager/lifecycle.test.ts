import {
  type ScalerConfigInput,
  type ScalerEvent,
  ScalerManager,
  type ScalerManagerOptions,
} from 'scaler-primitives/manager';
import { FakeBackend, TestClock } from 'scaler-primitives/testing';
import { describe, expect, it } from 'vitest';
import { isBackendError } from '../../src/errors/manager.js';

function config(overrides: Partial<ScalerConfigInput> = {}): ScalerConfigInput {
  return {
    globalMaxAgents: 10,
    scalers: [
      {
        name: 'small',
        type: 'container',
        maxAgents: 3,
        labelSets: [{ labels: ['linux'], resources: { cpus: 1 } }],
        resourceCap: { maxCpu: 3 },
      },
    ],
    ...overrides,
  };
}

function setup(options: Partial<ScalerManagerOptions> = {}) {
  const clock = new TestClock('2026-01-05T12:00:00Z');
  const backend = new FakeBackend({ clock, name: 'small' });
  const events: ScalerEvent[] = [];
  const relayed: Array<[string, string, ScalerEvent]> = [];
  let n = 0;
  const manager = new ScalerManager({
    config: config(),
    backends: [{ name: 'small', backend }],
    onEvent: (e) => events.push(e),
    onScalerEvent: (runId, jobId, e) => relayed.push([runId, jobId, e]),
    clock,
    generateAgentId: (scaler) => `${scaler}-${++n}`,
    ...options,
  });
  return { manager, backend, clock, events, relayed };
}

const spawnedId = (result: { kind: string; agentId?: string }) => {
  expect(result.kind).toBe('spawned');
  return result.agentId!;
};

describe('registration and correlation', () => {
  it('onAgentRegistered answers for our agents and null for static ones', async () => {
    const { manager } = setup();
    const id = spawnedId(await manager.requestScale({ jobId: 'job-1', labels: ['linux'] }));
    expect(manager.onAgentRegistered('static-1', ['linux'])).toBeNull();
    expect(manager.onAgentRegistered(id, ['linux'])).toEqual({
      boundJobId: 'job-1',
      mandatoryLabels: [],
    });
    const status = manager.getStatus();
    expect(status.spawningCount).toBe(0);
    expect(status.scalers[0]!.busyCount).toBe(1);
    expect(manager.getAgent(id)?.scaler).toBe('small');
    expect(manager.getAgent('static-1')?.scaler).toBeUndefined();
    // The context the backend's spawn answered with, under the scaler's own fields.
    expect(manager.getAgent(id)?.context).toMatchObject({
      scaler: 'small',
      type: 'container',
      backend: 'small',
      fake: true,
    });
  });

  it('buffers events until correlation, then relays them in order', async () => {
    const { manager, backend, clock, relayed } = setup();
    // The backend reports progress while its spawn call is answering.
    const release = backend.holdNext();
    const spawning = manager.requestScale({ jobId: 'job-1', labels: ['linux'] });
    await clock.settle();
    backend.spawned()[0]!.emit({ kind: 'image-pulled', message: 'pulled' });
    release();
    const id = spawnedId(await spawning);
    manager.onAgentRegistered(id, []);
    expect(relayed).toHaveLength(0);
    manager.correlateAgentToJob(id, 'run-1', 'job-1');
    expect(relayed.map(([r, j, e]) => `${r}/${j}/${e.source}:${e.kind}`)).toEqual([
      'run-1/job-1/manager:spawning',
      'run-1/job-1/backend:image-pulled',
      'run-1/job-1/manager:spawned',
      'run-1/job-1/manager:registered',
      'run-1/job-1/manager:busy',
    ]);
    backend.spawned()[0]!.emit({ kind: 'log', data: { line: 'hello' } });
    expect(relayed.at(-1)![2]).toMatchObject({ kind: 'log', data: { line: 'hello' } });
    // The job hears that its agent is done; after that, events wait for the next job.
    manager.onJobComplete(id);
    expect(relayed.at(-1)!.slice(0, 2)).toEqual(['run-1', 'job-1']);
    expect(relayed.at(-1)![2].kind).toBe('idle');
    const count = relayed.length;
    backend.spawned()[0]!.emit({ kind: 'log', data: { line: 'between jobs' } });
    expect(relayed).toHaveLength(count);
    manager.correlateAgentToJob(id, 'run-2', 'job-2');
    expect(relayed.slice(count).map(([r, j, e]) => `${r}/${j}/${e.kind}`)).toEqual([
      'run-2/job-2/log',
      'run-2/job-2/busy',
    ]);
  });

  it('an agent that registers, runs and leaves before spawn() resolves is still spawned', async () => {
    const { manager, backend, clock } = setup();
    const release = backend.holdNext();
    const pending = manager.requestScale({ jobId: 'job-1', labels: ['linux'] });
    await clock.settle();
    expect(manager.onAgentRegistered('small-1', [])).toEqual({
      boundJobId: 'job-1',
      mandatoryLabels: [],
    });
    await manager.onAgentDisconnected('small-1');
    release();
    expect(await pending).toMatchObject({ kind: 'spawned', agentId: 'small-1' });
    expect(backend.destroyed()).toEqual([]);
    expect(manager.getStatus()).toMatchObject({
      globalActiveCount: 0,
      globalUsage: { cpus: 0, memBytes: 0 },
      counters: { coldStarts: 1, spawnFailures: 0 },
    });
  });

  it('the buffer is bounded and says how many events it dropped', async () => {
    const { manager, backend, relayed } = setup({ maxBufferedEvents: 3 });
    const id = spawnedId(await manager.requestScale({ jobId: 'job-1', labels: ['linux'] }));
    for (let i = 0; i < 10; i++) backend.spawned()[0]!.emit({ kind: `e${i}` });
    manager.correlateAgentToJob(id, 'run-1', 'job-1');
    const kinds = relayed.map(([, , e]) => e.kind);
    expect(kinds[0]).toBe('events-dropped');
    expect(relayed[0]![2].data).toEqual({ dropped: 9 });
    expect(kinds.slice(1)).toEqual(['e7', 'e8', 'e9', 'busy']);
  });

  it('a throwing host callback does not break the books', async () => {
    const { manager } = setup({
      onEvent: () => {
        throw new Error('host bug');
      },
    });
    const id = spawnedId(await manager.requestScale({ jobId: 'job-1', labels: ['linux'] }));
    await manager.onAgentDisconnected(id);
    expect(manager.getStatus().globalActiveCount).toBe(0);
  });

  it('disconnect releases everything and is idempotent', async () => {
    const { manager } = setup();
    const id = spawnedId(await manager.requestScale({ jobId: 'job-1', labels: ['linux'] }));
    await manager.onAgentDisconnected(id);
    await manager.onAgentDisconnected(id);
    expect(manager.getStatus().globalUsage).toEqual({ cpus: 0, memBytes: 0 });
    expect(manager.getStatus().globalActiveCount).toBe(0);
  });
});

describe('pruning spawns that never register', () => {
  it('prunes after the timeout (default 5 minutes), releases, destroys and emits', async () => {
    const { manager, backend, clock, events } = setup();
    const id = spawnedId(await manager.requestScale({ jobId: 'job-1', labels: ['linux'] }));
    await clock.advance(299_999);
    await manager.maintain();
    expect(manager.getStatus().globalActiveCount).toBe(1);
    await clock.advance(1);
    await manager.maintain();
    const status = manager.getStatus();
    expect(status.globalActiveCount).toBe(0);
    expect(status.globalUsage.cpus).toBe(0);
    expect(status.counters.pruned).toBe(1);
    expect(backend.destroyed()).toEqual([id]);
    expect(events.find((e) => e.kind === 'pruned')).toMatchObject({ agentId: id });
    // The job can ask again.
    expect((await manager.requestScale({ jobId: 'job-1', labels: ['linux'] })).kind).toBe(
      'spawned',
    );
  });

  it('registered agents are never pruned', async () => {
    const { manager, clock } = setup({ registrationTimeoutMs: 1000 });
    const id = spawnedId(await manager.requestScale({ jobId: 'job-1', labels: ['linux'] }));
    manager.onAgentRegistered(id, []);
    await clock.advance(10_000);
    await manager.maintain();
    expect(manager.getStatus().globalActiveCount).toBe(1);
  });

  it('a spawn that hangs past the timeout is pruned; when it finally resolves the agent is destroyed', async () => {
    const { manager, backend, clock } = setup({ registrationTimeoutMs: 1000 });
    const release = backend.holdNext();
    const pending = manager.requestScale({ jobId: 'job-1', labels: ['linux'] });
    await clock.settle();
    await clock.advance(1000);
    await manager.maintain();
    // The backend may still start it: it keeps its capacity, but takes no job.
    const status = manager.getStatus();
    expect(status.globalActiveCount).toBe(1);
    expect(status.scalers[0]!.destroyingCount).toBe(1);
    expect(manager.canRunJob('small-1', ['linux'])).toBe(false);
    expect(backend.destroyed()).toEqual([]);
    // The job may ask again at once.
    const again = manager.requestScale({ jobId: 'job-1', labels: ['linux'] });
    release();
    expect(await again).toMatchObject({ kind: 'spawned', agentId: 'small-2' });
    const result = await pending;
    expect(result).toMatchObject({ kind: 'spawn-failed', stage: 'spawn' });
    expect(result.kind === 'spawn-failed' && isBackendError(result.error)).toBe(true);
    expect(backend.destroyed()).toEqual(['small-1']);
    expect(manager.getStatus().globalActiveCount).toBe(1);
    expect(manager.canRunJob('small-1', ['linux'])).toBe(false);
  });
});

describe('maintenance never rejects', () => {
  it('a failing pass becomes a maintenance-failed event', async () => {
    let calls = 0;
    const { manager, events } = setup({
      config: config({
        scalers: [
          {
            name: 'small',
            type: 'container',
            maxAgents: 3,
            labelSets: [{ labels: ['linux'] }],
            warmPool: { size: 1 },
          },
        ],
      }),
      generateAgentId: () => {
        calls++;
        throw new Error('id source down');
      },
    });
    await expect(manager.maintain()).resolves.toBeUndefined();
    expect(calls).toBe(1);
    expect(events.map((e) => e.kind)).toEqual(['maintenance-failed']);
    expect(manager.getStatus().globalActiveCount).toBe(0);
  });
});

describe('warm pool', () => {
  const warmConfig = (size: number, idleTimeoutSeconds = 60): ScalerConfigInput =>
    config({
      scalers: [
        {
          name: 'small',
          type: 'container',
          maxAgents: 3,
          labelSets: [{ labels: ['linux'], resources: { cpus: 1 } }],
          resourceCap: { maxCpu: 3 },
          warmPool: { size, idleTimeoutSeconds },
        },
      ],
    });

  it('replenishes to the target, counting warm spawns in flight and idle agents only', async () => {
    const { manager, backend } = setup({ config: warmConfig(2) });
    await manager.maintain();
    expect(backend.spawned().map((s) => s.warm)).toEqual([true, true]);
    expect(backend.spawned()[0]!.jobId).toBeUndefined();
    await manager.maintain();
    expect(backend.spawned()).toHaveLength(2);
    // A warm agent registers idle (no bound job), then takes a job: a warm hit.
    expect(manager.onAgentRegistered('small-1', [])).toEqual({ mandatoryLabels: [] });
    manager.onAgentRegistered('small-2', []);
    manager.correlateAgentToJob('small-1', 'run', 'job-1');
    const status = manager.getStatus();
    expect(status.counters.warmHits).toBe(1);
    expect(status.counters.warmSpawns).toBe(2);
    expect(status.counters.coldStarts).toBe(0);
    expect(status.warmPoolCount).toBe(1);
    // Busy agents do not count toward the target: one more is spawned.
    await manager.maintain();
    expect(backend.spawned()).toHaveLength(3);
  });

  it('warm spawns count against maxAgents and caps', async () => {
    const { manager } = setup({ config: warmConfig(3) });
    await manager.maintain();
    const result = await manager.requestScale({ jobId: 'job-1', labels: ['linux'] });
    expect(result).toMatchObject({ kind: 'at-capacity', limit: { limit: 'scaler-max-agents' } });
  });

  it('real demand comes first: no replenishment while jobs were refused for capacity', async () => {
    const { manager, backend, clock } = setup({ config: warmConfig(1), demandHoldMs: 5000 });
    for (const job of ['j1', 'j2', 'j3']) {
      spawnedId(await manager.requestScale({ jobId: job, labels: ['linux'] }));
    }
    expect((await manager.requestScale({ jobId: 'j4', labels: ['linux'] })).kind).toBe(
      'at-capacity',
    );
    await manager.onAgentDisconnected('small-1');
    await manager.maintain();
    expect(backend.spawned()).toHaveLength(3);
    // The waiting job gets the freed capacity.
    expect((await manager.requestScale({ jobId: 'j4', labels: ['linux'] })).kind).toBe('spawned');
    await manager.onAgentDisconnected('small-2');
    await clock.advance(5000);
    await manager.maintain();
    expect(backend.spawned().at(-1)!.warm).toBe(true);
  });

  it('destroys idle agents past their timeout, never busy ones', async () => {
    const { manager, backend, clock } = setup({ config: warmConfig(0, 60) });
    const idle = spawnedId(await manager.requestScale({ jobId: 'j1', labels: ['linux'] }));
    const busy = spawnedId(await manager.requestScale({ jobId: 'j2', labels: ['linux'] }));
    manager.onAgentRegistered(idle, []);
    manager.onAgentRegistered(busy, []);
    manager.correlateAgentToJob(busy, 'run', 'j2');
    manager.onJobComplete(idle);
    await clock.advance(59_000);
    await manager.maintain();
    expect(backend.destroyed()).toEqual([]);
    await clock.advance(1000);
    await manager.maintain();
    expect(backend.destroyed()).toEqual([idle]);
    const status = manager.getStatus();
    expect(status.globalActiveCount).toBe(1);
    expect(status.counters.idleDestroyed).toBe(1);
    await clock.advance(3_600_000);
    await manager.maintain();
    expect(backend.destroyed()).toEqual([idle]);
  });

  it('a failed destroy keeps the agent tracked and emits destroy-failed', async () => {
    const { manager, backend, clock, events } = setup({ config: warmConfig(0, 1) });
    const id = spawnedId(await manager.requestScale({ jobId: 'j1', labels: ['linux'] }));
    manager.onAgentRegistered(id, []);
    manager.onJobComplete(id);
    backend.script({ method: 'destroy', fail: new Error('boom destroying'), times: Infinity });
    await clock.advance(1000);
    await manager.maintain();
    expect(manager.getStatus().globalActiveCount).toBe(1);
    expect(events.some((e) => e.kind === 'destroy-failed')).toBe(true);
  });
});

describe('reload', () => {
  it('refuses an invalid config and changes nothing', async () => {
    const { manager } = setup();
    const result = await manager.reload({ ...config(), globalMaxAgents: -1 });
    expect(result.ok).toBe(false);
    expect(result.errors[0]!.path).toEqual(['globalMaxAgents']);
    expect(manager.getStatus().globalMaxAgents).toBe(10);
  });

  it('refuses a scaler without a backend', async () => {
    const { manager } = setup();
    const next = config();
    next.scalers.push({ name: 'new', type: 'x', maxAgents: 1, labelSets: [{ labels: [] }] });
    const result = await manager.reload(next);
    expect(result).toEqual({
      ok: false,
      errors: [{ path: ['scalers', 1, 'name'], message: expect.stringContaining('No backend') }],
    });
  });

  it('a lowered cap keeps running agents and refuses new work until usage falls', async () => {
    const { manager } = setup();
    const a = spawnedId(await manager.requestScale({ jobId: 'j1', labels: ['linux'] }));
    spawnedId(await manager.requestScale({ jobId: 'j2', labels: ['linux'] }));
    const lowered = config();
    lowered.scalers[0]!.resourceCap = { maxCpu: 1 };
    expect(await manager.reload(lowered)).toMatchObject({ ok: true, errors: [] });
    expect(manager.getStatus().globalActiveCount).toBe(2);
    expect(await manager.requestScale({ jobId: 'j3', labels: ['linux'] })).toMatchObject({
      kind: 'at-capacity',
      limit: { limit: 'scaler-cap', used: 2, max: 1 },
    });
    await manager.onAgentDisconnected(a);
    expect((await manager.requestScale({ jobId: 'j3', labels: ['linux'] })).kind).toBe(
      'at-capacity',
    );
    await manager.onAgentDisconnected('small-2');
    expect((await manager.requestScale({ jobId: 'j3', labels: ['linux'] })).kind).toBe('spawned');
  });

  it('a removed scaler takes no new work and retires with its last agent', async () => {
    const small = new FakeBackend();
    const big = new FakeBackend();
    const { manager } = setup({
      backends: [
        { name: 'small', backend: small },
        { name: 'big', backend: big },
      ],
    });
    const id = spawnedId(await manager.requestScale({ jobId: 'j1', labels: ['linux'] }));
    const next = config({
      scalers: [{ name: 'big', type: 'vm', maxAgents: 1, labelSets: [{ labels: ['linux'] }] }],
    });
    expect((await manager.reload(next)).ok).toBe(true);
    let status = manager.getStatus();
    expect(status.scalers.map((b) => [b.name, b.retiring, b.activeCount])).toEqual([
      ['big', false, 0],
      ['small', true, 1],
    ]);
    expect(await manager.requestScale({ jobId: 'j2', labels: ['linux'] })).toMatchObject({
      kind: 'spawned',
      scaler: 'big',
    });
    expect(await manager.requestScale({ jobId: 'j3', labels: ['linux'] })).toMatchObject({
      kind: 'at-capacity',
      scaler: 'big',
    });
    expect(
      await manager.requestScale({ jobId: 'j4', labels: ['scaler-primitives:scaler:small'] }),
    ).toEqual({
      kind: 'no-match',
      reasons: [
        { scaler: 'big', reason: 'labels', missing: ['scaler-primitives:scaler:small'] },
        { scaler: 'small', reason: 'retired' },
      ],
    });
    await manager.onAgentDisconnected(id);
    status = manager.getStatus();
    expect(status.scalers.map((b) => b.name)).toEqual(['big']);
  });

  it('new label sets match immediately (the match cache is cleared)', async () => {
    const { manager } = setup();
    expect((await manager.requestScale({ jobId: 'j1', labels: ['arm'] })).kind).toBe('no-match');
    const next = config();
    next.scalers[0]!.labelSets.push({ labels: ['arm'] });
    await manager.reload(next);
    expect((await manager.requestScale({ jobId: 'j1', labels: ['arm'] })).kind).toBe('spawned');
  });
});

describe('reconcile and shutdown', () => {
  it('releases agents the backend no longer lists, leaves spawns in flight alone', async () => {
    const { manager, backend, clock } = setup();
    const gone = spawnedId(await manager.requestScale({ jobId: 'j1', labels: ['linux'] }));
    const kept = spawnedId(await manager.requestScale({ jobId: 'j2', labels: ['linux'] }));
    // An agent someone else started on this backend: the manager never spawned it.
    await backend.spawn({ ...backend.spawned()[0]!, agentId: 'stranger', jobId: 'theirs' });
    const release = backend.holdNext();
    const pending = manager.requestScale({ jobId: 'j3', labels: ['linux'] });
    await clock.settle();
    await backend.crash(gone, { disconnect: false });
    const result = await manager.reconcile();
    expect(result).toEqual({
      released: [gone],
      untracked: [{ scaler: 'small', agentId: 'stranger' }],
      failed: [],
    });
    expect(manager.getAgent(kept)?.scaler).toBe('small');
    expect(manager.getStatus().globalActiveCount).toBe(2);
    expect(manager.getStatus().counters.reconciled).toBe(1);
    release();
    await pending;
  });

  it('a backend whose list() throws is reported and left alone', async () => {
    const { manager, backend } = setup();
    spawnedId(await manager.requestScale({ jobId: 'j1', labels: ['linux'] }));
    backend.script({ method: 'list', fail: new Error('api down'), times: Infinity });
    const result = await manager.reconcile();
    expect(result.failed).toHaveLength(1);
    expect(manager.getStatus().globalActiveCount).toBe(1);
  });

  it('shutdownAll destroys agents (or calls shutdown) and releases everything', async () => {
    const clock = new TestClock('2026-01-05T12:00:00Z');
    const plain = new FakeBackend({ clock, list: false, shutdown: false });
    const withShutdown = new FakeBackend({ clock });
    const manager = new ScalerManager({
      clock,
      config: config({
        scalers: [
          { name: 'a', type: 'c', maxAgents: 2, labelSets: [{ labels: ['a'] }] },
          { name: 'b', type: 'c', maxAgents: 2, labelSets: [{ labels: ['b'] }] },
        ],
      }),
      backends: [
        { name: 'a', backend: plain },
        { name: 'b', backend: withShutdown },
      ],
    });
    const a = spawnedId(await manager.requestScale({ jobId: 'j1', labels: ['a'] }));
    spawnedId(await manager.requestScale({ jobId: 'j2', labels: ['b'] }));
    manager.start();
    await manager.shutdownAll();
    expect(plain.destroyed()).toEqual([a]);
    expect(withShutdown.callsOf('shutdown')).toHaveLength(1);
    expect(withShutdown.destroyed()).toEqual([]);
    const status = manager.getStatus();
    expect(status.globalActiveCount).toBe(0);
    expect(status.globalUsage).toEqual({ cpus: 0, memBytes: 0 });
  });
});
