/**
 * Several machine pools per agent, on several ledgers (the public test kit's
 * MemoryPoolLedger, FakeBackend, TestClock): config checks, the per-pool split,
 * all-or-nothing reservation in name order, device ids from the pool to the
 * backend and back through recovery and adoption, a row lost in one pool, and
 * a lease at risk on one of two ledgers.
 */

import type { ConfigError } from 'scaler-primitives/errors';
import type { PoolLedger, ReleaseOptions, ReserveOptions } from 'scaler-primitives/ledger';
import {
  MemoryStateStore,
  type ScalerConfigInput,
  type ScalerEvent,
  ScalerManager,
  type ScalerManagerOptions,
  validateScalerConfig,
} from 'scaler-primitives/manager';
import {
  createTestFleet,
  FakeBackend,
  MemoryPoolLedger,
  MemoryPoolStore,
  TestClock,
} from 'scaler-primitives/testing';
import { describe, expect, it } from 'vitest';

type MemoryPoolLedgerOptions = ConstructorParameters<typeof MemoryPoolLedger>[0];

const GPU = 'nvidia.com/gpu';
const GiB = 1024 ** 3;

/** A pool `local` (CPU and memory) and a pool `gpu-box` (4 GPUs with ids, nothing else). */
function twoPools(extra: Partial<ScalerConfigInput> = {}): ScalerConfigInput {
  return {
    globalMaxAgents: 10,
    machinePools: {
      local: { maxCpu: 8, maxMemory: '16Gi' },
      'gpu-box': { devices: { [GPU]: ['0', '1', '2', '3'] } },
    },
    scalers: [
      {
        name: 'vm',
        type: 'firecracker',
        maxAgents: 4,
        // Not in name order: the manager reserves in name order all the same.
        machinePools: ['local', 'gpu-box'],
        // A scaler says it can give GPUs; its pools count them.
        resourceCap: { provides: [GPU] },
        labelSets: [
          { labels: ['gpu'], resources: { requests: { cpus: 2, memory: '4Gi', [GPU]: 2 } } },
        ],
      },
    ],
    ...extra,
  };
}

/** A MemoryPoolLedger that logs its calls and can be told to fail or refuse. */
class LoggedLedger extends MemoryPoolLedger {
  readonly name: string;
  readonly log: string[];
  failReserve: Error | undefined;

  constructor(name: string, log: string[], options: MemoryPoolLedgerOptions) {
    super(options);
    this.name = name;
    this.log = log;
  }

  override async reserve(
    pool: string,
    agentId: string,
    cpus: number,
    memBytes: number,
    options?: ReserveOptions,
  ) {
    this.log.push(`reserve ${pool} ${agentId}`);
    if (this.failReserve !== undefined) throw this.failReserve;
    return super.reserve(pool, agentId, cpus, memBytes, options);
  }

  override async release(pool: string, agentId: string, options?: ReleaseOptions) {
    // A release that takes a turn of the event loop: an answer given before it
    // finished would be logged first.
    await new Promise((resolve) => setImmediate(resolve));
    const removed = await super.release(pool, agentId, options);
    this.log.push(`released ${pool} ${agentId}`);
    return removed;
  }
}

interface Stores {
  local: MemoryPoolStore;
  gpu: MemoryPoolStore;
}

function host(
  clock: TestClock,
  stores: Stores,
  options: {
    instanceId?: string;
    config?: ScalerConfigInput;
    log?: string[];
    manager?: Partial<ScalerManagerOptions>;
    backend?: FakeBackend;
    gpuLeaseMs?: number;
  } = {},
) {
  const instanceId = options.instanceId ?? 'host-a';
  const log = options.log ?? [];
  const local = new LoggedLedger('local', log, { instanceId, store: stores.local, clock });
  const gpu = new LoggedLedger('gpu', log, {
    instanceId,
    store: stores.gpu,
    clock,
    ...(options.gpuLeaseMs === undefined ? {} : { leaseTtlMs: options.gpuLeaseMs }),
  });
  const backend = options.backend ?? new FakeBackend({ name: 'vm', clock });
  const events: ScalerEvent[] = [];
  let n = 0;
  const manager = new ScalerManager({
    config: options.config ?? twoPools(),
    backends: [{ name: 'vm', backend }],
    ledgers: { local, 'gpu-box': gpu },
    clock,
    random: () => 0.5,
    generateAgentId: (scaler) => `${instanceId}-${scaler}-${++n}`,
    onEvent: (event) => events.push(event),
    ...options.manager,
  });
  backend.attach(manager);
  return { manager, local, gpu, backend, events, log };
}

