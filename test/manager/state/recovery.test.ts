/**
 * Restart recovery in one process: manager A is abandoned mid-spawn and
 * mid-job (no shutdown), manager B starts on the same state store, backend
 * and pool store, and must end with every agent tracked in its state, every
 * job still bound, and exactly one pool row per agent, now B's.
 */

import type { ScalerEvent } from 'scaler-primitives/manager';
import { MemoryStateStore, ScalerManager } from 'scaler-primitives/manager';
import { FakeBackend, MemoryPoolLedger, MemoryPoolStore } from 'scaler-primitives/testing';
import { describe, expect, it } from 'vitest';
import { vmOnHost } from '../hand-fleet.js';

const config = vmOnHost(4);

function host(
  shared: { stateStore: MemoryStateStore; pools: MemoryPoolStore; backend: FakeBackend },
  extra: Partial<ConstructorParameters<typeof ScalerManager>[0]> = {},
) {
  const ledger = new MemoryPoolLedger({ instanceId: 'host-a', store: shared.pools });
  const events: ScalerEvent[] = [];
  let n = 0;
  const manager = new ScalerManager({
    config,
    backends: [{ name: 'vm', backend: shared.backend }],
    ledgers: { host: ledger },
    stateStore: shared.stateStore,
    generateAgentId: () => `vm-${++n}-${Math.random().toString(16).slice(2, 8)}`,
    onEvent: (event) => events.push(event),
    ...extra,
  });
  shared.backend.attach(manager);
  return { manager, ledger, events };
}

function rowsOf(pools: MemoryPoolStore) {
  return pools.read('host')?.reservations ?? [];
}

