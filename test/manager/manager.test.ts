import {
  type ScalerConfigInput,
  type ScalerEvent,
  ScalerManager,
  type ScalerManagerOptions,
} from 'scaler-primitives/manager';
import { FakeBackend, MemoryPoolLedger, TestClock } from 'scaler-primitives/testing';
import { describe, expect, it, vi } from 'vitest';
import { LedgerLeaseExpiredError } from '../../src/errors/ledger.js';

const start = '2026-01-05T12:00:00Z';

const Gi = 2 ** 30;

function config(overrides: Partial<ScalerConfigInput> = {}): ScalerConfigInput {
  return {
    globalMaxAgents: 10,
    defaults: { resources: { requests: { cpus: 1, memory: '1Gi' } } },
    scalers: [
      {
        name: 'small',
        type: 'container',
        maxAgents: 3,
        labelSets: [{ labels: ['linux', 'small'] }, { labels: ['linux', 'docker'] }],
        resourceCap: { maxCpu: 4 },
      },
      {
        name: 'gpu',
        type: 'vm',
        maxAgents: 2,
        mandatoryLabels: ['gpu'],
        labelSets: [{ labels: ['linux', 'gpu'], resources: { cpus: 2, memory: '4Gi' } }],
      },
    ],
    ...overrides,
  };
}

function setup(options: Partial<ScalerManagerOptions> = {}) {
  const clock = new TestClock(start);
  const small = new FakeBackend({ clock, name: 'small' });
  const gpu = new FakeBackend({ clock, name: 'gpu' });
  const events: ScalerEvent[] = [];
  let n = 0;
  const manager = new ScalerManager({
    config: config(),
    clock,
    backends: [
      { name: 'small', backend: small, platformLabels: ['scaler-primitives:os:linux'] },
      { name: 'gpu', backend: gpu },
    ],
    onEvent: (e) => events.push(e),
    generateAgentId: (scaler) => `${scaler}-${++n}`,
    ...options,
  });
  return { manager, small, gpu, events };
}

