/**
 * Drain and destroy: every move of the agent state machine the manager makes,
 * against concurrent calls. A busy agent is never destroyed by the manager.
 */

import type {
  ScalerConfigInput,
  ScalerManager,
  ScalerManagerOptions,
} from 'scaler-primitives/manager';
import { describe, expect, it } from 'vitest';
import { handFleet, vmOnHost } from './hand-fleet.js';

const base = vmOnHost(8);

/** A fleet on the kit, driven by hand: maintenance and reconcile run when the test calls them. */
function fleet({
  config,
  ...manager
}: Partial<ScalerManagerOptions> & { config: ScalerConfigInput }) {
  return handFleet(config, { manager, backend: { shutdown: false } });
}

async function busyAgents(manager: ScalerManager, n: number) {
  for (let i = 1; i <= n; i++) {
    await manager.requestScale({ jobId: `job-${i}`, labels: ['linux'] });
    manager.onAgentRegistered(`vm-${i}`, []);
  }
}

describe('drain(agentId)', () => {
  it('a busy agent takes no job, shows as draining, and goes when its job completes', async () => {
    const { manager, backend, clock, checkInvariants, events } = fleet({ config: base });
    await busyAgents(manager, 1);
    let gone = false;
    const drained = manager.drain('vm-1').then(() => {
      gone = true;
    });
    await clock.settle();
    expect(gone).toBe(false);
    expect(backend.destroyed()).toEqual([]);
    expect(manager.canRunJob('vm-1', ['linux'])).toBe(false);
    const status = manager.getStatus().scalers[0]!;
    expect(status.draining).toEqual(['vm-1']);
    expect(status.drainingCount).toBe(1);
    expect(status.busyCount).toBe(0);
    // Draining twice is the same drain.
    void manager.drain('vm-1');
    manager.onJobComplete('vm-1');
    await drained;
    expect(backend.destroyed()).toEqual(['vm-1']);
    expect(manager.getStatus().globalActiveCount).toBe(0);
    expect(manager.getStatus().counters.drained).toBe(1);
    expect(events.filter((e) => e.kind === 'draining')).toHaveLength(1);
    checkInvariants();
  });

  it('resolves once the agent is gone and its pool row released, not before', async () => {
    const { manager, backend, clock, ledger, rows } = fleet({ config: base });
    await busyAgents(manager, 1);
    manager.onJobComplete('vm-1');
    // Hold the ledger's release until the test lets it go.
    const release = ledger.release.bind(ledger);
    let letGo!: () => void;
    const held = new Promise<void>((resolve) => {
      letGo = resolve;
    });
    ledger.release = async (...args: Parameters<typeof release>) => {
      await held;
      return release(...args);
    };
    let resolved = false;
    const drained = manager.drain('vm-1').then(() => {
      resolved = true;
    });
    await clock.settle();
    expect(backend.destroyed()).toEqual(['vm-1']);
    expect(manager.getAgent('vm-1')).toBeUndefined();
    expect(rows()).toEqual(['vm-1']);
    expect(resolved).toBe(false);
    letGo();
    await drained;
    expect(rows()).toEqual([]);
  });

  it('an idle agent is destroyed at once', async () => {
    const { manager, backend } = fleet({ config: base });
    await busyAgents(manager, 1);
    manager.onJobComplete('vm-1');
    await manager.drain('vm-1');
    expect(backend.destroyed()).toEqual(['vm-1']);
  });

  it('a spawning agent is destroyed once its spawn settles; registering binds nothing', async () => {
    const { manager, backend, clock, rows, checkInvariants } = fleet({ config: base });
    const release = backend.holdNext();
    const pending = manager.requestScale({ jobId: 'job-1', labels: ['linux'] });
    await clock.settle();
    const drained = manager.drain('vm-1');
    // A fast agent registers before its spawn call answered: it is bound to nothing.
    expect(manager.onAgentRegistered('vm-1', [])).toEqual({ mandatoryLabels: [] });
    // The job is free to ask again.
    expect(manager.getStatus().scalers[0]!.destroyingCount).toBe(1);
    release();
    await drained;
    expect(await pending).toMatchObject({ kind: 'spawn-failed' });
    expect(backend.destroyed()).toEqual(['vm-1']);
    expect(rows()).toEqual([]);
    checkInvariants();
  });

  it('an agent that disconnects while draining is gone', async () => {
    const { manager } = fleet({ config: base });
    await busyAgents(manager, 1);
    const drained = manager.drain('vm-1');
    await manager.onAgentDisconnected('vm-1');
    await drained;
    expect(manager.getStatus().globalActiveCount).toBe(0);
  });

  it('unknown agents resolve at once; bad ids are refused', async () => {
    const { manager } = fleet({ config: base });
    await manager.drain('nobody');
    expect(() => manager.drain('x'.repeat(4000))).toThrow(/at most 253/);
  });
});

