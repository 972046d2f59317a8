/**
 * Extended resources through the manager: a job's GPUs flow from resolve to
 * the scaler and orchestrator caps, into the pool row (a real MemoryPoolLedger
 * shared by two replicas) and to the backend's spawn request; a scaler that
 * neither caps nor provides a resource answers never-fits naming it; status
 * shows usage per resource.
 */

import {
  type ScalerConfigInput,
  ScalerManager,
  type ScalerManagerOptions,
  validateScalerConfig,
} from 'scaler-primitives/manager';
import {
  FakeBackend,
  MemoryPoolLedger,
  MemoryPoolStore,
  TestClock,
} from 'scaler-primitives/testing';
import { describe, expect, it } from 'vitest';
import { isInvalidInputError } from '../../src/errors/input.js';

const gpu = 'nvidia.com/gpu';
const fpga = 'example.com/fpga';

const config: ScalerConfigInput = {
  globalMaxAgents: 10,
  machinePools: { gpuhost: { maxCpu: 16, maxExtended: { [gpu]: 2 }, provides: [fpga] } },
  scalers: [
    {
      name: 'gpu',
      type: 'firecracker',
      maxAgents: 4,
      machinePool: 'gpuhost',
      resourceCap: { maxCpu: 8, maxExtended: { [gpu]: 3 }, provides: [fpga] },
      labelSets: [{ labels: ['linux', 'gpu'], resources: { cpus: 1 } }],
    },
    {
      name: 'plain',
      type: 'firecracker',
      maxAgents: 4,
      labelSets: [{ labels: ['linux', 'small'], resources: { cpus: 1 } }],
    },
  ],
};

function manager(
  store: MemoryPoolStore,
  instanceId: string,
  options: Partial<ScalerManagerOptions> = {},
  clock = new TestClock('2026-01-05T12:00:00Z'),
) {
  const gpuBackend = new FakeBackend({ clock });
  const plain = new FakeBackend({ clock });
  const ledger = new MemoryPoolLedger({ instanceId, store, clock });
  let n = 0;
  const m = new ScalerManager({
    config,
    backends: [
      { name: 'gpu', backend: gpuBackend },
      { name: 'plain', backend: plain },
    ],
    ledgers: { gpuhost: ledger },
    clock,
    generateAgentId: (scaler) => `${instanceId}-${scaler}-${++n}`,
    random: () => 0.5,
    ...options,
  });
  return { manager: m, gpuBackend, plain, ledger };
}

const oneGpu = { requests: { cpus: 1, [gpu]: 1 } };