const rows = (store: MemoryPoolStore, pool: string) => store.read(pool)?.reservations ?? [];

/** Let releases in flight (they take a turn of the event loop here) finish. */
const settle = () => new Promise((resolve) => setTimeout(resolve, 5));

function setup() {
  const clock = new TestClock('2026-01-05T09:00:00Z');
  const stores = { local: new MemoryPoolStore(), gpu: new MemoryPoolStore() };
  return { clock, stores, ...host(clock, stores) };
}

function problems(config: ScalerConfigInput): string[] {
  const result = validateScalerConfig(config);
  return result.ok ? [] : result.errors.map((e) => `${e.path.join('.')}: ${e.message}`);
}

describe('config: several pools', () => {
  const base = twoPools();
  const scaler = base.scalers[0]!;

  it('accepts machinePools on a scaler and on a label set', () => {
    expect(problems(base)).toEqual([]);
    expect(
      problems({
        ...base,
        scalers: [
          {
            ...scaler,
            machinePools: undefined,
            machinePool: 'local',
            labelSets: [
              { labels: ['cpu'], resources: { cpus: 1 } },
              { ...scaler.labelSets[0]!, machinePools: ['gpu-box', 'local'] },
            ],
          },
        ],
      }),
    ).toEqual([]);
  });

  it('refuses machinePool and machinePools together, on a scaler and on a label set', () => {
    expect(problems({ ...base, scalers: [{ ...scaler, machinePool: 'local' }] })).toEqual([
      expect.stringMatching(/^scalers\.0\.machinePools: Give either machinePool .* not both/),
    ]);
    const set = { ...scaler.labelSets[0]!, machinePool: 'local', machinePools: ['local'] };
    expect(problems({ ...base, scalers: [{ ...scaler, labelSets: [set] }] })).toEqual([
      expect.stringMatching(/^scalers\.0\.labelSets\.0\.machinePools: Give either/),
    ]);
  });

  it('refuses an unknown pool, a pool listed twice, an empty list and more than 8', () => {
    expect(
      problems({ ...base, scalers: [{ ...scaler, machinePools: ['local', 'gpu-bx'] }] }),
    ).toEqual([
      'scalers.0.machinePools.1: Unknown machine pool "gpu-bx"; declare it under machinePools (known: local, gpu-box)',
    ]);
    expect(
      problems({ ...base, scalers: [{ ...scaler, machinePools: ['local', 'local'] }] }),
    ).toEqual([expect.stringContaining('"local" is listed twice')]);
    expect(problems({ ...base, scalers: [{ ...scaler, machinePools: [] }] })).toEqual([
      expect.stringContaining('at least one machine pool'),
    ]);
    const nine = Array.from({ length: 9 }, (_, i) => `p${i}`);
    expect(problems({ ...base, scalers: [{ ...scaler, machinePools: nine }] })).toContainEqual(
      expect.stringContaining('at most 8 machine pools'),
    );
  });

  it('refuses a CPU, memory or extended resource no pool of the entry caps', () => {
    const pools = {
      cpuOnly: { maxCpu: 8 },
      gpuOnly: { maxExtended: { [GPU]: 2 } },
    };
    expect(
      problems({
        ...base,
        machinePools: pools,
        scalers: [{ ...scaler, machinePools: ['cpuOnly', 'gpuOnly'] }],
      }),
    ).toEqual([
      'scalers.0.machinePools: None of the machine pools "cpuOnly", "gpuOnly" of this scaler caps memory (maxMemory); with several pools, one of them must',
    ]);
    expect(
      problems({
        ...base,
        machinePools: { mem: { maxMemory: '1Gi' }, gpuOnly: { maxExtended: { [GPU]: 2 } } },
        scalers: [{ ...scaler, machinePools: ['mem', 'gpuOnly'] }],
      }),
    ).toEqual([expect.stringContaining('caps CPU (maxCpu)')]);
    // The label set asks for an FPGA that neither pool counts.
    const fpga = 'example.com/fpga';
    expect(
      problems({
        ...base,
        scalers: [
          {
            ...scaler,
            labelSets: [{ labels: ['fpga'], resources: { requests: { cpus: 1, [fpga]: 1 } } }],
          },
        ],
      }),
    ).toEqual([
      `scalers.0.machinePools: Agents of label set 0 can request ${fpga}, but none of its machine pools "gpu-box", "local" caps or provides it; add it to one pool's maxExtended or provides`,
    ]);
    // The scaler's own cap says it can give GPUs of a kind no pool counts.
    expect(
      problems({
        ...base,
        scalers: [{ ...scaler, resourceCap: { maxExtended: { [fpga]: 1 } } }],
      }),
    ).toEqual([expect.stringContaining(`can request ${fpga}`)]);
  });

  it('refuses device ids of one resource in two pools of an entry', () => {
    expect(
      problems({
        ...base,
        machinePools: {
          local: { maxCpu: 8, maxMemory: '16Gi', devices: { [GPU]: ['a'] } },
          'gpu-box': { devices: { [GPU]: ['0', '1'] } },
        },
      }),
    ).toEqual([
      `scalers.0.machinePools: Machine pools "local" and "gpu-box" both list device ids for ${GPU}; an agent's devices of one resource must come from one pool`,
    ]);
  });

  it('one pool keeps the old rules: no coverage check', () => {
    expect(
      problems({
        globalMaxAgents: 1,
        machinePools: { host: { maxAgents: 2 } },
        scalers: [
          {
            name: 'vm',
            type: 'firecracker',
            maxAgents: 1,
            machinePools: ['host'],
            labelSets: [{ labels: ['x'] }],
          },
        ],
      }),
    ).toEqual([]);
  });
});