describe('drainScaler(name)', () => {
  it('drains every agent it runs and resolves when all are gone', async () => {
    const { manager, backend, clock } = fleet({ config: base });
    await busyAgents(manager, 3);
    manager.onJobComplete('vm-3');
    let gone = false;
    const drained = manager.drainScaler('vm').then(() => {
      gone = true;
    });
    await clock.settle();
    expect(backend.destroyed()).toEqual(['vm-3']);
    manager.onJobComplete('vm-1');
    await clock.settle();
    expect(gone).toBe(false);
    manager.onJobComplete('vm-2');
    await drained;
    expect(backend.destroyed().sort()).toEqual(['vm-1', 'vm-2', 'vm-3']);
    expect(() => manager.drainScaler('nope')).toThrow(/scaler/);
  });
});

describe('the manager never destroys a busy agent', () => {
  it('reload lowering maxAgents destroys idle agents above it and drains busy ones', async () => {
    const { manager, backend, clock } = fleet({ config: base });
    await busyAgents(manager, 4);
    manager.onJobComplete('vm-4');
    const lowered = structuredClone(base);
    lowered.scalers[0]!.maxAgents = 1;
    expect((await manager.reload(lowered)).ok).toBe(true);
    await manager.maintain();
    expect(backend.destroyed()).toEqual(['vm-4']);
    const status = manager.getStatus().scalers[0]!;
    expect(status.drainingCount).toBe(2);
    expect(status.busyCount).toBe(1);
    for (const id of ['vm-1', 'vm-2', 'vm-3']) manager.onJobComplete(id);
    await clock.settle();
    expect(backend.destroyed()).toHaveLength(3);
    expect(manager.getStatus().scalers[0]!.activeCount).toBe(1);
  });

  it('a removed scaler: idle agents go at once, busy ones after their job', async () => {
    const other = { name: 'other', type: 'c', maxAgents: 1, labelSets: [{ labels: ['x'] }] };
    const { manager, backend, clock } = fleet({
      config: { ...base, scalers: [...base.scalers, other] },
    });
    await busyAgents(manager, 2);
    manager.onJobComplete('vm-2');
    expect((await manager.reload({ ...base, scalers: [other] })).ok).toBe(true);
    expect(manager.canRunJob('vm-1', ['linux'])).toBe(true); // busy: finishes its job
    await manager.maintain();
    expect(backend.destroyed()).toEqual(['vm-2']);
    manager.onJobComplete('vm-1');
    await clock.settle();
    expect(backend.destroyed()).toEqual(['vm-2', 'vm-1']);
    expect(manager.getStatus().scalers.map((b) => b.name)).toEqual(['other']);
  });

  it('idle reaping racing a job: the job wins when it came first', async () => {
    const { manager, backend, clock } = fleet({
      config: { ...base, scalers: [{ ...base.scalers[0]!, idleTimeoutSeconds: 30 }] },
    });
    await busyAgents(manager, 1);
    manager.onJobComplete('vm-1');
    await clock.advance(30_000);
    manager.correlateAgentToJob('vm-1', 'run', 'job-9');
    await manager.maintain();
    expect(backend.destroyed()).toEqual([]);
    expect(manager.getStatus().scalers[0]!.busyCount).toBe(1);
  });

  it('reconcile leaves an agent whose destroy is answering alone', async () => {
    const { manager, backend } = fleet({ config: base });
    await busyAgents(manager, 1);
    manager.onJobComplete('vm-1');
    const release = backend.holdNext(1, 'destroy');
    const drained = manager.drain('vm-1');
    // The agent is gone from the backend's list while its destroy is still answering.
    await backend.crash('vm-1', { disconnect: false });
    const result = await manager.reconcile();
    expect(result.released).toEqual([]);
    release();
    await drained;
    expect(manager.getStatus().globalActiveCount).toBe(0);
  });
});
