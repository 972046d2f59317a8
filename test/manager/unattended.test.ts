/**
 * Running unattended: start() timers on the injected clock (never overlapping,
 * unref'd, cleared by stop()), and the lost-reservation policies.
 */
import { describe, expect, it } from 'vitest';
import { LedgerLeaseExpiredError } from '../../src/errors.js';
import type { ScalerConfigInput } from '../../src/manager/index.js';
import { settle } from './fake-clock.js';
import { deferred } from './fakes.js';
import { fleet } from './fleet.js';

const warm: ScalerConfigInput = {
  globalMaxAgents: 10,
  scalers: [
    {
      name: 'vm',
      type: 'c',
      maxAgents: 4,
      labelSets: [{ labels: ['linux'] }],
      warmPool: { size: 1 },
    },
  ],
};

describe('start() and stop()', () => {
  it('runs maintain and reconcile on the injected clock, unref’d, and stop() clears them', async () => {
    const { manager, backend, clock } = fleet({
      config: warm,
      maintenanceIntervalMs: 5000,
      reconcileIntervalSeconds: 30,
      random: () => 0,
    });
    let lists = 0;
    const list = backend.list.bind(backend);
    backend.list = async () => {
      lists++;
      return list();
    };
    manager.start();
    manager.start(); // idempotent
    expect(clock.pending).toBe(2);
    expect(clock.referenced).toBe(0);
    await clock.advance(4999);
    expect(backend.spawned).toHaveLength(0);
    await clock.advance(1);
    expect(backend.spawned).toHaveLength(1);
    await clock.advance(25_000);
    expect(lists).toBe(1);
    manager.stop();
    expect(clock.pending).toBe(0);
    await clock.advance(120_000);
    expect(lists).toBe(1);
  });

  it('never overlaps a pass with itself: the next one is armed after the last ended', async () => {
    const { manager, backend, clock } = fleet({
      config: warm,
      maintenanceIntervalMs: 60_000,
      reconcileIntervalSeconds: 1,
      random: () => 0,
    });
    const gate = deferred();
    let lists = 0;
    backend.list = async () => {
      lists++;
      await gate.promise;
      return [];
    };
    manager.start();
    await clock.advance(10_000);
    expect(lists).toBe(1);
    gate.resolve();
    await settle();
    await clock.advance(1000);
    expect(lists).toBe(2);
    await manager.shutdownAll();
    expect(clock.pending).toBe(0);
  });

  it('adds up to 10% jitter from the random source', async () => {
    const { manager, backend, clock } = fleet({
      config: warm,
      maintenanceIntervalMs: 10_000,
      random: () => 0.5,
    });
    manager.start();
    await clock.advance(10_499);
    expect(backend.spawned).toHaveLength(0);
    await clock.advance(1);
    expect(backend.spawned).toHaveLength(1);
    manager.stop();
  });
});

const pooled: ScalerConfigInput = {
  globalMaxAgents: 10,
  machinePools: { host: { maxCpu: 2 } },
  scalers: [
    {
      name: 'vm',
      type: 'c',
      maxAgents: 4,
      machinePool: 'host',
      labelSets: [{ labels: ['linux'], resources: { cpus: 1 } }],
    },
  ],
};

/** vm-1 runs; its row vanishes (a peer reaped it while this instance stalled). */
async function lostRow(policy: 'report' | 'stop-spawning' | 'drain', refill: boolean) {
  const setup = fleet({ config: pooled, reservationLostPolicy: policy });
  const { manager, ledger } = setup;
  await manager.requestScale(['linux'], 'j1');
  manager.onAgentRegistered('vm-1', []);
  ledger.rows.get('host')!.delete('vm-1');
  // Another process takes the freed capacity, so the row cannot be restored.
  if (refill) ledger.foreign.set('host', { cpus: 2, memBytes: 0 });
  return setup;
}

describe('lost pool reservations', () => {
  it('are detected by reconcile and restored first', async () => {
    const { manager, ledger, events } = await lostRow('stop-spawning', false);
    await manager.reconcile();
    expect(events.map((e) => e.kind)).toContain('reservation-lost');
    expect(events.map((e) => e.kind)).toContain('reservation-restored');
    expect(ledger.rows.get('host')!.has('vm-1')).toBe(true);
    expect((await manager.requestScale(['linux'], 'j2')).kind).toBe('spawned');
  });

  it('report: carry on spawning', async () => {
    const { manager, events, ledger } = await lostRow('report', true);
    await manager.reconcile();
    expect(events.map((e) => e.kind)).toContain('reservation-restore-failed');
    ledger.foreign.set('host', { cpus: 1, memBytes: 0 });
    expect((await manager.requestScale(['linux'], 'j2')).kind).toBe('spawned');
  });

  it('stop-spawning: refuses spawns in that pool until the row is restored', async () => {
    const { manager, ledger } = await lostRow('stop-spawning', true);
    await manager.reconcile();
    ledger.foreign.set('host', { cpus: 0, memBytes: 0 });
    expect(await manager.requestScale(['linux'], 'j2')).toMatchObject({
      kind: 'at-capacity',
      limit: { limit: 'reservation-lost', pool: 'host' },
    });
    expect(manager.getStatus().scalers[0]!.spawningStopped).toBe(true);
    await manager.reconcile(); // now it fits again: restored
    expect(ledger.rows.get('host')!.has('vm-1')).toBe(true);
    expect((await manager.requestScale(['linux'], 'j2')).kind).toBe('spawned');
  });

  it('drain: a busy agent that lost its row is drained, never destroyed mid-job', async () => {
    const { manager, backend } = await lostRow('drain', true);
    await manager.reconcile();
    expect(backend.destroyed).toEqual([]);
    expect(manager.getStatus().scalers[0]!.draining).toEqual(['vm-1']);
    manager.onJobComplete('vm-1');
    await settle();
    expect(backend.destroyed).toEqual(['vm-1']);
  });

  it('a lease-expired error from reserve names the lost rows, and the policy applies to them', async () => {
    const { manager, ledger, events } = fleet({ config: pooled, reservationLostPolicy: 'drain' });
    await manager.requestScale(['linux'], 'j1');
    manager.onAgentRegistered('vm-1', []);
    ledger.rows.get('host')!.delete('vm-1');
    ledger.foreign.set('host', { cpus: 2, memBytes: 0 });
    ledger.failReserve = new LedgerLeaseExpiredError('host', 'lapsed', ['vm-1']);
    expect(await manager.requestScale(['linux'], 'j2')).toMatchObject({
      kind: 'spawn-failed',
      stage: 'reserve',
    });
    ledger.failReserve = undefined;
    await settle();
    expect(events.filter((e) => e.kind === 'reservation-lost').map((e) => e.agentId)).toEqual([
      'vm-1',
    ]);
    expect(manager.getStatus().scalers[0]!.draining).toEqual(['vm-1']);
  });
});
