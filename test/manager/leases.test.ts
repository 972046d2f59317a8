/**
 * leaseLostPolicy with the public test kit: a MemoryPoolLedger whose renewals
 * are made to fail (a storage outage), a peer on the same store, FakeBackends
 * and a TestClock. Lease 30 s, margin 3 s: at risk at +20 s, lost at +30 s,
 * peers may take the rows after +33 s.
 */

import type { PoolLedger } from 'scaler-primitives/ledger';
import {
  MemoryStateStore,
  type ScalerConfigInput,
  type ScalerEvent,
  ScalerManager,
  type SpawnRequest,
} from 'scaler-primitives/manager';
import {
  FakeBackend,
  MemoryPoolLedger,
  MemoryPoolStore,
  TestClock,
} from 'scaler-primitives/testing';
import { describe, expect, it } from 'vitest';
import type { LeaseLostPolicy } from '../../src/manager/capacity/leases.js';

const T0 = Date.parse('2026-01-05T09:00:00Z');
const DEADLINE = T0 + 30_000;

const config: ScalerConfigInput = {
  globalMaxAgents: 10,
  machinePools: { host: { maxCpu: 4 } },
  scalers: [
    {
      name: 'vm',
      type: 'firecracker',
      maxAgents: 4,
      machinePool: 'host',
      labelSets: [{ labels: ['linux'], resources: { cpus: 1 } }],
    },
    { name: 'free', type: 'container', maxAgents: 2, labelSets: [{ labels: ['nopool'] }] },
  ],
};

interface Host {
  manager: ScalerManager;
  ledger: MemoryPoolLedger;
  vm: FakeBackend;
  free: FakeBackend;
  events: ScalerEvent[];
}

function host(
  clock: TestClock,
  store: MemoryPoolStore,
  extra: Partial<ConstructorParameters<typeof ScalerManager>[0]> = {},
  vm = new FakeBackend({ name: 'vm', clock }),
): Host {
  const ledger = new MemoryPoolLedger({ instanceId: 'host-a', store, clock });
  const free = new FakeBackend({ name: 'free', clock });
  const events: ScalerEvent[] = [];
  let n = 0;
  const manager = new ScalerManager({
    config,
    backends: [
      { name: 'vm', backend: vm },
      { name: 'free', backend: free },
    ],
    ledgers: { host: ledger },
    clock,
    generateAgentId: (scaler) => `${scaler}-${++n}`,
    onEvent: (event) => events.push(event),
    ...extra,
  });
  vm.attach(manager);
  free.attach(manager);
  return { manager, ledger, vm, free, events };
}

function setup(policy?: LeaseLostPolicy) {
  const clock = new TestClock(T0);
  const store = new MemoryPoolStore();
  const a = host(clock, store, policy === undefined ? {} : { policies: { leaseLost: policy } });
  const peer = new MemoryPoolLedger({ instanceId: 'peer', store, clock });
  peer.registerPool('host', { maxCpu: 4 });
  return { clock, store, peer, ...a };
}

/** Two agents in the pool (one busy with a job that never ends, one idle) and one outside it. */
async function fill(h: Host): Promise<{ busy: string; idle: string; outside: string }> {
  const busy = await h.manager.requestScale({ jobId: 'job-busy', labels: ['linux'] });
  const idle = await h.manager.requestScale({ jobId: 'job-idle', labels: ['linux'] });
  const outside = await h.manager.requestScale({ jobId: 'job-out', labels: ['nopool'] });
  if (busy.kind !== 'spawned' || idle.kind !== 'spawned' || outside.kind !== 'spawned') {
    throw new Error('spawn failed');
  }
  h.vm.register(busy.agentId);
  h.vm.runJob(busy.agentId, 'job-busy', Number.POSITIVE_INFINITY);
  h.vm.register(idle.agentId);
  h.vm.completeJob(idle.agentId);
  h.free.register(outside.agentId);
  return { busy: busy.agentId, idle: idle.agentId, outside: outside.agentId };
}