describe('ScalerManager.requestScale: result kinds', () => {
  it('spawned: reserves, passes the request to the backend, names the scaler', async () => {
    const { manager, small } = setup();
    const result = await manager.requestScale({ jobId: 'job-1', labels: ['linux'] });
    expect(result).toEqual({
      kind: 'spawned',
      scaler: 'small',
      agentId: 'small-1',
      labels: ['linux', 'small', 'scaler-primitives:scaler:small', 'scaler-primitives:os:linux'],
      resources: { requests: { cpus: 1, memBytes: Gi }, limits: { cpus: 1, memBytes: Gi } },
    });
    expect(small.spawned()).toHaveLength(1);
    expect(small.spawned()[0]).toMatchObject({
      agentId: 'small-1',
      scaler: 'small',
      jobId: 'job-1',
      warm: false,
      labelSetIndex: 0,
      mandatoryLabels: [],
    });
    const status = manager.getStatus();
    expect(status.globalActiveCount).toBe(1);
    expect(status.spawningCount).toBe(1);
    expect(status.globalUsage).toEqual({ cpus: 1, memBytes: Gi });
    expect(status.scalers[0]!.usage).toEqual({ cpus: 1, memBytes: Gi });
    expect(status.counters.coldStarts).toBe(1);
  });

  it('uses the first label set that fits, and the job resources over the layers', async () => {
    const { manager, small } = setup();
    const result = await manager.requestScale({
      jobId: 'job-1',
      labels: ['docker'],
      resources: {
        limits: { cpus: '1500m' },
      },
    });
    expect(result.kind).toBe('spawned');
    expect(small.spawned()[0]!.labelSetIndex).toBe(1);
    expect(small.spawned()[0]!.resources).toEqual({
      requests: { cpus: 1.5, memBytes: Gi },
      limits: { cpus: 1.5, memBytes: Gi },
    });
  });

  it('a job may pin a scaler through its automatic label', async () => {
    const { manager } = setup();
    const result = await manager.requestScale({
      jobId: 'job-1',
      labels: ['scaler-primitives:scaler:small', 'scaler-primitives:os:linux'],
    });
    expect(result).toMatchObject({ kind: 'spawned', scaler: 'small' });
    const none = await manager.requestScale({
      jobId: 'job-2',
      labels: ['scaler-primitives:scaler:gpu', 'gpu'],
    });
    expect(none.kind).toBe('spawned');
    expect(none.kind === 'spawned' && none.scaler).toBe('gpu');
  });

  it('already-spawning: a second request for the same job while the spawn is in flight', async () => {
    const { manager, small } = setup();
    const release = small.holdNext();
    const first = manager.requestScale({ jobId: 'job-1', labels: ['linux'] });
    const second = await manager.requestScale({ jobId: 'job-1', labels: ['linux'] });
    expect(second).toEqual({ kind: 'already-spawning', scaler: 'small', agentId: 'small-1' });
    release();
    expect((await first).kind).toBe('spawned');
    // Still spawning (not registered): still already-spawning.
    expect((await manager.requestScale({ jobId: 'job-1', labels: ['linux'] })).kind).toBe(
      'already-spawning',
    );
    manager.onAgentRegistered('small-1', []);
    expect((await manager.requestScale({ jobId: 'job-1', labels: ['linux'] })).kind).toBe(
      'spawned',
    );
    expect(small.spawned()).toHaveLength(2);
  });

  it('no-match: says why for each scaler', async () => {
    const { manager } = setup();
    const labels = await manager.requestScale({ jobId: 'job-1', labels: ['windows'] });
    expect(labels).toEqual({
      kind: 'no-match',
      reasons: [
        { scaler: 'small', reason: 'labels', missing: ['windows'] },
        { scaler: 'gpu', reason: 'mandatory', missing: ['gpu'] },
      ],
    });
    const exclude = await manager.requestScale({
      jobId: 'job-2',
      labels: ['linux'],
      excludeLabels: ['small', 'docker'],
    });
    expect(exclude).toEqual({
      kind: 'no-match',
      reasons: [
        { scaler: 'small', reason: 'exclude', excluded: ['small'] },
        { scaler: 'gpu', reason: 'mandatory', missing: ['gpu'] },
      ],
    });
  });

  it('the match cache keeps label lists apart that join to the same text', async () => {
    const { manager } = setup();
    expect((await manager.requestScale({ jobId: 'j1', labels: ['linux', 'small'] })).kind).toBe(
      'spawned',
    );
    expect((await manager.requestScale({ jobId: 'j2', labels: ['linux\nsmall'] })).kind).toBe(
      'no-match',
    );
    expect((await manager.requestScale({ jobId: 'j3', labels: ['linux,small'] })).kind).toBe(
      'no-match',
    );
  });

  it('the mandatory gate: a gpu agent only for jobs naming gpu', async () => {
    const { manager, gpu } = setup();
    const plain = await manager.requestScale({ jobId: 'job-1', labels: ['linux'] });
    expect(plain).toMatchObject({ kind: 'spawned', scaler: 'small' });
    const gpuJob = await manager.requestScale({ jobId: 'job-2', labels: ['linux', 'gpu'] });
    expect(gpuJob).toMatchObject({ kind: 'spawned', scaler: 'gpu' });
    expect(gpu.spawned()[0]!.mandatoryLabels).toEqual(['gpu']);
    const reg = manager.onAgentRegistered('gpu-2', ['linux', 'gpu']);
    expect(reg).toEqual({ boundJobId: 'job-2', mandatoryLabels: ['gpu'] });
    // Queue drain applies the same gate.
    expect(manager.canRunJob('gpu-2', ['linux'])).toBe(false);
    expect(manager.canRunJob('gpu-2', ['linux', 'gpu'])).toBe(true);
    expect(manager.canRunJob('static-agent', ['linux'])).toBe(true);
  });

  it('at-capacity on the scaler max, falling through to the next matching scaler first', async () => {
    const { manager } = setup({
      config: config({
        scalers: [
          { name: 'small', type: 'c', maxAgents: 1, labelSets: [{ labels: ['linux'] }] },
          { name: 'gpu', type: 'v', maxAgents: 1, labelSets: [{ labels: ['linux'] }] },
        ],
      }),
    });
    expect(await manager.requestScale({ jobId: 'j1', labels: ['linux'] })).toMatchObject({
      scaler: 'small',
    });
    expect(await manager.requestScale({ jobId: 'j2', labels: ['linux'] })).toMatchObject({
      scaler: 'gpu',
    });
    const full = await manager.requestScale({ jobId: 'j3', labels: ['linux'] });
    expect(full).toEqual({
      kind: 'at-capacity',
      scaler: 'small',
      limit: { limit: 'scaler-max-agents', scaler: 'small', used: 1, max: 1, neverFits: false },
      refusals: [
        { limit: 'scaler-max-agents', scaler: 'small', used: 1, max: 1, neverFits: false },
        { limit: 'scaler-max-agents', scaler: 'gpu', used: 1, max: 1, neverFits: false },
      ],
    });
  });

  it('at-capacity on globalMaxAgents', async () => {
    const { manager } = setup({ config: config({ globalMaxAgents: 1 }) });
    await manager.requestScale({ jobId: 'j1', labels: ['linux'] });
    const result = await manager.requestScale({ jobId: 'j2', labels: ['linux'] });
    expect(result).toMatchObject({
      kind: 'at-capacity',
      limit: { limit: 'global-max-agents', used: 1, max: 1 },
    });
  });

  it('at-capacity on a scaler cap and on the orchestrator cap, with the numbers', async () => {
    const { manager } = setup();
    for (const job of ['j1', 'j2']) {
      await manager.requestScale({
        jobId: job,
        labels: ['linux'],
        resources: { requests: { cpus: 2 } },
      });
    }
    const scalerCap = await manager.requestScale({
      jobId: 'j3',
      labels: ['linux'],
      resources: { requests: { cpus: 1 } },
    });
    expect(scalerCap).toMatchObject({
      kind: 'at-capacity',
      limit: { limit: 'scaler-cap', dimension: 'cpu', requested: 1, used: 4, max: 4 },
    });

    const other = setup({ config: config({ resourceCap: { maxMemory: '3Gi' } }) });
    await other.manager.requestScale({
      jobId: 'j1',
      labels: ['linux'],
      resources: { requests: { memory: '2Gi' } },
    });
    const globalCap = await other.manager.requestScale({
      jobId: 'j2',
      labels: ['linux'],
      resources: {
        requests: { memory: '2Gi' },
      },
    });
    expect(globalCap).toMatchObject({
      kind: 'at-capacity',
      limit: { limit: 'global-cap', dimension: 'memory', requested: 2 * Gi, used: 2 * Gi },
    });
  });

  it('never-fits: a request above a cap even when empty, at every matching scaler', async () => {
    const { manager, small } = setup();
    const result = await manager.requestScale({
      jobId: 'j1',
      labels: ['linux'],
      resources: { requests: { cpus: 5 } },
    });
    expect(result).toEqual({
      kind: 'never-fits',
      scaler: 'small',
      limit: {
        limit: 'scaler-cap',
        scaler: 'small',
        dimension: 'cpu',
        requested: 5,
        used: 0,
        max: 4,
        neverFits: true,
      },
      refusals: [expect.objectContaining({ limit: 'scaler-cap', neverFits: true })],
    });
    expect(small.spawned()).toHaveLength(0);
    expect(manager.getStatus().globalActiveCount).toBe(0);
  });

  it('never-fits is reported even when the scaler is also full right now', async () => {
    const { manager } = setup({
      config: config({
        scalers: [
          {
            name: 'small',
            type: 'c',
            maxAgents: 1,
            resourceCap: { maxCpu: 2 },
            labelSets: [{ labels: ['linux'] }],
          },
        ],
      }),
      backends: [{ name: 'small', backend: new FakeBackend() }],
    });
    await manager.requestScale({ jobId: 'j1', labels: ['linux'] });
    const result = await manager.requestScale({
      jobId: 'j2',
      labels: ['linux'],
      resources: { requests: { cpus: 3 } },
    });
    expect(result.kind).toBe('never-fits');
  });

  it('maxAgents: 0 spawns nothing (at-capacity, so a drained scaler does not fail jobs)', async () => {
    const backend = new FakeBackend();
    const { manager } = setup({
      config: config({
        scalers: [{ name: 'small', type: 'c', maxAgents: 0, labelSets: [{ labels: ['linux'] }] }],
      }),
      backends: [{ name: 'small', backend }],
    });
    const result = await manager.requestScale({ jobId: 'j1', labels: ['linux'] });
    expect(result).toMatchObject({
      kind: 'at-capacity',
      limit: { limit: 'scaler-max-agents', max: 0 },
    });
    expect(backend.spawned()).toHaveLength(0);
  });

  it('spawn-failed: a throwing spawn rolls usage back to exactly zero', async () => {
    const { manager, small, events } = setup();
    small.failNext(1, new Error('boom spawning small-1'));
    const result = await manager.requestScale({
      jobId: 'j1',
      labels: ['linux'],
      resources: {
        requests: { cpus: '0.1', memory: 3 },
      },
    });
    expect(result).toMatchObject({
      kind: 'spawn-failed',
      scaler: 'small',
      agentId: 'small-1',
      stage: 'spawn',
    });
    expect(result.kind === 'spawn-failed' && String(result.error)).toContain('boom');
    const status = manager.getStatus();
    expect(status.globalActiveCount).toBe(0);
    expect(status.globalUsage).toEqual({ cpus: 0, memBytes: 0 });
    expect(status.scalers[0]!.usage).toEqual({ cpus: 0, memBytes: 0 });
    expect(status.counters.spawnFailures).toBe(1);
    expect(events.map((e) => e.kind)).toEqual(['spawning', 'spawn-failed']);
    // The job is not stuck in already-spawning.
    expect((await manager.requestScale({ jobId: 'j1', labels: ['linux'] })).kind).toBe('spawned');
  });

  it('rejects malformed arguments with TypeErrors', async () => {
    const { manager } = setup();
    await expect(manager.requestScale({ jobId: 'j', labels: 'linux' as never })).rejects.toThrow(
      TypeError,
    );
    await expect(manager.requestScale({ jobId: '', labels: ['linux'] })).rejects.toThrow(/jobId/);
    await expect(
      manager.requestScale({ jobId: 'j', labels: ['linux'], excludeLabels: [1] as never }),
    ).rejects.toThrow(/excludeLabels/);
  });

  it('bad job resources throw the resources error naming the layer', async () => {
    const { manager } = setup();
    await expect(
      manager.requestScale({
        jobId: 'j',
        labels: ['linux'],
        resources: { requests: { cpus: 2 }, limits: { cpus: 1 } },
      }),
    ).rejects.toThrow(/job/);
    expect(manager.getStatus().globalActiveCount).toBe(0);
  });
});