describe('options: ledgers', () => {
  const clock = new TestClock('2026-01-05T09:00:00Z');
  const backends = [{ name: 'vm', backend: new FakeBackend({ clock }) }];
  const ledger = () => new MemoryPoolLedger({ instanceId: 'x', clock });

  it('a declared pool without a ledger is a ConfigError naming it; so is a bad ledger', () => {
    let error: ConfigError | undefined;
    try {
      new ScalerManager({ config: twoPools(), backends, clock, ledgers: { local: ledger() } });
    } catch (caught) {
      error = caught as ConfigError;
    }
    expect(error?.code).toBe('ERR_CONFIG_INVALID');
    expect(error?.message).toContain(
      'machinePools.gpu-box: Machine pool "gpu-box" has no ledger: add it to the `ledgers` option (given for: local)',
    );
    expect(
      () =>
        new ScalerManager({
          config: twoPools(),
          backends,
          clock,
          ledgers: { local: ledger(), 'gpu-box': {} as PoolLedger },
        }),
    ).toThrow(/Expected `ledgers\["gpu-box"\]` to be a PoolLedger/);
  });

  it('a reload that declares a pool without a ledger is refused and changes nothing', async () => {
    const m = new ScalerManager({
      config: twoPools(),
      backends,
      clock,
      ledgers: { local: ledger(), 'gpu-box': ledger() },
    });
    const next = twoPools();
    next.machinePools = { ...next.machinePools, extra: { maxCpu: 1 } };
    const answer = await m.reload(next);
    expect(answer.ok).toBe(false);
    expect(answer.ok ? [] : answer.errors.map((e) => e.message)).toEqual([
      expect.stringContaining('Machine pool "extra" has no ledger'),
    ]);
    expect(m.getStatus().pools.map((p) => p.name)).toEqual(['local', 'gpu-box']);
    await m.shutdownAll();
  });

  it('one ledger object may serve several pools through `ledgers`', async () => {
    const shared = ledger();
    const m = new ScalerManager({
      config: twoPools(),
      backends: [{ name: 'vm', backend: new FakeBackend({ clock }) }],
      clock,
      ledgers: { local: shared, 'gpu-box': shared },
    });
    expect((await m.requestScale({ jobId: 'j1', labels: ['gpu'] })).kind).toBe('spawned');
    expect(shared.inspect('local').live).toHaveLength(1);
    expect(shared.inspect('gpu-box').live).toHaveLength(1);
    await m.shutdownAll();
    expect(shared.inspect('local').live).toEqual([]);
    expect(shared.inspect('gpu-box').live).toEqual([]);
  });
});