const general = (events: ScalerEvent[], kind: string) =>
  events.filter((e) => e.kind === kind && e.agentId === '');

const rowsOf = (store: MemoryPoolStore) =>
  (store.read('host')?.reservations ?? []).map((r) => `${r.instanceId}/${r.agentId}`).sort();

describe('leaseLostPolicy stop-agents (the default)', () => {
  it('destroys every agent with a pool row (busy too) when the lease is at risk, before the deadline; releases the rows; the peer takes the capacity only after deadline + margin', async () => {
    const h = setup();
    const agents = await fill(h);
    expect(rowsOf(h.store)).toEqual(['host-a/vm-1', 'host-a/vm-2']);
    h.ledger.failRenewals(true); // last confirmed renewal: T0
    await h.clock.advance(19_999);
    expect(general(h.events, 'lease-at-risk')).toEqual([]);
    expect(h.vm.running()).toEqual([agents.busy, agents.idle]);
    await h.clock.advance(1); // T0 + 20 s: at risk
    const [risk] = general(h.events, 'lease-at-risk');
    expect(risk).toMatchObject({
      at: T0 + 20_000,
      data: { policy: 'stop-agents', agents: [agents.busy, agents.idle] },
    });
    expect(((risk!.data as { lease: unknown }).lease as { deadline: number }).deadline).toBe(
      DEADLINE,
    );
    // Both pool agents are gone, each destroyed before the deadline; the other scaler's agent runs on.
    expect(h.vm.running()).toEqual([]);
    const destroys = h.vm.callsOf('destroy');
    expect(destroys.map((c) => c.args[0])).toEqual([agents.busy, agents.idle]);
    expect(destroys.every((c) => c.at < DEADLINE)).toBe(true);
    expect(h.free.running()).toEqual([agents.outside]);
    expect(
      h.events
        .filter((e) => e.kind === 'destroyed' && e.scaler === 'vm')
        .map((e) => (e.data as { reason?: string } | undefined)?.reason),
    ).toEqual(['lease-at-risk', 'lease-at-risk']);
    // Their rows were released as usual.
    expect(rowsOf(h.store)).toEqual([]);
    expect(h.manager.getStatus().globalActiveCount).toBe(1);

    // No new spawn in the pool until the lease is renewed; outside the pool, spawns go on.
    const refused = await h.manager.requestScale({ jobId: 'job-3', labels: ['linux'] });
    expect(refused).toMatchObject({
      kind: 'at-capacity',
      limit: {
        limit: 'lease-at-risk',
        scaler: 'vm',
        pool: 'host',
        health: 'at-risk',
        deadline: DEADLINE,
        neverFits: false,
      },
    });
    expect((await h.manager.requestScale({ jobId: 'job-4', labels: ['nopool'] })).kind).toBe(
      'spawned',
    );
    const status = h.manager.getStatus();
    expect(status.lease).toEqual({
      health: 'at-risk',
      confirmedAt: T0,
      deadline: DEADLINE,
      leaseMs: 30_000,
      marginMs: 3_000,
      policy: 'stop-agents',
      spawningStopped: true,
    });
    expect(status.scalers.find((b) => b.name === 'vm')?.spawningStopped).toBe(true);
    expect(status.scalers.find((b) => b.name === 'free')?.spawningStopped).toBeUndefined();

    await h.clock.advance(10_000); // the deadline
    expect(general(h.events, 'lease-lost').map((e) => e.at)).toEqual([DEADLINE]);
    expect(h.manager.getStatus().lease?.health).toBe('lost');
    expect(await h.manager.requestScale({ jobId: 'job-5', labels: ['linux'] })).toMatchObject({
      kind: 'at-capacity',
      limit: { limit: 'lease-at-risk', health: 'lost' },
    });
    // The peer gets the whole pool; none of our agents uses it any more.
    expect(await h.peer.reserve('host', 'p1', 4, 0)).toEqual({ ok: true });
    expect(h.vm.running()).toEqual([]);
  });

  it('renewed: spawning in the pool resumes, and the agents it destroyed stay destroyed', async () => {
    const h = setup('stop-agents');
    await fill(h);
    h.ledger.failRenewals(true);
    await h.clock.advance(25_000);
    expect(h.vm.running()).toEqual([]);
    h.ledger.failRenewals(false);
    const [renewed] = general(h.events, 'lease-renewed');
    expect(renewed).toMatchObject({ at: T0 + 25_000, data: { policy: 'stop-agents', agents: [] } });
    expect(h.manager.getStatus().lease).toMatchObject({ health: 'held', spawningStopped: false });
    const again = await h.manager.requestScale({ jobId: 'job-again', labels: ['linux'] });
    expect(again).toMatchObject({ kind: 'spawned', scaler: 'vm' });
    expect(h.vm.running()).toEqual(['vm-4']);
    expect(general(h.events, 'lease-lost')).toEqual([]);
  });

  it('a destroy that fails is tried again at lease-lost', async () => {
    const h = setup();
    const agents = await fill(h);
    h.vm.failNext(1, new Error('vm stuck'), 'destroy');
    h.ledger.failRenewals(true);
    await h.clock.advance(20_000);
    expect(h.vm.running()).toEqual([agents.busy]);
    expect(h.events.some((e) => e.kind === 'destroy-failed' && e.agentId === agents.busy)).toBe(
      true,
    );
    await h.clock.advance(10_000);
    expect(
      (general(h.events, 'lease-lost')[0]?.data as { agents?: string[] } | undefined)?.agents,
    ).toEqual([agents.busy]);
    expect(h.vm.running()).toEqual([]);
    expect(rowsOf(h.store)).toEqual([]);
  });
});

