/**
 * Running unattended: start() timers on the injected clock (never overlapping,
 * unref'd, cleared by stop()), and the lost-reservation policies.
 */

import {
  type ScalerConfigInput,
  ScalerManager,
  type ScalerManagerOptions,
} from 'scaler-primitives/manager';
import { FakeBackend, MemoryPoolLedger, TestClock } from 'scaler-primitives/testing';
import { describe, expect, it } from 'vitest';
import { handFleet, vmOnHost } from './hand-fleet.js';

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

/** A manager on a TestClock and a FakeBackend, nothing else (no ledger: its timers are the manager's). */
function timed(options: Partial<ScalerManagerOptions>) {
  const clock = new TestClock('2026-01-05T12:00:00Z');
  const backend = new FakeBackend({ clock, shutdown: false });
  const manager = new ScalerManager({
    config: warm,
    backends: [{ name: 'vm', backend }],
    clock,
    ...options,
  });
  return { manager, backend, clock };
}

describe('start() and stop()', () => {
  it('runs maintain and reconcile on the injected clock, unref’d, and stop() clears them', async () => {
    const { manager, backend, clock } = timed({
      maintenanceIntervalMs: 5000,
      reconcileIntervalMs: 30_000,
      random: () => 0,
    });
    const lists = () => backend.callsOf('list').length;
    manager.start();
    manager.start(); // idempotent
    expect(clock.pending()).toHaveLength(2);
    expect(clock.pending().filter((t) => t.ref)).toHaveLength(0);
    await clock.advance(4999);
    expect(backend.spawned()).toHaveLength(0);
    await clock.advance(1);
    expect(backend.spawned()).toHaveLength(1);
    await clock.advance(25_000);
    expect(lists()).toBe(1);
    manager.stop();
    expect(clock.pending()).toHaveLength(0);
    await clock.advance(120_000);
    expect(lists()).toBe(1);
  });

  it('never overlaps a pass with itself: the next one is armed after the last ended', async () => {
    const { manager, backend, clock } = timed({
      maintenanceIntervalMs: 60_000,
      reconcileIntervalMs: 1000,
      random: () => 0,
    });
    const lists = () => backend.callsOf('list').length;
    const release = backend.holdNext(1, 'list');
    manager.start();
    await clock.advance(10_000);
    expect(lists()).toBe(1);
    release();
    await clock.settle();
    await clock.advance(1000);
    expect(lists()).toBe(2);
    await manager.shutdownAll();
    expect(clock.pending()).toHaveLength(0);
  });

  it('adds up to 10% jitter from the random source', async () => {
    const { manager, backend, clock } = timed({
      maintenanceIntervalMs: 10_000,
      random: () => 0.5,
    });
    manager.start();
    await clock.advance(10_499);
    expect(backend.spawned()).toHaveLength(0);
    await clock.advance(1);
    expect(backend.spawned()).toHaveLength(1);
    manager.stop();
  });
});

const pooled = vmOnHost(2, 'c');

/** A fleet on the kit, driven by hand, and another process holding some of the pool. */
function fleet(options: Partial<ScalerManagerOptions>) {
  const made = handFleet(pooled, {
    start: '2026-01-05T12:00:00Z',
    backend: { shutdown: false },
    manager: options,
  });
  const peer = new MemoryPoolLedger({
    instanceId: 'another-process',
    store: made.ledger.store,
    clock: made.clock,
  });
  peer.registerPool('host', { maxCpu: 2 });
  /** Another process holds `cpus` of the pool from now on. */
  const holdElsewhere = async (cpus: number) => {
    await peer.release('host', 'foreign');
    if (cpus > 0) expect((await peer.reserve('host', 'foreign', cpus, 0)).ok).toBe(true);
  };
  const hasRow = (agentId: string) => made.rows().includes(agentId);
  return { ...made, peer, holdElsewhere, hasRow };
}