describe('reserving in several pools', () => {
  it('splits the request by what each pool caps, in name order, and gives the devices to the backend and getAgent', async () => {
    const h = setup();
    const result = await h.manager.requestScale({ jobId: 'j1', labels: ['gpu'] });
    expect(result).toMatchObject({ kind: 'spawned', agentId: 'host-a-vm-1' });
    // gpu-box before local (code-unit order), whatever the config's order.
    expect(h.log).toEqual(['reserve gpu-box host-a-vm-1', 'reserve local host-a-vm-1']);
    const [gpuRow] = rows(h.stores.gpu, 'gpu-box');
    expect(gpuRow).toMatchObject({ cpus: 0, memBytes: 0, extended: { [GPU]: 2 } });
    expect(gpuRow!.devices).toEqual({ [GPU]: ['0', '1'] });
    const [localRow] = rows(h.stores.local, 'local');
    expect(localRow).toMatchObject({ cpus: 2, memBytes: 4 * GiB });
    expect(localRow!.extended).toBeUndefined();
    expect(localRow!.devices).toBeUndefined();

    const request = h.backend.spawned()[0]!;
    expect(request.devices).toEqual({ [GPU]: ['0', '1'] });
    const agent = h.manager.getAgent('host-a-vm-1')!;
    expect(agent.pools).toEqual(['gpu-box', 'local']);
    expect(agent.pool).toBe('gpu-box');
    expect(agent.devices).toEqual({ [GPU]: ['0', '1'] });
    expect(Object.isFrozen(agent.devices)).toBe(true);

    // The next agent gets the next free ids; the status counts each pool's part.
    await h.manager.requestScale({ jobId: 'j2', labels: ['gpu'] });
    expect(h.backend.spawned()[1]!.devices).toEqual({ [GPU]: ['2', '3'] });
    const status = h.manager.getStatus();
    expect(status.pools).toEqual([
      {
        name: 'local',
        cap: { maxCpu: 8, maxMemoryBytes: 16 * GiB },
        usage: { cpus: 4, memBytes: 8 * GiB },
      },
      {
        name: 'gpu-box',
        cap: { maxExtended: { [GPU]: 4 }, devices: { [GPU]: ['0', '1', '2', '3'] } },
        usage: { cpus: 0, memBytes: 0, extended: { [GPU]: 4 } },
      },
    ]);
    expect(status.scalers[0]!.machinePools).toEqual(['gpu-box', 'local']);
    expect(status.scalers[0]!.machinePool).toBeUndefined();

    // Released in every pool once the agent goes: its ids are free again.
    h.backend.register('host-a-vm-1');
    h.backend.runJob('host-a-vm-1', 'j1', Number.POSITIVE_INFINITY);
    h.backend.completeJob('host-a-vm-1');
    await h.manager.drain('host-a-vm-1');
    await settle();
    expect(rows(h.stores.gpu, 'gpu-box').map((r) => r.agentId)).toEqual(['host-a-vm-2']);
    expect(rows(h.stores.local, 'local').map((r) => r.agentId)).toEqual(['host-a-vm-2']);
    await h.manager.requestScale({ jobId: 'j3', labels: ['gpu'] });
    expect(h.backend.spawned()[2]!.devices).toEqual({ [GPU]: ['0', '1'] });
    await h.manager.shutdownAll();
    expect(rows(h.stores.gpu, 'gpu-box')).toEqual([]);
    expect(rows(h.stores.local, 'local')).toEqual([]);
  });

  it('a refusal in the second pool releases the first before the answer, which names the pool and resource', async () => {
    const h = setup();
    // Another process holds 7 of the 8 local CPUs.
    const peer = new MemoryPoolLedger({
      instanceId: 'peer',
      store: h.stores.local,
      clock: h.clock,
    });
    peer.registerPool('local', { maxCpu: 8, maxMemoryBytes: 16 * GiB });
    expect((await peer.reserve('local', 'other', 7, 0)).ok).toBe(true);
    const answer = h.manager.requestScale({ jobId: 'j1', labels: ['gpu'] }).then((result) => {
      h.log.push('answered');
      return result;
    });
    expect(await answer).toMatchObject({
      kind: 'at-capacity',
      limit: {
        limit: 'pool-cap',
        scaler: 'vm',
        pool: 'local',
        dimension: 'cpu',
        requested: 2,
        used: 7,
        max: 8,
        neverFits: false,
      },
    });
    expect(h.log).toEqual([
      'reserve gpu-box host-a-vm-1',
      'reserve local host-a-vm-1',
      'released gpu-box host-a-vm-1',
      'answered',
    ]);
    expect(rows(h.stores.gpu, 'gpu-box')).toEqual([]);
    expect(h.backend.spawned()).toEqual([]);
    expect(h.manager.getStatus().globalActiveCount).toBe(0);
  });

  it('a refusal of the devices in the first pool reserves nothing in the second', async () => {
    const h = setup();
    await h.manager.requestScale({ jobId: 'j1', labels: ['gpu'] });
    await h.manager.requestScale({ jobId: 'j2', labels: ['gpu'] });
    h.log.length = 0;
    expect(await h.manager.requestScale({ jobId: 'j3', labels: ['gpu'] })).toMatchObject({
      kind: 'at-capacity',
      limit: { limit: 'pool-cap', pool: 'gpu-box', dimension: GPU, used: 4, max: 4 },
    });
    expect(h.log).toEqual(['reserve gpu-box host-a-vm-3']);
  });

  it('an error thrown by the second pool`s ledger releases the first before the answer', async () => {
    const h = setup();
    h.local.failReserve = new Error('disk on fire');
    const answer = h.manager.requestScale({ jobId: 'j1', labels: ['gpu'] }).then((result) => {
      h.log.push('answered');
      return result;
    });
    expect(await answer).toMatchObject({
      kind: 'spawn-failed',
      stage: 'reserve',
      error: { message: 'disk on fire' },
    });
    expect(h.log.slice(0, 2)).toEqual(['reserve gpu-box host-a-vm-1', 'reserve local host-a-vm-1']);
    expect(h.log.slice(2, 4).sort()).toEqual([
      'released gpu-box host-a-vm-1',
      'released local host-a-vm-1',
    ]);
    expect(h.log[4]).toBe('answered');
    expect(rows(h.stores.gpu, 'gpu-box')).toEqual([]);
    expect(h.events.find((e) => e.kind === 'spawn-failed')?.data).toMatchObject({
      stage: 'reserve',
      pool: 'local',
    });
  });

  it('an extended resource the scaler does not give is refused never-fits before any pool is asked', async () => {
    // A job asking for an FPGA on a scaler whose config never mentions one (a
    // scaler that gives one needs a pool that counts it: a config error).
    const h = setup();
    const result = await h.manager.requestScale({
      jobId: 'j1',
      labels: ['gpu'],
      resources: {
        requests: { cpus: 1, 'example.com/fpga': 1 },
      },
    });
    expect(result).toMatchObject({
      kind: 'never-fits',
      limit: { limit: 'scaler-cap', dimension: 'example.com/fpga', max: 0, neverFits: true },
    });
    expect(h.log).toEqual([]);
  });

  it('two managers on the same two pools reserve in the same order: the one that loses the first pool holds nothing in the second', async () => {
    const clock = new TestClock('2026-01-05T09:00:00Z');
    const stores = { local: new MemoryPoolStore(), gpu: new MemoryPoolStore() };
    // Room for one agent in each pool.
    const config = twoPools({
      machinePools: {
        local: { maxCpu: 2, maxMemory: '4Gi' },
        'gpu-box': { devices: { [GPU]: ['0', '1'] } },
      },
    });
    const log: string[] = [];
    const a = host(clock, stores, { instanceId: 'a', config, log });
    // B lists its pools the other way round.
    const configB = structuredClone(config);
    configB.scalers[0]!.machinePools = ['gpu-box', 'local'];
    const b = host(clock, stores, { instanceId: 'b', config: configB, log });
    const [ra, rb] = await Promise.all([
      a.manager.requestScale({ jobId: 'ja', labels: ['gpu'] }),
      b.manager.requestScale({ jobId: 'jb', labels: ['gpu'] }),
    ]);
    const kinds = [ra.kind, rb.kind].sort();
    expect(kinds).toEqual(['at-capacity', 'spawned']);
    const loser = ra.kind === 'spawned' ? rb : ra;
    expect(loser).toMatchObject({ limit: { pool: 'gpu-box', dimension: GPU } });
    const loserId = ra.kind === 'spawned' ? 'b-vm-1' : 'a-vm-1';
    // Every reservation asked gpu-box first; the loser never reached local.
    expect(log.filter((line) => line.startsWith('reserve ')).map((l) => l.split(' ')[1])).toEqual([
      'gpu-box',
      'gpu-box',
      'local',
    ]);
    expect(log).not.toContain(`reserve local ${loserId}`);
    await a.manager.shutdownAll();
    await b.manager.shutdownAll();
  });
});

