/**
 * Lifecycle under faults: shutdownAll() racing requestScale(), destroys racing
 * dispatch. Every test here failed on the manager before the state machine:
 * an agent spawned after shutdown resolved, a pool row released while its
 * agent ran, canRunJob true for an agent being destroyed.
 */
import { describe, expect, it } from 'vitest';
import { settle } from './fake-clock.js';
import { deferred } from './fakes.js';
import { config, fleet } from './fleet.js';

describe('shutdownAll while requestScale is in flight', () => {
  it('waits for a spawn in flight and destroys its agent before it resolves', async () => {
    const { manager, backend, ledger, violations } = fleet();
    const gate = deferred();
    backend.gate = gate.promise;
    const pending = manager.requestScale(['linux'], 'job-1');
    await settle();
    expect(backend.starting.has('vm-1')).toBe(true);
    let resolved = false;
    const shutdown = manager.shutdownAll().then(() => {
      resolved = true;
    });
    await settle();
    expect(resolved).toBe(false);
    // The agent is starting: its row is still held.
    expect(ledger.rows.get('host')!.has('vm-1')).toBe(true);
    gate.resolve();
    await shutdown;
    expect(await pending).toMatchObject({ kind: 'spawn-failed', stage: 'spawn' });
    expect(backend.running.size).toBe(0);
    expect(backend.destroyed).toEqual(['vm-1']);
    expect(ledger.rows.get('host')!.size).toBe(0);
    expect(violations).toEqual([]);
    expect(manager.getStatus().globalActiveCount).toBe(0);
  });

  it('a pool reservation in flight is given back and nothing is spawned', async () => {
    const { manager, backend, ledger, violations } = fleet();
    const gate = deferred();
    const reserve = ledger.reserve.bind(ledger);
    ledger.reserve = async (...args) => {
      await gate.promise;
      return reserve(...args);
    };
    const pending = manager.requestScale(['linux'], 'job-1');
    await settle();
    const shutdown = manager.shutdownAll();
    await settle();
    gate.resolve();
    await shutdown;
    expect(await pending).toMatchObject({ kind: 'spawn-failed', stage: 'reserve' });
    expect(backend.spawned).toEqual([]);
    expect(ledger.rows.get('host')!.size).toBe(0);
    expect(violations).toEqual([]);
  });

  it("a backend's shutdown() runs only after its spawns in flight settled", async () => {
    const { manager, backend, violations } = fleet();
    let runningAtShutdown = -1;
    backend.shutdown = async () => {
      runningAtShutdown = backend.starting.size;
      for (const id of backend.running) backend.running.delete(id);
    };
    const gate = deferred();
    backend.gate = gate.promise;
    const pending = manager.requestScale(['linux'], 'job-1');
    await settle();
    const shutdown = manager.shutdownAll();
    await settle();
    gate.resolve();
    await shutdown;
    await pending;
    expect(runningAtShutdown).toBe(0);
    expect(backend.running.size).toBe(0);
    expect(violations).toEqual([]);
  });

  it('answers shutting-down to new requests, from the moment it is called', async () => {
    const { manager, backend } = fleet();
    const shutdown = manager.shutdownAll();
    expect(await manager.requestScale(['linux'], 'job-1')).toEqual({ kind: 'shutting-down' });
    await shutdown;
    expect(await manager.requestScale(['linux'], 'job-2')).toEqual({ kind: 'shutting-down' });
    expect(backend.spawned).toEqual([]);
    expect(manager.getStatus().shuttingDown).toBe(true);
  });

  it('a failed destroy at shutdown keeps the pool row (the agent may still run)', async () => {
    const { manager, backend, ledger, events, violations } = fleet();
    await manager.requestScale(['linux'], 'job-1');
    backend.failDestroy = true;
    await manager.shutdownAll();
    expect(events.some((e) => e.kind === 'destroy-failed')).toBe(true);
    expect(ledger.rows.get('host')!.has('vm-1')).toBe(true);
    expect(ledger.releasedAllForInstance).toBe(0);
    expect(violations).toEqual([]);
    expect(manager.getStatus().globalActiveCount).toBe(0);
  });

  it('a spawn that never settles is waited for up to timeoutMs, then its row is kept', async () => {
    const { manager, backend, ledger, clock } = fleet();
    backend.gate = new Promise(() => {});
    void manager.requestScale(['linux'], 'job-1');
    await settle();
    let resolved = false;
    const shutdown = manager.shutdownAll({ timeoutMs: 5000 }).then(() => {
      resolved = true;
    });
    await clock.advance(4999);
    expect(resolved).toBe(false);
    // The host awaits shutdown: its timer keeps the process alive.
    expect(clock.referenced).toBe(1);
    await clock.advance(1);
    await shutdown;
    expect(ledger.rows.get('host')!.has('vm-1')).toBe(true);
  });

  it('refuses unknown options', () => {
    const { manager } = fleet();
    expect(() => manager.shutdownAll({ drian: true } as never)).toThrow(/drian/);
  });
});

describe('shutdownAll({ drain })', () => {
  it('waits for busy agents to finish, destroys idle ones at once, then forces at the timeout', async () => {
    const { manager, backend, clock, violations } = fleet();
    for (const job of ['j1', 'j2', 'j3']) await manager.requestScale(['linux'], job);
    for (const id of ['vm-1', 'vm-2', 'vm-3']) manager.onAgentRegistered(id, []);
    manager.onJobComplete('vm-3'); // idle
    let resolved = false;
    const shutdown = manager.shutdownAll({ drain: true, timeoutMs: 60_000 }).then(() => {
      resolved = true;
    });
    await settle();
    expect(backend.destroyed).toEqual(['vm-3']);
    const status = manager.getStatus();
    expect(status.scalers[0]!.draining.sort()).toEqual(['vm-1', 'vm-2']);
    expect(manager.canRunJob('vm-1', ['linux'])).toBe(false);
    manager.onJobComplete('vm-1');
    await settle();
    expect(backend.destroyed).toEqual(['vm-3', 'vm-1']);
    await clock.advance(59_999);
    expect(resolved).toBe(false);
    await clock.advance(1);
    await shutdown;
    expect(backend.destroyed).toEqual(['vm-3', 'vm-1', 'vm-2']);
    expect(violations).toEqual([]);
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
    await manager.requestScale(['linux'], 'j1');
    manager.onAgentRegistered('vm-1', []);
    manager.onJobComplete('vm-1');
    const destroyGate = deferred();
    backend.destroyGate = destroyGate.promise;
    clock.set(clock.now() + 60_000);
    const pass = manager.maintain();
    await settle();
    expect(manager.canRunJob('vm-1', ['linux'])).toBe(false);
    manager.correlateAgentToJob('vm-1', 'run', 'j2');
    expect(manager.getStatus().scalers[0]!.busyCount).toBe(0);
    destroyGate.resolve();
    await pass;
    expect(backend.destroyed).toEqual(['vm-1']);
    // Destroyed by us: still not a place for jobs (it is not a static agent).
    expect(manager.canRunJob('vm-1', ['linux'])).toBe(false);
    expect(manager.canRunJob('static-1', ['linux'])).toBe(true);
  });
});