describe('extended resources in the manager', () => {
  it('a GPU job spawns with its GPU limit, holds a pool row with it, and status counts it', async () => {
    const { manager: m, gpuBackend, ledger } = manager(new MemoryPoolStore(), 'a');
    const result = await m.requestScale({
      jobId: 'j1',
      labels: ['linux', 'gpu'],
      resources: oneGpu,
    });
    expect(result).toMatchObject({ kind: 'spawned', scaler: 'gpu' });
    expect(gpuBackend.spawned()[0]!.resources.limits.extended).toEqual({ [gpu]: 1 });
    expect(gpuBackend.spawned()[0]!.resources.requests.extended).toEqual({ [gpu]: 1 });
    expect((await ledger.list('gpuhost')).map((r) => r.extended)).toEqual([{ [gpu]: 1 }]);
    const status = m.getStatus();
    expect(status.globalUsage).toEqual({ cpus: 1, memBytes: 0, extended: { [gpu]: 1 } });
    expect(status.scalers.find((b) => b.name === 'gpu')!.usage.extended).toEqual({ [gpu]: 1 });
    expect(status.pools[0]!.usage).toEqual({ cpus: 1, memBytes: 0, extended: { [gpu]: 1 } });
    await m.shutdownAll();
  });

  it('two replicas share the pool GPU cap through the ledger', async () => {
    const store = new MemoryPoolStore();
    const clock = new TestClock('2026-01-05T12:00:00Z');
    const a = manager(store, 'a', {}, clock);
    const b = manager(store, 'b', {}, clock);
    expect(
      (await a.manager.requestScale({ jobId: 'j1', labels: ['linux', 'gpu'], resources: oneGpu }))
        .kind,
    ).toBe('spawned');
    expect(
      (await b.manager.requestScale({ jobId: 'j2', labels: ['linux', 'gpu'], resources: oneGpu }))
        .kind,
    ).toBe('spawned');
    // Each replica's scaler cap (3) has room; the shared pool (2) has not.
    const third = await a.manager.requestScale({
      jobId: 'j3',
      labels: ['linux', 'gpu'],
      resources: oneGpu,
    });
    expect(third).toMatchObject({
      kind: 'at-capacity',
      limit: { limit: 'pool-cap', pool: 'gpuhost', dimension: gpu, used: 2, max: 2 },
    });
    expect(a.gpuBackend.spawned()).toHaveLength(1);
    await a.manager.shutdownAll();
    await b.manager.shutdownAll();
  });

  it('never-fits names the resource: more than the caps hold, or a scaler without it', async () => {
    const { manager: m, gpuBackend, plain } = manager(new MemoryPoolStore(), 'a');
    // The scaler caps 3, the pool 2: the pool refuses before anything is held.
    expect(
      await m.requestScale({
        jobId: 'big',
        labels: ['linux', 'gpu'],
        resources: { requests: { cpus: 1, [gpu]: 3 } },
      }),
    ).toMatchObject({
      kind: 'never-fits',
      limit: { limit: 'pool-cap', dimension: gpu, requested: 3, max: 2, neverFits: true },
    });
    expect(
      await m.requestScale({
        jobId: 'bigger',
        labels: ['linux', 'gpu'],
        resources: { requests: { cpus: 1, [gpu]: 4 } },
      }),
    ).toMatchObject({
      kind: 'never-fits',
      limit: { limit: 'scaler-cap', dimension: gpu, requested: 4, max: 3 },
    });
    // 'plain' has no cap at all and does not provide GPUs.
    expect(
      await m.requestScale({ jobId: 'on-plain', labels: ['linux', 'small'], resources: oneGpu }),
    ).toMatchObject({
      kind: 'never-fits',
      scaler: 'plain',
      limit: { limit: 'scaler-cap', scaler: 'plain', dimension: gpu, max: 0, neverFits: true },
    });
    expect(gpuBackend.spawned()).toHaveLength(0);
    expect(plain.spawned()).toHaveLength(0);
    // A provided resource without a count cap is granted.
    const fp = await m.requestScale({
      jobId: 'fpga',
      labels: ['linux', 'gpu'],
      resources: {
        requests: { cpus: 1, [fpga]: 2 },
      },
    });
    expect(fp).toMatchObject({ kind: 'spawned', scaler: 'gpu' });
    expect(gpuBackend.spawned()[0]!.resources.limits.extended).toEqual({ [fpga]: 2 });
    await m.shutdownAll();
  });

  it('releases the GPU with the agent', async () => {
    const { manager: m, ledger } = manager(new MemoryPoolStore(), 'a');
    const first = await m.requestScale({
      jobId: 'j1',
      labels: ['linux', 'gpu'],
      resources: {
        requests: { cpus: 1, [gpu]: 2 },
      },
    });
    if (first.kind !== 'spawned') throw new Error(`expected spawned, got ${first.kind}`);
    expect(
      (await m.requestScale({ jobId: 'j2', labels: ['linux', 'gpu'], resources: oneGpu })).kind,
    ).toBe('at-capacity');
    await m.onAgentDisconnected(first.agentId);
    expect(await ledger.list('gpuhost')).toEqual([]);
    expect(m.getStatus().globalUsage).toEqual({ cpus: 0, memBytes: 0 });
    expect(
      (await m.requestScale({ jobId: 'j2', labels: ['linux', 'gpu'], resources: oneGpu })).kind,
    ).toBe('spawned');
    await m.shutdownAll();
  });

  it('job resources accept extended names and still refuse unknown keys', async () => {
    const { manager: m } = manager(new MemoryPoolStore(), 'a');
    await expect(
      m.requestScale({
        jobId: 'typo',
        labels: ['linux', 'small'],
        resources: { requests: { gpu: 1 } } as never,
      }),
    ).rejects.toSatisfy(isInvalidInputError);
    await expect(
      m.requestScale({
        jobId: 'half',
        labels: ['linux', 'gpu'],
        resources: { requests: { [gpu]: 1.5 } },
      }),
    ).rejects.toThrow(/whole/);
    await m.shutdownAll();
  });
});