describe('recovery and adoption with several pools', () => {
  it('a restart takes over the rows in each pool with the same device ids, and the backend keeps them', async () => {
    const clock = new TestClock('2026-01-05T09:00:00Z');
    const stores = { local: new MemoryPoolStore(), gpu: new MemoryPoolStore() };
    const stateStore = new MemoryStateStore();
    const backend = new FakeBackend({ name: 'vm', clock });
    const a = host(clock, stores, { manager: { stateStore }, backend });
    await a.manager.requestScale({ jobId: 'j1', labels: ['gpu'] });
    await a.manager.requestScale({ jobId: 'j2', labels: ['gpu'] });
    // The first agent goes: the second keeps ids 2 and 3, ids 0 and 1 are free.
    backend.register('host-a-vm-1');
    backend.runJob('host-a-vm-1', 'j1', Number.POSITIVE_INFINITY);
    backend.completeJob('host-a-vm-1');
    await a.manager.drain('host-a-vm-1');
    await settle();
    expect(a.manager.getAgent('host-a-vm-2')!.devices).toEqual({ [GPU]: ['2', '3'] });
    await a.manager.recoverState(); // the books are written (nothing to recover here)
    const stored = await stateStore.load();
    expect(stored.find((r) => r.agentId === 'host-a-vm-2')).toMatchObject({
      pool: 'gpu-box',
      pools: ['gpu-box', 'local'],
      devices: { [GPU]: ['2', '3'] },
    });
    // The crash: no shutdown, the leases stop.
    a.manager.stop();
    a.local.abandon();
    a.gpu.abandon();

    // The same host restarted: same instance id, a new lease.
    const b = host(clock, stores, { manager: { stateStore }, backend });
    const recovered = await b.manager.recoverState();
    expect(recovered.recovered).toEqual(['host-a-vm-2']);
    expect(recovered.poolRows).toEqual(
      expect.arrayContaining([
        { agentId: 'host-a-vm-2', pool: 'gpu-box', how: 'adopted' },
        { agentId: 'host-a-vm-2', pool: 'local', how: 'adopted' },
      ]),
    );
    expect(recovered.poolRows).toHaveLength(2);
    const gpuRows = rows(stores.gpu, 'gpu-box');
    expect(gpuRows).toHaveLength(1);
    expect(gpuRows[0]).toMatchObject({ leaseId: b.gpu.leaseId, devices: { [GPU]: ['2', '3'] } });
    expect(rows(stores.local, 'local')).toMatchObject([{ leaseId: b.local.leaseId, cpus: 2 }]);
    expect(b.manager.getAgent('host-a-vm-2')).toMatchObject({
      pools: ['gpu-box', 'local'],
      devices: { [GPU]: ['2', '3'] },
    });
    // A new agent gets the free ids, never the recovered agent's.
    expect(await b.manager.requestScale({ jobId: 'j3', labels: ['gpu'] })).toMatchObject({
      kind: 'spawned',
    });
    expect(backend.spawned().at(-1)!.devices).toEqual({ [GPU]: ['0', '1'] });
    await b.manager.shutdownAll();
  });

  it('a restart within the lease releases rows of this instance that no record names, and keeps the rest', async () => {
    const clock = new TestClock('2026-01-05T09:00:00Z');
    const stores = { local: new MemoryPoolStore(), gpu: new MemoryPoolStore() };
    const stateStore = new MemoryStateStore();
    const backend = new FakeBackend({ name: 'vm', clock });
    const a = host(clock, stores, { manager: { stateStore }, backend });
    await a.manager.requestScale({ jobId: 'j1', labels: ['gpu'] });
    await a.manager.recoverState(); // the books are written
    // Killed after a grant whose record was never stored (a row no record names),
    // and beside it a row of another instance and the row of a stored agent.
    await a.gpu.reserve('gpu-box', 'host-a-orphan', 0, 0, { extended: { [GPU]: 1 } });
    const peer = new MemoryPoolLedger({ instanceId: 'peer', store: stores.gpu, clock });
    peer.registerPool('gpu-box', { devices: { [GPU]: ['0', '1', '2', '3'] } });
    await peer.reserve('gpu-box', 'peer-agent', 0, 0, { extended: { [GPU]: 1 } });
    a.manager.stop();
    a.local.abandon();
    a.gpu.abandon();

    // Restarted at once: the dead process's lease is still fresh, its rows live.
    const b = host(clock, stores, { manager: { stateStore }, backend });
    const recovered = await b.manager.recoverState();
    expect(recovered.recovered).toEqual(['host-a-vm-1']);
    expect(
      rows(stores.gpu, 'gpu-box')
        .map((row) => row.agentId)
        .sort(),
    ).toEqual(['host-a-vm-1', 'peer-agent']);
    expect(rows(stores.local, 'local').map((row) => row.agentId)).toEqual(['host-a-vm-1']);
    await b.manager.shutdownAll();
    await peer.close();
  });

  it('a row whose agent a backend still runs is kept, though no record names it', async () => {
    const clock = new TestClock('2026-01-05T09:00:00Z');
    const stores = { local: new MemoryPoolStore(), gpu: new MemoryPoolStore() };
    const stateStore = new MemoryStateStore();
    const backend = new FakeBackend({ name: 'vm', clock });
    const a = host(clock, stores, { manager: { stateStore }, backend });
    await a.manager.recoverState();
    await a.gpu.reserve('gpu-box', 'host-a-vm-9', 0, 0, { extended: { [GPU]: 1 } });
    await backend.spawn({ agentId: 'host-a-vm-9' } as never);
    a.manager.stop();
    a.local.abandon();
    a.gpu.abandon();
    const b = host(clock, stores, { manager: { stateStore }, backend });
    const recovered = await b.manager.recoverState();
    expect(recovered.unrecorded).toEqual([
      { scaler: 'vm', agentId: 'host-a-vm-9', action: 'leave' },
    ]);
    expect(rows(stores.gpu, 'gpu-box').map((row) => row.agentId)).toEqual(['host-a-vm-9']);
    await b.manager.shutdownAll();
  });

  it('a row removed in one pool while the host was down is reserved again with the same ids', async () => {
    const clock = new TestClock('2026-01-05T09:00:00Z');
    const stores = { local: new MemoryPoolStore(), gpu: new MemoryPoolStore() };
    const stateStore = new MemoryStateStore();
    const backend = new FakeBackend({ name: 'vm', clock });
    const a = host(clock, stores, { manager: { stateStore }, backend });
    await a.manager.requestScale({ jobId: 'j1', labels: ['gpu'] });
    await a.manager.requestScale({ jobId: 'j2', labels: ['gpu'] });
    backend.register('host-a-vm-1');
    backend.runJob('host-a-vm-1', 'j1', Number.POSITIVE_INFINITY);
    backend.completeJob('host-a-vm-1');
    await a.manager.drain('host-a-vm-1');
    await settle();
    await a.manager.recoverState();
    a.manager.stop();
    a.local.abandon();
    a.gpu.abandon();
    // While the host is down, an operator removes its GPU row.
    const peer = new MemoryPoolLedger({ instanceId: 'peer', store: stores.gpu, clock });
    peer.registerPool('gpu-box', { devices: { [GPU]: ['0', '1', '2', '3'] } });
    expect(await peer.release('gpu-box', 'host-a-vm-2', { anyInstance: true })).toBe(true);

    // The same host restarted: same instance id, a new lease.
    const b = host(clock, stores, { manager: { stateStore }, backend });
    const recovered = await b.manager.recoverState();
    expect(recovered.poolRows).toEqual(
      expect.arrayContaining([
        { agentId: 'host-a-vm-2', pool: 'gpu-box', how: 'reserved' },
        { agentId: 'host-a-vm-2', pool: 'local', how: 'adopted' },
      ]),
    );
    // Reserved again, claiming the ids the agent uses (not the lowest free ones).
    expect(rows(stores.gpu, 'gpu-box')[0]!.devices).toEqual({ [GPU]: ['2', '3'] });
    await b.manager.shutdownAll();
  });

  it('a row lost in one pool follows reservationLostPolicy (stop-spawning, then restored with its ids)', async () => {
    const clock = new TestClock('2026-01-05T09:00:00Z');
    const stores = { local: new MemoryPoolStore(), gpu: new MemoryPoolStore() };
    const h = host(clock, stores, { manager: { policies: { reservationLost: 'stop-spawning' } } });
    await h.manager.requestScale({ jobId: 'j1', labels: ['gpu'] });
    await h.manager.requestScale({ jobId: 'j2', labels: ['gpu'] });
    // An operator removes the GPU row of the second agent.
    expect(await h.gpu.release('gpu-box', 'host-a-vm-2')).toBe(true);
    await h.manager.reconcile();
    const lost = h.events.filter((e) => e.kind === 'reservation-lost');
    expect(lost.map((e) => [e.agentId, (e.data as { pool?: string } | undefined)?.pool])).toEqual([
      ['host-a-vm-2', 'gpu-box'],
    ]);
    // Restored at once in that pool only, with the same ids.
    expect(h.events.some((e) => e.kind === 'reservation-restored')).toBe(true);
    const gpuRows = rows(stores.gpu, 'gpu-box');
    expect(gpuRows.find((r) => r.agentId === 'host-a-vm-2')?.devices).toEqual({
      [GPU]: ['2', '3'],
    });
    expect(rows(stores.local, 'local')).toHaveLength(2);

    // Now the row goes and cannot come back (a peer took the ids): spawning stops.
    expect(await h.gpu.release('gpu-box', 'host-a-vm-2')).toBe(true);
    const peer = new MemoryPoolLedger({ instanceId: 'peer', store: stores.gpu, clock });
    peer.registerPool('gpu-box', { devices: { [GPU]: ['0', '1', '2', '3'] } });
    expect(await peer.reserve('gpu-box', 'p1', 0, 0, { extended: { [GPU]: 2 } })).toMatchObject({
      ok: true,
      devices: { [GPU]: ['2', '3'] },
    });
    await h.manager.reconcile();
    expect(h.events.some((e) => e.kind === 'reservation-restore-failed')).toBe(true);
    expect(await h.manager.requestScale({ jobId: 'j3', labels: ['gpu'] })).toMatchObject({
      kind: 'at-capacity',
      limit: { limit: 'reservation-lost', pool: 'gpu-box' },
    });
    // The agent's other row is untouched.
    expect(rows(stores.local, 'local').map((r) => r.agentId)).toContain('host-a-vm-2');
    await h.manager.shutdownAll();
  });
});