describe('a storage outage: releases fail too', () => {
  it('stop-agents: rows whose release failed during the outage are released once the lease is renewed', async () => {
    const h = setup();
    const agents = await fill(h);
    let down = false;
    const release = h.ledger.release.bind(h.ledger);
    h.ledger.release = async (...args) => {
      if (down) throw new Error('EROFS: read-only file system');
      return release(...args);
    };
    down = true;
    h.ledger.failRenewals(true);
    await h.clock.advance(20_000);
    expect(h.vm.running()).toEqual([]);
    expect(h.events.filter((e) => e.kind === 'release-failed').map((e) => e.agentId)).toEqual([
      agents.busy,
      agents.idle,
    ]);
    // Left there, once the lease is renewed these rows of a live instance would hold the pool for good.
    expect(rowsOf(h.store)).toEqual([`host-a/${agents.busy}`, `host-a/${agents.idle}`]);
    down = false;
    h.ledger.failRenewals(false);
    await h.clock.advance(0);
    expect(rowsOf(h.store)).toEqual([]);
  });
});

describe('leaseLostPolicy stop-spawning', () => {
  it('keeps the agents, refuses new spawns in the pool until renewed; past deadline + margin the peer may take their rows while they run', async () => {
    const h = setup('stop-spawning');
    const agents = await fill(h);
    h.ledger.failRenewals(true);
    await h.clock.advance(20_000);
    expect(general(h.events, 'lease-at-risk')[0]).toMatchObject({
      data: { policy: 'stop-spawning', agents: [] },
    });
    expect(h.vm.running()).toEqual([agents.busy, agents.idle]);
    expect(h.vm.callsOf('destroy')).toEqual([]);
    expect(await h.manager.requestScale({ jobId: 'job-3', labels: ['linux'] })).toMatchObject({
      kind: 'at-capacity',
      limit: { limit: 'lease-at-risk', pool: 'host', health: 'at-risk' },
    });
    expect(h.manager.getStatus().lease).toMatchObject({
      health: 'at-risk',
      policy: 'stop-spawning',
      spawningStopped: true,
    });
    // The trade-off, as documented: the lease lapses, the peer takes the rows.
    await h.clock.advance(13_001);
    expect(general(h.events, 'lease-lost')).toHaveLength(1);
    expect(await h.peer.reapStale('host')).toBe(2);
    expect(h.vm.running()).toEqual([agents.busy, agents.idle]);
    // Renewed: spawning resumes (the lost rows are reservationLostPolicy's business).
    h.ledger.failRenewals(false);
    expect(general(h.events, 'lease-renewed')).toHaveLength(1);
    expect(h.manager.getStatus().lease?.spawningStopped).toBe(false);
    await h.manager.reconcile();
    expect(h.events.filter((e) => e.kind === 'reservation-lost').map((e) => e.agentId)).toEqual([
      agents.busy,
      agents.idle,
    ]);
  });
});