/** vm-1 runs; its row vanishes (a peer reaped it while this instance stalled). */
async function lostRow(policy: 'report' | 'stop-spawning' | 'drain', refill: boolean) {
  const setup = fleet({ policies: { reservationLost: policy } });
  const { manager, ledger } = setup;
  await manager.requestScale({ jobId: 'j1', labels: ['linux'] });
  manager.onAgentRegistered('vm-1', []);
  await ledger.release('host', 'vm-1');
  // Another process takes the freed capacity, so the row cannot be restored.
  if (refill) await setup.holdElsewhere(2);
  return setup;
}

describe('lost pool reservations', () => {
  it('are detected by reconcile and restored first', async () => {
    const { manager, events, hasRow } = await lostRow('stop-spawning', false);
    await manager.reconcile();
    expect(events.map((e) => e.kind)).toContain('reservation-lost');
    expect(events.map((e) => e.kind)).toContain('reservation-restored');
    expect(hasRow('vm-1')).toBe(true);
    expect((await manager.requestScale({ jobId: 'j2', labels: ['linux'] })).kind).toBe('spawned');
  });

  it('report: carry on spawning', async () => {
    const { manager, events, holdElsewhere } = await lostRow('report', true);
    await manager.reconcile();
    expect(events.map((e) => e.kind)).toContain('reservation-restore-failed');
    await holdElsewhere(1);
    expect((await manager.requestScale({ jobId: 'j2', labels: ['linux'] })).kind).toBe('spawned');
  });

  it('stop-spawning: refuses spawns in that pool until the row is restored', async () => {
    const { manager, holdElsewhere, hasRow } = await lostRow('stop-spawning', true);
    await manager.reconcile();
    await holdElsewhere(0);
    expect(await manager.requestScale({ jobId: 'j2', labels: ['linux'] })).toMatchObject({
      kind: 'at-capacity',
      limit: { limit: 'reservation-lost', pool: 'host' },
    });
    expect(manager.getStatus().scalers[0]!.spawningStopped).toBe(true);
    await manager.reconcile(); // now it fits again: restored
    expect(hasRow('vm-1')).toBe(true);
    expect((await manager.requestScale({ jobId: 'j2', labels: ['linux'] })).kind).toBe('spawned');
  });

  it('drain: a busy agent that lost its row is drained, never destroyed mid-job', async () => {
    const { manager, backend, clock } = await lostRow('drain', true);
    await manager.reconcile();
    expect(backend.destroyed()).toEqual([]);
    expect(manager.getStatus().scalers[0]!.draining).toEqual(['vm-1']);
    manager.onJobComplete('vm-1');
    await clock.settle();
    expect(backend.destroyed()).toEqual(['vm-1']);
  });

  it('a lease-expired error from reserve names the lost rows, and the policy applies to them', async () => {
    const { manager, events, clock, peer, holdElsewhere } = fleet({
      policies: { reservationLost: 'drain' },
    });
    await manager.requestScale({ jobId: 'j1', labels: ['linux'] });
    manager.onAgentRegistered('vm-1', []);
    // A peer reaps vm-1's row (this instance's lease lapsed) and takes the capacity:
    // the ledger's next reserve fails with a LedgerLeaseExpiredError naming vm-1.
    expect(await peer.release('host', 'vm-1', { anyInstance: true })).toBe(true);
    await holdElsewhere(2);
    const refused = await manager.requestScale({ jobId: 'j2', labels: ['linux'] });
    expect(refused).toMatchObject({ kind: 'spawn-failed', stage: 'reserve' });
    expect(refused.kind === 'spawn-failed' && refused.error).toMatchObject({
      name: 'LedgerLeaseExpiredError',
      agentIds: ['vm-1'],
    });
    await clock.settle();
    expect(events.filter((e) => e.kind === 'reservation-lost').map((e) => e.agentId)).toEqual([
      'vm-1',
    ]);
    expect(manager.getStatus().scalers[0]!.draining).toEqual(['vm-1']);
  });
});
