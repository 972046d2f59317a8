/**
 * Lifecycle under faults: shutdownAll() racing requestScale(), destroys racing
 * dispatch. Every test here failed on the manager before the state machine:
 * an agent spawned after shutdown resolved, a pool row released while its
 * agent ran, canRunJob true for an agent being destroyed.
 */

import type { ScalerManagerOptions, ShutdownResult } from 'scaler-primitives/manager';
import { type FleetBackendOptions, MemoryPoolLedger } from 'scaler-primitives/testing';
import { describe, expect, it, vi } from 'vitest';
import { handFleet, vmOnHost } from './hand-fleet.js';

const config = vmOnHost(4);

/**
 * A fleet on the kit, driven by hand. Its backend has no shutdown(), so
 * shutdownAll destroys each agent (unless `backend` says otherwise).
 */
function fleet(
  options: Partial<ScalerManagerOptions> = {},
  backend: FleetBackendOptions = { shutdown: false },
) {
  return handFleet(options.config ?? config, { manager: options, backend });
}

describe('shutdownAll while requestScale is in flight', () => {
  it('waits for a spawn in flight and destroys its agent before it resolves', async () => {
    const { manager, backend, clock, rows, checkInvariants } = fleet();
    const release = backend.holdNext();
    const pending = manager.requestScale({ jobId: 'job-1', labels: ['linux'] });
    await clock.settle();
    expect(backend.agent('vm-1')?.state).toBe('starting');
    let resolved = false;
    const shutdown = manager.shutdownAll().then(() => {
      resolved = true;
    });
    await clock.settle();
    expect(resolved).toBe(false);
    // The agent is starting: its row is still held.
    expect(rows()).toEqual(['vm-1']);
    release();
    await shutdown;
    expect(await pending).toMatchObject({ kind: 'spawn-failed', stage: 'spawn' });
    expect(backend.running()).toEqual([]);
    expect(backend.destroyed()).toEqual(['vm-1']);
    expect(rows()).toEqual([]);
    checkInvariants();
    expect(manager.getStatus().globalActiveCount).toBe(0);
  });

  it('a pool reservation in flight is given back and nothing is spawned', async () => {
    const { manager, backend, ledger, clock, rows, checkInvariants } = fleet();
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
    const pending = manager.requestScale({ jobId: 'job-1', labels: ['linux'] });
    await clock.settle();
    const shutdown = manager.shutdownAll();
    await clock.settle();
    answer();
    await shutdown;
    expect(await pending).toMatchObject({ kind: 'spawn-failed', stage: 'reserve' });
    expect(backend.spawned()).toEqual([]);
    expect(rows()).toEqual([]);
    checkInvariants();
  });

  it("a backend's shutdown() runs only after its spawns in flight settled", async () => {
    let startingAtShutdown = -1;
    const { manager, backend, clock, checkInvariants } = fleet(
      {},
      {
        onCall: (call) => {
          if (call.method !== 'shutdown') return;
          startingAtShutdown = backend
            .running()
            .filter((id) => backend.agent(id)?.state === 'starting').length;
        },
      },
    );
    const release = backend.holdNext();
    const pending = manager.requestScale({ jobId: 'job-1', labels: ['linux'] });
    await clock.settle();
    const shutdown = manager.shutdownAll();
    await clock.settle();
    release();
    await shutdown;
    await pending;
    expect(backend.callsOf('shutdown')).toHaveLength(1);
    expect(startingAtShutdown).toBe(0);
    expect(backend.running()).toEqual([]);
    checkInvariants();
  });

  it('answers shutting-down to new requests, from the moment it is called', async () => {
    const { manager, backend } = fleet();
    const shutdown = manager.shutdownAll();
    expect(await manager.requestScale({ jobId: 'job-1', labels: ['linux'] })).toEqual({
      kind: 'shutting-down',
    });
    await shutdown;
    expect(await manager.requestScale({ jobId: 'job-2', labels: ['linux'] })).toEqual({
      kind: 'shutting-down',
    });
    expect(backend.spawned()).toEqual([]);
    expect(manager.getStatus().shuttingDown).toBe(true);
  });

  it('a failed destroy at shutdown keeps the pool row (the agent may still run)', async () => {
    const { manager, backend, ledger, events, rows, checkInvariants } = fleet();
    const releaseAll = vi.spyOn(ledger, 'releaseAllForInstance');
    await manager.requestScale({ jobId: 'job-1', labels: ['linux'] });
    backend.script({ method: 'destroy', fail: new Error('boom destroying'), times: Infinity });
    expect(await manager.shutdownAll()).toEqual({
      unconfirmed: [{ agentId: 'vm-1', scaler: 'vm', reason: 'destroy-failed' }],
    });
    expect(events.some((e) => e.kind === 'destroy-failed')).toBe(true);
    expect(rows()).toEqual(['vm-1']);
    expect(releaseAll).not.toHaveBeenCalled();
    expect(manager.getStatus().globalActiveCount).toBe(0);
    // What the fleet finds: the manager forgot vm-1 but kept its row, as it
    // must while the backend may still run it. No row went back early.
    expect(() => checkInvariants()).toThrow(
      expect.objectContaining({
        violations: [
          'pool host: row for vm-1 (1 cores, 0 bytes) but the manager tracks no such agent in this pool',
          'pool host: the manager says it holds 0 cores / 0 bytes, its rows sum to 1 cores / 0 bytes',
        ],
      }),
    );
  });

  it('a spawn that never answers is aborted after timeoutMs; one that honours the abort gives its row back before it resolves', async () => {
    const { manager, backend, clock, rows, checkInvariants } = fleet();
    backend.hangNext();
    const pending = manager.requestScale({ jobId: 'job-1', labels: ['linux'] });
    await clock.settle();
    const signal = backend.spawned()[0]!.signal!;
    let resolved = false;
    const shutdown = manager.shutdownAll({ timeoutMs: 5000 }).then((result) => {
      resolved = true;
      return result;
    });
    await clock.settle(); // its wait starts now
    await clock.advance(4999);
    expect(resolved).toBe(false);
    expect(signal.aborted).toBe(false);
    // The host awaits shutdown: its timer keeps the process alive.
    expect(clock.pending().filter((t) => t.ref)).toHaveLength(1);
    await clock.advance(1);
    expect(signal.aborted).toBe(true);
    expect(await shutdown).toEqual({ unconfirmed: [] });
    expect(signal.reason).toMatchObject({
      name: 'BackendError',
      message: expect.stringMatching(/vm-1/),
    });
    expect(await pending).toMatchObject({ kind: 'spawn-failed', stage: 'spawn' });
    expect(backend.running()).toEqual([]);
    expect(rows()).toEqual([]);
    checkInvariants();
  });

  it('a spawn that ignores the abort is reported with its row kept, then destroyed and released as soon as it answers', async () => {
    const { manager, backend, clock, rows, events, checkInvariants } = fleet();
    const answer = backend.holdNext(); // a backend that does not look at the signal
    void manager.requestScale({ jobId: 'job-1', labels: ['linux'] });
    await clock.settle();
    let resolved = false;
    const shutdown = manager.shutdownAll({ timeoutMs: 5000 }).then((result) => {
      resolved = true;
      return result;
    });
    await clock.settle();
    await clock.advance(5000); // the spawn wait ends: aborted
    await clock.advance(4999); // the grace after the abort
    expect(resolved).toBe(false);
    await clock.advance(1);
    expect(await shutdown).toEqual({
      unconfirmed: [{ agentId: 'vm-1', scaler: 'vm', reason: 'spawn-unanswered' }],
    });
    expect(events.find((e) => e.kind === 'shutdown-incomplete')?.data).toEqual({
      unconfirmed: [{ agentId: 'vm-1', scaler: 'vm', reason: 'spawn-unanswered' }],
    });
    // It may still start: its row stays.
    expect(rows()).toEqual(['vm-1']);
    answer();
    await clock.settle();
    expect(backend.destroyed()).toEqual(['vm-1']);
    expect(backend.running()).toEqual([]);
    expect(rows()).toEqual([]);
    checkInvariants();
  });

  it('a late spawn that fails after shutdownAll resolved gives its row back', async () => {
    const { manager, backend, clock, rows } = fleet();
    const answer = backend.holdNext();
    backend.failNext(1);
    void manager.requestScale({ jobId: 'job-1', labels: ['linux'] });
    await clock.settle();
    let result: ShutdownResult | undefined;
    void manager.shutdownAll({ timeoutMs: 0 }).then((answer) => {
      result = answer;
    });
    for (let i = 0; i < 10 && result === undefined; i++) await clock.advance(1);
    expect(result?.unconfirmed).toEqual([
      { agentId: 'vm-1', scaler: 'vm', reason: 'spawn-unanswered' },
    ]);
    expect(rows()).toEqual(['vm-1']);
    answer();
    await clock.settle();
    expect(rows()).toEqual([]);
  });

  it('a destroy that never answers does not hold shutdownAll: reported, row kept, released once it answers', async () => {
    const { manager, backend, clock, rows, checkInvariants } = fleet();
    await manager.requestScale({ jobId: 'job-1', labels: ['linux'] });
    const answer = backend.holdNext(1, 'destroy');
    let resolved = false;
    const shutdown = manager.shutdownAll({ timeoutMs: 5000 }).then((result) => {
      resolved = true;
      return result;
    });
    await clock.settle();
    await clock.advance(4999);
    expect(resolved).toBe(false);
    await clock.advance(1);
    expect(await shutdown).toEqual({
      unconfirmed: [{ agentId: 'vm-1', scaler: 'vm', reason: 'destroy-unanswered' }],
    });
    expect(rows()).toEqual(['vm-1']);
    answer();
    await clock.settle();
    expect(backend.running()).toEqual([]);
    expect(rows()).toEqual([]);
    checkInvariants();
  });

  it('a destroy that failed before the call is tried once more', async () => {
    const { manager, backend, clock, rows, checkInvariants } = fleet();
    await manager.requestScale({ jobId: 'job-1', labels: ['linux'] });
    manager.onAgentRegistered('vm-1', []);
    manager.onJobComplete('vm-1');
    backend.failNext(1, new Error('boom'), 'destroy');
    const drained = manager.drain('vm-1');
    await clock.settle();
    expect(manager.getAgent('vm-1')?.state).toBe('destroying');
    expect(await manager.shutdownAll()).toEqual({ unconfirmed: [] });
    await drained;
    expect(backend.destroyed()).toEqual(['vm-1']);
    expect(rows()).toEqual([]);
    checkInvariants();
  });

  it('a warm-pool spawn that hangs in a maintenance pass does not hold shutdownAll forever', async () => {
    const { manager, backend, clock, rows, checkInvariants } = fleet({
      config: { ...config, scalers: [{ ...config.scalers[0]!, warmPool: { size: 1 } }] },
    });
    backend.hangNext();
    const pass = manager.maintain();
    await clock.settle();
    expect(backend.spawned().map((r) => r.warm)).toEqual([true]);
    let resolved = false;
    const shutdown = manager.shutdownAll({ timeoutMs: 5000 }).then((result) => {
      resolved = true;
      return result;
    });
    await clock.settle();
    await clock.advance(4999);
    expect(resolved).toBe(false);
    await clock.advance(1); // aborted: the backend gives up
    expect(await shutdown).toEqual({ unconfirmed: [] });
    await pass;
    expect(backend.running()).toEqual([]);
    expect(rows()).toEqual([]);
    checkInvariants();
  });

  it('a ledger release that never answers does not hold shutdownAll forever', async () => {
    const { manager, backend, ledger, clock } = fleet();
    await manager.requestScale({ jobId: 'job-1', labels: ['linux'] });
    ledger.release = () => new Promise<never>(() => {});
    let resolved = false;
    const shutdown = manager.shutdownAll({ timeoutMs: 5000 }).then((result) => {
      resolved = true;
      return result;
    });
    await clock.settle();
    expect(backend.destroyed()).toEqual(['vm-1']);
    // Each wait that involves the release is bounded by timeoutMs.
    for (let i = 0; i < 30 && !resolved; i++) await clock.advance(1000);
    expect(resolved).toBe(true);
    // The agent was confirmed stopped; its row is the ledger's business now.
    expect(await shutdown).toEqual({ unconfirmed: [] });
  });

  it("a backend's shutdown() that answers late: reported, rows kept, released once it answers", async () => {
    const { manager, backend, clock, rows, checkInvariants } = fleet({}, {});
    await manager.requestScale({ jobId: 'job-1', labels: ['linux'] });
    await manager.requestScale({ jobId: 'job-2', labels: ['linux'] });
    const answer = backend.holdNext(1, 'shutdown');
    let resolved = false;
    const shutdown = manager.shutdownAll({ timeoutMs: 5000 }).then((result) => {
      resolved = true;
      return result;
    });
    for (let i = 0; i < 30 && !resolved; i++) await clock.advance(1000);
    expect(await shutdown).toEqual({
      unconfirmed: [
        { agentId: 'vm-1', scaler: 'vm', reason: 'shutdown-failed' },
        { agentId: 'vm-2', scaler: 'vm', reason: 'shutdown-failed' },
      ],
    });
    expect(rows()).toEqual(['vm-1', 'vm-2']);
    answer();
    await clock.settle();
    expect(backend.running()).toEqual([]);
    expect(rows()).toEqual([]);
    checkInvariants();
  });

  it('a request refused by its first scaler does not go on to spawn on the next after shutdownAll()', async () => {
    const { manager, backends, ledger, clock, rows, checkInvariants } = handFleet(
      {
        globalMaxAgents: 10,
        machinePools: { a: { maxCpu: 1 }, b: { maxCpu: 4 } },
        scalers: [
          {
            name: 'first',
            type: 'vm',
            maxAgents: 4,
            machinePool: 'a',
            labelSets: [{ labels: ['linux'], resources: { cpus: 1 } }],
          },
          {
            name: 'second',
            type: 'vm',
            maxAgents: 4,
            machinePool: 'b',
            labelSets: [{ labels: ['linux'], resources: { cpus: 1 } }],
          },
        ],
      },
      { backend: { shutdown: false } },
    );
    // Another controller holds all of pool a.
    const peer = new MemoryPoolLedger({ instanceId: 'peer', store: ledger.store, clock });
    await peer.registerPool('a', { maxCpu: 1 });
    expect((await peer.reserve('a', 'peer-1', 1, 0)).ok).toBe(true);
    // The ledger answers the next reserve only when the test says so.
    let answer!: () => void;
    const answered = new Promise<void>((resolve) => {
      answer = resolve;
    });
    const reserve = ledger.reserve.bind(ledger);
    ledger.reserve = async (...args) => {
      await answered;
      return reserve(...args);
    };
    const pending = manager.requestScale({ jobId: 'job-2', labels: ['linux'] });
    await clock.settle();
    const shutdown = manager.shutdownAll();
    await clock.settle();
    answer(); // pool a refuses job-2: before the fix it spawned on `second`
    expect(await shutdown).toEqual({ unconfirmed: [] });
    expect(await pending).toEqual({ kind: 'shutting-down' });
    expect(backends.second!.spawned()).toEqual([]);
    expect(backends.first!.spawned()).toEqual([]);
    expect(rows('b')).toEqual([]);
    checkInvariants();
  });

  it('refuses unknown options', () => {
    const { manager } = fleet();
    expect(() => manager.shutdownAll({ drian: true } as never)).toThrow(/drian/);
  });
});