describe('leaseLostPolicy report', () => {
  it('only reports: events and status, agents kept, no refusal by the policy (the ledger itself refuses to write)', async () => {
    const h = setup('report');
    const agents = await fill(h);
    h.ledger.failRenewals(true);
    await h.clock.advance(30_000);
    expect(general(h.events, 'lease-at-risk').map((e) => e.at)).toEqual([T0 + 20_000]);
    expect(general(h.events, 'lease-lost').map((e) => e.at)).toEqual([DEADLINE]);
    expect(general(h.events, 'lease-lost')[0]?.message).toMatch(/reporting only/);
    expect(h.vm.running()).toEqual([agents.busy, agents.idle]);
    expect(h.manager.getStatus().lease).toMatchObject({
      health: 'lost',
      policy: 'report',
      spawningStopped: false,
    });
    expect(h.manager.getStatus().scalers.find((b) => b.name === 'vm')?.spawningStopped).toBe(
      undefined,
    );
    // Not refused by the policy: the reserve reaches the ledger, which refuses an unconfirmed lease.
    expect(await h.manager.requestScale({ jobId: 'job-3', labels: ['linux'] })).toMatchObject({
      kind: 'spawn-failed',
      stage: 'reserve',
    });
    h.ledger.failRenewals(false);
    expect(general(h.events, 'lease-renewed')).toHaveLength(1);
  });
});

describe('SpawnRequest.leases', () => {
  it('tells a backend where the lease of a pool agent lives; absent outside a pool and for a ledger without lease()', async () => {
    const h = setup();
    await fill(h);
    const spawn = (backend: FakeBackend) =>
      backend.callsOf('spawn').map((c) => (c.args[0] as SpawnRequest).lease);
    const spawnLeases = (backend: FakeBackend) =>
      backend.callsOf('spawn').map((c) => (c.args[0] as SpawnRequest).leases);
    const memory = { location: { kind: 'memory' }, leaseMs: 30_000, marginMs: 3_000 };
    expect(spawn(h.vm)).toEqual([memory, memory]);
    expect(spawnLeases(h.vm)).toEqual([[memory], [memory]]);
    expect(spawn(h.free)).toEqual([undefined]);
    expect(spawnLeases(h.free)).toEqual([undefined]);

    // A third-party ledger without the optional lease methods.
    const clock = new TestClock(T0);
    const inner = new MemoryPoolLedger({ instanceId: 'x', clock });
    const bare = new Proxy(inner, {
      get(target, key) {
        if (key === 'lease' || key === 'onLeaseEvent') return undefined;
        const value = Reflect.get(target, key, target);
        return typeof value === 'function' ? value.bind(target) : value;
      },
    }) as PoolLedger;
    const vm = new FakeBackend({ name: 'vm', clock });
    const manager = new ScalerManager({
      config,
      backends: [
        { name: 'vm', backend: vm },
        { name: 'free', backend: new FakeBackend({ name: 'free', clock }) },
      ],
      ledgers: { host: bare },
      clock,
    });
    expect((await manager.requestScale({ jobId: 'j', labels: ['linux'] })).kind).toBe('spawned');
    expect(spawn(vm)).toEqual([undefined]);
    expect(spawnLeases(vm)).toEqual([undefined]);
    expect(manager.getStatus().lease).toBeUndefined();
  });
});