describe('LimitRange-like limits in the manager', () => {
  const GiB = 2 ** 30;
  const limited: ScalerConfigInput = {
    globalMaxAgents: 10,
    limits: { [gpu]: { max: 1 } },
    scalers: [
      {
        name: 'gpu',
        type: 'firecracker',
        maxAgents: 4,
        resourceCap: { maxExtended: { [gpu]: 4 } },
        limits: {
          cpus: { max: '2', defaultRequest: '500m', default: '1' },
          memory: { defaultRequest: '1Gi', default: '2Gi', maxLimitRequestRatio: 2 },
        },
        labelSets: [{ labels: ['linux', 'gpu'] }],
      },
    ],
  };

  function limitedManager() {
    const clock = new TestClock('2026-01-05T12:00:00Z');
    const backend = new FakeBackend({ clock });
    const m = new ScalerManager({
      config: limited,
      backends: [{ name: 'gpu', backend }],
      clock,
      random: () => 0.5,
    });
    return { m, backend };
  }

  it('fills what no layer declares from the scaler policy defaults', async () => {
    const { m, backend } = limitedManager();
    expect((await m.requestScale({ jobId: 'j1', labels: ['linux', 'gpu'] })).kind).toBe('spawned');
    expect(backend.spawned()[0]!.resources).toEqual({
      requests: { cpus: 0.5, memBytes: GiB },
      limits: { cpus: 1, memBytes: 2 * GiB },
    });
    await m.shutdownAll();
  });

  it('a job outside the scaler or the global policy answers never-fits with the rule', async () => {
    const { m, backend } = limitedManager();
    expect(
      await m.requestScale({
        jobId: 'big',
        labels: ['linux', 'gpu'],
        resources: { requests: { cpus: 3 } },
      }),
    ).toMatchObject({
      kind: 'never-fits',
      limit: {
        limit: 'scaler-limit-range',
        scaler: 'gpu',
        resource: 'cpus',
        rule: 'max',
        value: 3,
        bound: 2,
        neverFits: true,
      },
    });
    expect(
      await m.requestScale({
        jobId: 'ratio',
        labels: ['linux', 'gpu'],
        resources: {
          requests: { memory: '1Gi' },
          limits: { memory: '4Gi' },
        },
      }),
    ).toMatchObject({
      kind: 'never-fits',
      limit: { limit: 'scaler-limit-range', resource: 'memory', rule: 'maxLimitRequestRatio' },
    });
    expect(
      await m.requestScale({
        jobId: 'gpus',
        labels: ['linux', 'gpu'],
        resources: { requests: { [gpu]: 2 } },
      }),
    ).toMatchObject({
      kind: 'never-fits',
      limit: { limit: 'global-limit-range', resource: gpu, rule: 'max', value: 2, bound: 1 },
    });
    expect(backend.spawned()).toHaveLength(0);
    expect(
      await m.requestScale({
        jobId: 'one-gpu',
        labels: ['linux', 'gpu'],
        resources: { requests: { [gpu]: 1 } },
      }),
    ).toMatchObject({ kind: 'spawned' });
    await m.shutdownAll();
  });

  it('defaults that violate the range are a config error naming the scaler', () => {
    const bad = structuredClone(limited);
    bad.scalers[0]!.limits = { cpus: { max: '1', default: '2' } };
    const result = validateScalerConfig(bad);
    expect(result).toEqual({
      ok: false,
      errors: [
        {
          path: ['scalers', 0, 'limits'],
          message: 'Inconsistent limit range: cpus: default 2 is above max 1',
        },
      ],
    });
    expect(() => new ScalerManager({ config: bad, backends: [] })).toThrow(
      /Inconsistent limit range/,
    );
  });
});