describe('shutdownAll({ drain })', () => {
  it('waits for busy agents to finish, destroys idle ones at once, then forces at the timeout', async () => {
    const { manager, backend, clock, checkInvariants } = fleet();
    for (const job of ['j1', 'j2', 'j3'])
      await manager.requestScale({ jobId: job, labels: ['linux'] });
    for (const id of ['vm-1', 'vm-2', 'vm-3']) manager.onAgentRegistered(id, []);
    manager.onJobComplete('vm-3'); // idle
    let resolved = false;
    const shutdown = manager.shutdownAll({ drain: true, timeoutMs: 60_000 }).then(() => {
      resolved = true;
    });
    await clock.settle();
    expect(backend.destroyed()).toEqual(['vm-3']);
    const status = manager.getStatus();
    expect(status.scalers[0]!.draining.sort()).toEqual(['vm-1', 'vm-2']);
    expect(manager.canRunJob('vm-1', ['linux'])).toBe(false);
    manager.onJobComplete('vm-1');
    await clock.settle();
    expect(backend.destroyed()).toEqual(['vm-3', 'vm-1']);
    await clock.advance(59_999);
    expect(resolved).toBe(false);
    await clock.advance(1);
    await shutdown;
    expect(backend.destroyed()).toEqual(['vm-3', 'vm-1', 'vm-2']);
    checkInvariants();
  });
});

describe('destroy racing dispatch', () => {
  it('canRunJob is false once an idle destroy has begun, and a job given anyway is refused', async () => {
    const { manager, backend, clock } = fleet({
      config: {
        ...config,
        scalers: [{ ...config.scalers[0]!, idleTimeoutSeconds: 60 }],
      },
    });
    await manager.requestScale({ jobId: 'j1', labels: ['linux'] });
    manager.onAgentRegistered('vm-1', []);
    manager.onJobComplete('vm-1');
    const release = backend.holdNext(1, 'destroy');
    await clock.advance(60_000);
    const pass = manager.maintain();
    await clock.settle();
    expect(manager.canRunJob('vm-1', ['linux'])).toBe(false);
    manager.correlateAgentToJob('vm-1', 'run', 'j2');
    expect(manager.getStatus().scalers[0]!.busyCount).toBe(0);
    release();
    await pass;
    expect(backend.destroyed()).toEqual(['vm-1']);
    // Destroyed by us: still not a place for jobs (it is not a static agent).
    expect(manager.canRunJob('vm-1', ['linux'])).toBe(false);
    expect(manager.canRunJob('static-1', ['linux'])).toBe(true);
  });
});