describe('recovery after a restart longer than the lease', () => {
  async function crashAndRestart(extra: Partial<ConstructorParameters<typeof ScalerManager>[0]>) {
    const clock = new TestClock(T0);
    const store = new MemoryPoolStore();
    const stateStore = new MemoryStateStore();
    const vm = new FakeBackend({ name: 'vm', clock });
    const a = host(clock, store, { stateStore }, vm);
    const peer = new MemoryPoolLedger({ instanceId: 'peer', store, clock });
    peer.registerPool('host', { maxCpu: 4 });
    const ids: string[] = [];
    for (const job of ['j1', 'j2', 'j3']) {
      const r = await a.manager.requestScale({ jobId: job, labels: ['linux'] });
      if (r.kind !== 'spawned') throw new Error(r.kind);
      ids.push(r.agentId);
      vm.register(r.agentId);
    }
    // The host dies (no shutdown): its agents run on, its lease stops.
    a.manager.stop();
    a.ledger.abandon();
    await clock.advance(60_000); // twice the lease
    expect(await peer.reapStale('host')).toBe(3);
    expect(await peer.reserve('host', 'p1', 2, 0)).toEqual({ ok: true }); // 2 of 4 cores left
    const b = host(clock, store, { stateStore, ...extra }, vm);
    const result = await b.manager.recoverState();
    return { clock, store, vm, ids, b, result };
  }

  it('stop-agents: re-reserves where there is room and destroys the agent that cannot get a row', async () => {
    const { store, vm, ids, b, result } = await crashAndRestart({});
    expect(result.recovered).toEqual(ids);
    expect(result.poolRows).toEqual([
      { agentId: ids[0], pool: 'host', how: 'reserved' },
      { agentId: ids[1], pool: 'host', how: 'reserved' },
      { agentId: ids[2], pool: 'host', how: 'destroyed' },
    ]);
    expect(vm.running()).toEqual([ids[0], ids[1]]);
    expect(rowsOf(store)).toEqual([`host-a/${ids[0]}`, `host-a/${ids[1]}`, 'peer/p1']);
    expect(b.manager.listAgents().map((a) => a.agentId)).toEqual([ids[0], ids[1]]);
    expect(b.events.find((e) => e.kind === 'destroyed')).toMatchObject({
      agentId: ids[2],
      data: { reason: 'no-pool-row' },
    });
  });

  it('stop-spawning: the agent without a row runs on and reservationLostPolicy handles it (drain here)', async () => {
    const { vm, ids, b, result } = await crashAndRestart({
      policies: { leaseLost: 'stop-spawning', reservationLost: 'drain' },
    });
    expect(result.poolRows.map((r) => r.how)).toEqual(['reserved', 'reserved', 'lost']);
    expect(b.events.filter((e) => e.kind === 'reservation-lost').map((e) => e.agentId)).toEqual([
      ids[2],
    ]);
    // reservationLostPolicy 'drain': the row could not be restored, so the agent (busy with
    // its job) drains: it runs its job to the end, then it is destroyed.
    await new Promise((resolve) => setTimeout(resolve, 10));
    expect(b.manager.getAgent(ids[2]!)?.state).toBe('draining');
    expect(vm.running()).toEqual(ids);
    b.manager.onJobComplete(ids[2]!);
    await new Promise((resolve) => setTimeout(resolve, 10));
    expect(vm.running()).toEqual([ids[0], ids[1]]);
  });

  it('report with reservationLostPolicy report: the agent without a row runs on, reported', async () => {
    const { vm, ids, b, result } = await crashAndRestart({ policies: { leaseLost: 'report' } });
    expect(result.poolRows.map((r) => r.how)).toEqual(['reserved', 'reserved', 'lost']);
    await new Promise((resolve) => setTimeout(resolve, 10));
    expect(vm.running()).toEqual(ids);
    expect(b.manager.listAgents()).toHaveLength(3);
  });
});