describe('leases across several ledgers', () => {
  it('a lease at risk on one of two ledgers stops the agents with a row there; SpawnRequest.leases holds both, earliest deadline first', async () => {
    const clock = new TestClock('2026-01-05T09:00:00Z');
    const stores = { local: new MemoryPoolStore(), gpu: new MemoryPoolStore() };
    // A CPU-only label set on `local` alone, beside the GPU set on both pools.
    const config = twoPools();
    config.scalers[0]!.labelSets.push({
      labels: ['cpu'],
      resources: { cpus: 1 },
      machinePool: 'local',
    });
    // The gpu-box ledger's lease is shorter: its deadline comes first.
    const h = host(clock, stores, { config, gpuLeaseMs: 15_000 });
    const gpuAgent = await h.manager.requestScale({ jobId: 'jg', labels: ['gpu'] });
    const cpuAgent = await h.manager.requestScale({ jobId: 'jc', labels: ['cpu'] });
    expect([gpuAgent.kind, cpuAgent.kind]).toEqual(['spawned', 'spawned']);
    const [gpuRequest, cpuRequest] = h.backend.spawned();
    const gpuLease = h.gpu.lease();
    const localLease = h.local.lease();
    expect(gpuLease.deadline!).toBeLessThan(localLease.deadline!);
    // The GPU agent (rows on both ledgers) is told of both leases, the one that
    // lapses first first; the CPU agent of its only one. The deprecated `lease`
    // is the first of them.
    const spawnLease = (lease: typeof gpuLease) => ({
      location: lease.location,
      leaseMs: lease.leaseMs,
      marginMs: lease.marginMs,
    });
    expect(gpuRequest!.leases).toEqual([spawnLease(gpuLease), spawnLease(localLease)]);
    expect(cpuRequest!.leases).toEqual([spawnLease(localLease)]);
    expect(gpuRequest!.lease).toEqual(spawnLease(gpuLease));
    expect(cpuRequest!.lease).toEqual(spawnLease(localLease));

    h.gpu.failRenewals(true);
    await clock.advance(10_000); // two thirds of the gpu-box lease without a renewal: at risk
    const risk = h.events.find((e) => e.kind === 'lease-at-risk');
    expect(risk?.data).toMatchObject({ agents: ['host-a-vm-1'], pools: ['gpu-box'] });
    expect(h.backend.running()).toEqual(['host-a-vm-2']);
    expect(await h.manager.requestScale({ jobId: 'jg2', labels: ['gpu'] })).toMatchObject({
      kind: 'at-capacity',
      limit: { limit: 'lease-at-risk', pool: 'gpu-box' },
    });
    // The CPU-only label set reserves in `local` alone: its spawns go on.
    expect(await h.manager.requestScale({ jobId: 'jc2', labels: ['cpu'] })).toMatchObject({
      kind: 'spawned',
    });
    expect(h.manager.getStatus().lease).toMatchObject({ health: 'at-risk', spawningStopped: true });
    h.gpu.failRenewals(false);
    expect(h.manager.getStatus().lease?.spawningStopped).toBe(false);
    await h.manager.shutdownAll();
  });
});

describe('the test kit with several pools', () => {
  it('createTestFleet (one ledger for both pools) checks each agent`s rows in each of its pools', async () => {
    const fleet = createTestFleet(twoPools(), { startManager: false });
    expect((await fleet.manager.requestScale({ jobId: 'j1', labels: ['gpu'] })).kind).toBe(
      'spawned',
    );
    expect(fleet.ledger.inspect('local').live).toHaveLength(1);
    expect(fleet.ledger.inspect('gpu-box').live).toHaveLength(1);
    fleet.checkInvariants();
    await fleet.shutdown();
  });
});