describe('recoverState', () => {
  it('re-attaches busy, spawning and draining agents, keeps job bindings, and takes rows over without double counting', async () => {
    const shared = {
      stateStore: new MemoryStateStore(),
      pools: new MemoryPoolStore(),
      backend: new FakeBackend({ name: 'vm' }),
    };
    const a = host(shared);
    a.manager.start();
    const busy = await a.manager.requestScale({ jobId: 'job-busy', labels: ['linux'] });
    const draining = await a.manager.requestScale({ jobId: 'job-drain', labels: ['linux'] });
    const spawning = await a.manager.requestScale({ jobId: 'job-wait', labels: ['linux'] });
    expect([busy.kind, draining.kind, spawning.kind]).toEqual(['spawned', 'spawned', 'spawned']);
    if (busy.kind !== 'spawned' || draining.kind !== 'spawned' || spawning.kind !== 'spawned')
      return;
    shared.backend.register(busy.agentId);
    shared.backend.runJob(busy.agentId, 'job-busy', Number.POSITIVE_INFINITY, 'run-1');
    shared.backend.register(draining.agentId);
    shared.backend.runJob(draining.agentId, 'job-drain', Number.POSITIVE_INFINITY);
    void a.manager.drain(draining.agentId);
    await a.manager.recoverState(); // flushes nothing new, but settles the microtasks
    await new Promise((resolve) => setTimeout(resolve, 10));
    const rowsBefore = rowsOf(shared.pools);
    expect(rowsBefore.map((row) => row.leaseId)).toEqual([
      a.ledger.leaseId,
      a.ledger.leaseId,
      a.ledger.leaseId,
    ]);
    // The crash: no shutdown, the lease simply stops.
    a.manager.stop();
    a.ledger.abandon();

    const b = host(shared);
    const recovered = await b.manager.recoverState();
    expect(recovered.recovered.sort()).toEqual(
      [busy.agentId, draining.agentId, spawning.agentId].sort(),
    );
    expect(recovered.released).toEqual([]);
    expect(recovered.poolRows.map((r) => r.how)).toEqual(['adopted', 'adopted', 'adopted']);
    // One row per agent, each now held under B's lease: nothing leaked, nothing counted twice.
    const rows = rowsOf(shared.pools);
    expect(rows.map((row) => row.agentId).sort()).toEqual(
      [busy.agentId, draining.agentId, spawning.agentId].sort(),
    );
    expect(rows.every((row) => row.leaseId === b.ledger.leaseId)).toBe(true);
    expect((await b.ledger.getUsage('host')).cpus).toBe(3);

    const status = b.manager.getStatus().scalers[0]!;
    expect(status.draining).toEqual([draining.agentId]);
    expect(b.manager.canRunJob(draining.agentId, ['linux'])).toBe(false);
    expect(b.manager.canRunJob(busy.agentId, ['linux'])).toBe(true);
    // The pending binding holds: the job waits for its agent, and gets it.
    expect(await b.manager.requestScale({ jobId: 'job-wait', labels: ['linux'] })).toEqual({
      kind: 'already-spawning',
      scaler: 'vm',
      agentId: spawning.agentId,
    });
    expect(b.manager.onAgentRegistered(spawning.agentId, ['linux'])?.boundJobId).toBe('job-wait');
    // The busy agent's job is still bound, and its events reach the run again.
    expect(b.manager.getAgent(busy.agentId)?.context).toBeDefined();
    expect(b.manager.onAgentRegistered(busy.agentId, ['linux'])?.boundJobId).toBe('job-busy');
    // The draining agent still drains: its job completes and it is destroyed.
    b.manager.onJobComplete(draining.agentId);
    await new Promise((resolve) => setTimeout(resolve, 10));
    expect(shared.backend.callsOf('destroy').map((c) => c.args[0])).toContain(draining.agentId);
    expect(rowsOf(shared.pools).map((row) => row.agentId)).not.toContain(draining.agentId);
    // The capacity the recovered agents hold is counted: one more fits, not two.
    const fourth = await b.manager.requestScale({ jobId: 'job-4', labels: ['linux'] });
    expect(fourth.kind).toBe('spawned');
    const fifth = await b.manager.requestScale({ jobId: 'job-5', labels: ['linux'] });
    expect(fifth.kind).toBe('spawned');
    const sixth = await b.manager.requestScale({ jobId: 'job-6', labels: ['linux'] });
    expect(sixth.kind).toBe('at-capacity');
    await b.manager.shutdownAll();
    expect(rowsOf(shared.pools)).toEqual([]);
    expect(await shared.stateStore.load()).toEqual([]);
  });

  it('releases stored agents the backend no longer runs and applies the unrecorded-agent policy', async () => {
    const shared = {
      stateStore: new MemoryStateStore(),
      pools: new MemoryPoolStore(),
      backend: new FakeBackend({ name: 'vm' }),
    };
    const a = host(shared);
    const gone = await a.manager.requestScale({ jobId: 'job-gone', labels: ['linux'] });
    const kept = await a.manager.requestScale({ jobId: 'job-kept', labels: ['linux'] });
    if (gone.kind !== 'spawned' || kept.kind !== 'spawned') throw new Error('spawn failed');
    a.ledger.abandon();
    // While the host was down: one agent ended, and someone started one by hand.
    await shared.backend.destroy(gone.agentId);
    const stray = new FakeBackend({ name: 'vm' });
    void stray;
    await shared.backend.spawn({
      agentId: 'stray-1',
      scaler: 'vm',
      warm: true,
      labels: ['linux'],
      labelSetIndex: 0,
      mandatoryLabels: [],
      resources: { requests: { cpus: 1, memBytes: 0 }, limits: { cpus: 1 } },
      emit: () => undefined,
    });
    const b = host(shared, { policies: { unrecordedAgents: 'destroy' } });
    const result = await b.manager.recoverState();
    expect(result.recovered).toEqual([kept.agentId]);
    expect(result.released).toEqual([gone.agentId]);
    expect(result.unrecorded).toEqual([{ scaler: 'vm', agentId: 'stray-1', action: 'destroy' }]);
    expect(shared.backend.running()).toEqual([kept.agentId]);
    await new Promise((resolve) => setTimeout(resolve, 10));
    expect(rowsOf(shared.pools).map((row) => row.agentId)).toEqual([kept.agentId]);
    expect((await shared.stateStore.load()).map((r) => r.agentId)).toEqual([kept.agentId]);
    expect(b.events.some((e) => e.kind === 'gone' && e.agentId === gone.agentId)).toBe(true);
  });

  it('start() recovers before the timers run, and requestScale waits for it', async () => {
    const shared = {
      stateStore: new MemoryStateStore(),
      pools: new MemoryPoolStore(),
      backend: new FakeBackend({ name: 'vm' }),
    };
    const a = host(shared);
    for (let i = 0; i < 4; i++)
      await a.manager.requestScale({ jobId: `job-${i}`, labels: ['linux'] });
    a.ledger.abandon();
    const b = host(shared);
    b.manager.start();
    // Issued at once: it must see the 4 recovered agents (maxAgents 4).
    const answer = await b.manager.requestScale({ jobId: 'job-new', labels: ['linux'] });
    expect(answer.kind).toBe('at-capacity');
    expect(b.manager.getStatus().globalActiveCount).toBe(4);
    expect(rowsOf(shared.pools)).toHaveLength(4);
    b.manager.stop();
  });

  it('rejects unknown recovery options and malformed stores', () => {
    const backend = new FakeBackend({ name: 'vm' });
    const base = {
      config,
      backends: [{ name: 'vm', backend }],
      ledgers: { host: new MemoryPoolLedger({ instanceId: 'x', store: new MemoryPoolStore() }) },
    };
    expect(() => new ScalerManager({ ...base, policies: { unknown: 'adopt' } as never })).toThrow(
      /unrecordedAgents/,
    );
    expect(
      () => new ScalerManager({ ...base, policies: { unrecordedAgents: 'adopt' as never } }),
    ).toThrow(/leave, destroy/);
    expect(() => new ScalerManager({ ...base, stateStore: {} as never })).toThrow(/StateStore/);
  });

  it('a spawn is not started before its record is durable, and a failed write fails the spawn', async () => {
    const store = new MemoryStateStore();
    const order: string[] = [];
    let fail = false;
    const slow = {
      load: () => store.load(),
      commit: async (changes: Parameters<MemoryStateStore['commit']>[0]) => {
        await new Promise((resolve) => setTimeout(resolve, 20));
        if (fail) throw new Error('disk full');
        order.push(`commit:${changes.map((c) => c.op).join(',')}`);
        return store.commit(changes);
      },
    };
    const backend = new FakeBackend({ name: 'vm' });
    const spawn = backend.spawn.bind(backend);
    backend.spawn = async (request) => {
      order.push(`spawn:${(await store.load()).some((r) => r.agentId === request.agentId)}`);
      return spawn(request);
    };
    const manager = new ScalerManager({
      config: {
        ...config,
        machinePools: {},
        scalers: [{ ...config.scalers[0]!, machinePool: undefined }],
      },
      backends: [{ name: 'vm', backend }],
      stateStore: slow,
    });
    const spawned = await manager.requestScale({ jobId: 'job-1', labels: ['linux'] });
    expect(spawned.kind).toBe('spawned');
    expect(order[0]).toBe('commit:put');
    expect(order[1]).toBe('spawn:true');
    fail = true;
    const failed = await manager.requestScale({ jobId: 'job-2', labels: ['linux'] });
    expect(failed).toMatchObject({ kind: 'spawn-failed', stage: 'state' });
    expect(backend.running()).toHaveLength(1);
    expect(manager.getStatus().globalActiveCount).toBe(1);
  });
});