describe('a stall (no timer runs past the deadline)', () => {
  it('stop-agents: on waking, the first renewal reports the lapse and the pool agents are destroyed then', async () => {
    // A clock whose timers run only when the test says: the host is SIGSTOPped.
    let now = T0;
    const timers: Array<{ fn: () => void; every?: number }> = [];
    const handle = { unref: () => handle, ref: () => handle, hasRef: () => false };
    const clock = {
      now: () => now,
      setTimeout: (fn: () => void) => {
        timers.push({ fn });
        return handle;
      },
      clearTimeout: () => {},
      setInterval: (fn: () => void, every: number) => {
        timers.push({ fn, every });
        return handle;
      },
      clearInterval: () => {},
    };
    const store = new MemoryPoolStore();
    const ledger = new MemoryPoolLedger({ instanceId: 'host-a', store, clock });
    const vm = new FakeBackend({ name: 'vm', clock });
    const events: ScalerEvent[] = [];
    const manager = new ScalerManager({
      config,
      backends: [
        { name: 'vm', backend: vm },
        { name: 'free', backend: new FakeBackend({ name: 'free', clock }) },
      ],
      ledgers: { host: ledger },
      clock,
      onEvent: (event) => events.push(event),
    });
    vm.attach(manager);
    for (const job of ['j1', 'j2']) {
      expect((await manager.requestScale({ jobId: job, labels: ['linux'] })).kind).toBe('spawned');
    }
    expect(vm.running()).toHaveLength(2);
    now += 120_000; // stopped for four leases: nothing could act meanwhile
    expect(general(events, 'lease-at-risk')).toEqual([]);
    const renewal = timers.find((t) => t.every === 10_000)!;
    renewal.fn(); // the first thing that runs on waking
    await new Promise((resolve) => setTimeout(resolve, 10));
    expect(
      events.filter((e) => e.agentId === '' && e.kind.startsWith('lease-')).map((e) => e.kind),
    ).toEqual(['lease-at-risk', 'lease-lost', 'lease-renewed']);
    expect(vm.running()).toEqual([]);
    expect(manager.getStatus().lease?.health).toBe('held');
    expect((await manager.requestScale({ jobId: 'j3', labels: ['linux'] })).kind).toBe('spawned');
  });
});

describe('after shutdownAll', () => {
  it('the manager no longer listens to the lease', async () => {
    const h = setup();
    await fill(h);
    await h.manager.shutdownAll();
    h.ledger.failRenewals(true);
    await h.clock.advance(30_000);
    expect(general(h.events, 'lease-at-risk')).toEqual([]);
    expect(general(h.events, 'lease-lost')).toEqual([]);
  });
});

describe('leaseLostPolicy option', () => {
  it('is validated, and unknown options are refused', () => {
    const backend = new FakeBackend({ name: 'vm' });
    const base = {
      config,
      backends: [
        { name: 'vm', backend },
        { name: 'free', backend },
      ],
      ledgers: { host: new MemoryPoolLedger({ instanceId: 'x' }) },
    };
    expect(() => new ScalerManager({ ...base, policies: { leaseLost: 'drain' as never } })).toThrow(
      new TypeError(
        'Expected `policies.leaseLost` to be one of stop-agents, stop-spawning, report, got `drain`',
      ),
    );
    expect(
      () => new ScalerManager({ ...base, policies: { leaselost: 'report' } } as never),
    ).toThrow(
      /Unknown key "leaselost" in ScalerManager options\.policies\. Did you mean `leaseLost`\?/,
    );
    expect(new ScalerManager({ ...base }).getStatus().lease?.policy).toBe('stop-agents');
  });
});