describe('ScalerManager: machine pools', () => {
  /**
   * A manager with pool `host` (3 CPUs) in a MemoryPoolLedger; `holdElsewhere`
   * makes another process hold part of it; `failReserve` makes the ledger's
   * reserve throw until it is called without an error.
   */
  function poolSetup(events: ScalerEvent[] = []) {
    const clock = new TestClock(start);
    const ledger = new MemoryPoolLedger({ instanceId: 'this-process', clock });
    let failure: Error | undefined;
    const reserve = ledger.reserve.bind(ledger);
    ledger.reserve = async (...args) => {
      if (failure) throw failure;
      return reserve(...args);
    };
    const peer = new MemoryPoolLedger({
      instanceId: 'another-process',
      store: ledger.store,
      clock,
    });
    const holdElsewhere = async (cpus: number) => {
      peer.registerPool('host', { maxCpu: 3 });
      await peer.release('host', 'foreign');
      if (cpus > 0) expect((await peer.reserve('host', 'foreign', cpus, 0)).ok).toBe(true);
    };
    const backend = new FakeBackend({ clock, shutdown: false });
    let n = 0;
    const manager = new ScalerManager({
      clock,
      config: {
        globalMaxAgents: 10,
        machinePools: { host: { maxCpu: 3 } },
        scalers: [
          {
            name: 'a',
            type: 'c',
            maxAgents: 5,
            machinePool: 'host',
            labelSets: [{ labels: ['linux'], resources: { cpus: 1 } }],
          },
        ],
      },
      backends: [{ name: 'a', backend }],
      ledgers: { host: ledger },
      generateAgentId: () => `a-${++n}`,
      onEvent: (e) => events.push(e),
    });
    const usage = () => ledger.getUsage('host');
    return {
      manager,
      backend,
      ledger,
      events,
      usage,
      holdElsewhere,
      failReserve: (error?: Error) => {
        failure = error;
      },
    };
  }

  it('pool usage in getStatus counts only rows the ledger granted, not a reservation it has not answered or refused', async () => {
    const { manager, ledger, holdElsewhere } = poolSetup();
    // The ledger answers a reserve only when the test says so.
    let answer!: () => void;
    const answered = new Promise<void>((resolve) => {
      answer = resolve;
    });
    const reserve = ledger.reserve.bind(ledger);
    ledger.reserve = async (...args) => {
      await answered;
      return reserve(...args);
    };
    await holdElsewhere(3); // another process holds the pool
    const pending = manager.requestScale({ jobId: 'j1', labels: ['linux'] });
    await Promise.resolve();
    expect(manager.getStatus().pools[0]!.usage).toEqual({ cpus: 0, memBytes: 0 });
    answer();
    expect(await pending).toMatchObject({ kind: 'at-capacity' });
    expect(manager.getStatus().pools[0]!.usage).toEqual({ cpus: 0, memBytes: 0 });
    await holdElsewhere(0);
    expect(await manager.requestScale({ jobId: 'j1', labels: ['linux'] })).toMatchObject({
      kind: 'spawned',
    });
    expect(manager.getStatus().pools[0]!.usage).toEqual({ cpus: 1, memBytes: 0 });
  });

  it('registers pools and reserves in the pool after the in-memory caps', async () => {
    const { manager, ledger, usage } = poolSetup();
    await manager.requestScale({ jobId: 'j1', labels: ['linux'] });
    // The cap the manager registered is the one the ledger stored.
    expect(ledger.store.read('host')?.cap).toEqual({ maxCpu: 3 });
    expect(await usage()).toEqual({ cpus: 1, memBytes: 0 });
    expect(manager.getStatus().pools).toEqual([
      { name: 'host', cap: { maxCpu: 3 }, usage: { cpus: 1, memBytes: 0 } },
    ]);
    expect(manager.getStatus().scalers[0]!.machinePool).toBe('host');
  });

  it('a full pool (another process holds it) is at-capacity and rolls the caps back', async () => {
    const { manager, backend, holdElsewhere } = poolSetup();
    await holdElsewhere(2.5);
    const result = await manager.requestScale({ jobId: 'j1', labels: ['linux'] });
    expect(result).toMatchObject({
      kind: 'at-capacity',
      limit: { limit: 'pool-cap', pool: 'host', dimension: 'cpu', used: 2.5, max: 3 },
    });
    expect(backend.spawned()).toHaveLength(0);
    expect(manager.getStatus().globalUsage).toEqual({ cpus: 0, memBytes: 0 });
    expect(manager.getStatus().globalActiveCount).toBe(0);
  });

  it('a request above the pool cap never fits, without asking the ledger', async () => {
    const { manager, failReserve } = poolSetup();
    failReserve(new Error('must not be called'));
    const result = await manager.requestScale({
      jobId: 'j1',
      labels: ['linux'],
      resources: { requests: { cpus: 4 } },
    });
    expect(result).toMatchObject({ kind: 'never-fits', limit: { limit: 'pool-cap', max: 3 } });
  });

  it('a throwing ledger is spawn-failed at the reserve stage, everything rolled back', async () => {
    const { manager, backend, failReserve } = poolSetup();
    failReserve(new Error('ledger busy'));
    const result = await manager.requestScale({ jobId: 'j1', labels: ['linux'] });
    expect(result).toMatchObject({ kind: 'spawn-failed', stage: 'reserve' });
    expect(backend.spawned()).toHaveLength(0);
    expect(manager.getStatus().globalUsage).toEqual({ cpus: 0, memBytes: 0 });
    failReserve(undefined);
    expect((await manager.requestScale({ jobId: 'j1', labels: ['linux'] })).kind).toBe('spawned');
  });

  it('a lost lease names the agents whose pool rows are gone (reservation-lost)', async () => {
    const { manager, events, failReserve } = poolSetup();
    await manager.requestScale({ jobId: 'j1', labels: ['linux'] });
    await manager.requestScale({ jobId: 'j2', labels: ['linux'] });
    // A peer reaped a-1 while we stalled; the file ledger names it.
    failReserve(new LedgerLeaseExpiredError('host', 'lease lapsed', ['a-1']));
    const result = await manager.requestScale({ jobId: 'j3', labels: ['linux'] });
    expect(result).toMatchObject({ kind: 'spawn-failed', stage: 'reserve' });
    const lost = events.filter((e) => e.kind === 'reservation-lost');
    expect(lost.map((e) => e.agentId)).toEqual(['a-1']);
    expect(lost[0]!.data).toMatchObject({ pool: 'host', certain: true });
    // A ledger that cannot name the rows (NATS): every agent of ours in the pool.
    events.length = 0;
    failReserve(new LedgerLeaseExpiredError('host', 'lease lapsed'));
    await manager.requestScale({ jobId: 'j4', labels: ['linux'] });
    expect(events.filter((e) => e.kind === 'reservation-lost').map((e) => e.agentId)).toEqual([
      'a-1',
      'a-2',
    ]);
    // Other reserve failures say nothing of the other agents.
    events.length = 0;
    failReserve(new Error('disk full'));
    await manager.requestScale({ jobId: 'j5', labels: ['linux'] });
    expect(events.some((e) => e.kind === 'reservation-lost')).toBe(false);
  });

  it('a throwing spawn releases the pool row too', async () => {
    const { manager, backend, usage } = poolSetup();
    backend.failNext(1);
    expect((await manager.requestScale({ jobId: 'j1', labels: ['linux'] })).kind).toBe(
      'spawn-failed',
    );
    await Promise.resolve();
    await new Promise((r) => setImmediate(r));
    expect(await usage()).toEqual({ cpus: 0, memBytes: 0 });
  });

  it('disconnect releases the pool row; shutdownAll releases this instance rows', async () => {
    const { manager, ledger, usage } = poolSetup();
    const started = vi.spyOn(ledger, 'start');
    const stopped = vi.spyOn(ledger, 'stop');
    const releasedAll = vi.spyOn(ledger, 'releaseAllForInstance');
    const a = await manager.requestScale({ jobId: 'j1', labels: ['linux'] });
    await manager.requestScale({ jobId: 'j2', labels: ['linux'] });
    expect((await usage()).cpus).toBe(2);
    await manager.onAgentDisconnected(a.kind === 'spawned' ? a.agentId : '');
    expect((await usage()).cpus).toBe(1);
    manager.start();
    expect(started).toHaveBeenCalledTimes(1);
    await manager.shutdownAll();
    expect((await usage()).cpus).toBe(0);
    expect(releasedAll).toHaveBeenCalledTimes(1);
    expect(stopped).toHaveBeenCalledTimes(1);
  });

  it('a pool without a ledger is a ConfigError at construction', () => {
    expect(
      () =>
        new ScalerManager({
          config: {
            globalMaxAgents: 1,
            machinePools: { host: {} },
            scalers: [
              {
                name: 'a',
                type: 'c',
                maxAgents: 1,
                machinePool: 'host',
                labelSets: [{ labels: [] }],
              },
            ],
          },
          backends: [{ name: 'a', backend: new FakeBackend() }],
        }),
    ).toThrow(/scalers\[0\]\.machinePool: .*no `ledgers`/);
  });
});

describe('ScalerManager: construction', () => {
  it('a scaler without a backend is a ConfigError with its path', () => {
    expect(
      () =>
        new ScalerManager({
          config: config(),
          backends: [{ name: 'small', backend: new FakeBackend() }],
        }),
    ).toThrow(/scalers\[1\]\.name: No backend was given for scaler "gpu"/);
  });

  it('platform labels must use the reserved prefix', () => {
    expect(
      () =>
        new ScalerManager({
          config: config(),
          backends: [
            { name: 'small', backend: new FakeBackend(), platformLabels: ['os:linux'] },
            { name: 'gpu', backend: new FakeBackend() },
          ],
        }),
    ).toThrow(/Platform label "os:linux"/);
  });

  it('duplicate backends and bad timings are TypeErrors', () => {
    const b = new FakeBackend();
    expect(
      () =>
        new ScalerManager({
          config: config(),
          backends: [
            { name: 'small', backend: b },
            { name: 'small', backend: b },
          ],
        }),
    ).toThrow(TypeError);
    expect(() => setup({ registrationTimeoutMs: -1 })).toThrow(/registrationTimeoutMs/);
  });
});
