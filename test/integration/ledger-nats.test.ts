/**
 * NatsPoolLedger against a real nats-server started on a loopback port with a
 * temp store: the PoolLedger contract, typed errors for bad stored values,
 * leases ended by close, and a server that goes away and comes back.
 */

import { type KV, Kvm } from '@nats-io/kv';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import {
  isLedgerCapMismatchError,
  isLedgerCorruptError,
  isLedgerLeaseExpiredError,
  isLedgerUnavailableError,
} from '../../src/errors/ledger.js';
import { isDuplicateReservationError } from '../../src/errors/resources.js';
import { NatsPoolLedger } from '../../src/ledger/nats/nats-pool-ledger.js';
import { withNatsLedgerHooks } from '../../src/ledger/nats/options.js';
import { fenceLeaseKey } from '../helpers/nats-ledger.js';
import { type NatsServer, startNatsServer } from '../helpers/nats-server.js';
import { stopProcess } from '../helpers/pid.js';
import { hasSystem } from '../helpers/system.js';

const GiB = 2 ** 30;
const ok = hasSystem(['nats-server'], 'NatsPoolLedger against nats-server');

describe.runIf(ok)('NatsPoolLedger on one server', () => {
  let server: NatsServer;
  let nc: NatsConnection;
  let kv: KV;
  const open: NatsPoolLedger[] = [];
  let serial = 0;

  beforeAll(async () => {
    server = await startNatsServer();
    nc = await connect({ servers: server.url });
    kv = await new Kvm(nc).create('scaler-pools');
  });
  afterEach(async () => {
    await Promise.all(open.splice(0).map((l) => l.close()));
  });
  afterAll(async () => {
    await nc?.close();
    await server?.stop();
  });

  // Each ledger's monotonic clock, shifted by its skew (see fence below).
  const skews = new WeakMap<NatsPoolLedger, number>();
  async function ledger(instanceId: string, extra: { leaseMs?: number; timeoutMs?: number } = {}) {
    let self: NatsPoolLedger | undefined;
    const monotonic = () => performance.now() + (self ? (skews.get(self) ?? 0) : 0);
    const l = await NatsPoolLedger.connect(
      withNatsLedgerHooks({ servers: server.url, instanceId, ...extra }, { monotonic }),
    );
    self = l;
    open.push(l);
    return l;
  }
  const poolName = () => `p${serial++}`;

  it('grants until the cap, refuses with the dimension, releases idempotently', async () => {
    const pool = poolName();
    const a = await ledger('a');
    const b = await ledger('b');
    for (const l of [a, b]) l.registerPool(pool, { maxCpu: 4, maxMemoryBytes: 8 * GiB });
    expect(await a.reserve(pool, 'x1', 2, 2 * GiB)).toEqual({ ok: true });
    expect(await b.reserve(pool, 'x2', 1.5, 2 * GiB)).toEqual({ ok: true });
    expect(await b.reserve(pool, 'x3', 1, GiB)).toEqual({
      ok: false,
      pool,
      dimension: 'cpu',
      requested: 1,
      used: 3.5,
      max: 4,
      neverFits: false,
    });
    expect(await a.tryReserve(pool, 'x4', 0.5, 5 * GiB)).toBe(false);
    expect(await a.getUsage(pool)).toEqual({ cpus: 3.5, memBytes: 4 * GiB });
    expect((await b.list(pool)).map((r) => [r.agentId, r.instanceId])).toEqual([
      ['x1', 'a'],
      ['x2', 'b'],
    ]);
    // Only the owner releases its row (fail closed); a second release is a no-op.
    expect(await b.release(pool, 'x1')).toBe(false);
    expect(await a.release(pool, 'x1')).toBe(true);
    expect(await a.release(pool, 'x1')).toBe(false);
    expect(await a.getUsage(pool)).toEqual({ cpus: 1.5, memBytes: 2 * GiB });
  });

  it('stores the file ledger document under pool.<name> and keeps unknown fields', async () => {
    const pool = poolName();
    const a = await ledger('a');
    a.registerPool(pool, { maxCpu: 2 });
    await a.reserve(pool, 'x1', 1, 0);
    const entry = await kv.get(`pool.${pool}`);
    const doc = entry!.json<
      Record<string, unknown> & { reservations: Array<Record<string, unknown>> }
    >();
    expect(doc.version).toBe(1);
    expect(doc.cap).toEqual({ maxCpu: 2 });
    expect(doc.reservations[0]).toMatchObject({
      instanceId: 'a',
      pid: process.pid,
      agentId: 'x1',
      cpus: 1,
      memBytes: 0,
      leaseId: a.leaseId,
    });
    doc.owner = 'someone else';
    (doc.reservations[0] as Record<string, unknown>).note = 'kept';
    await kv.put(`pool.${pool}`, JSON.stringify(doc));
    await a.reserve(pool, 'x2', 1, 0);
    const after = (await kv.get(`pool.${pool}`))!.json<typeof doc>();
    expect(after.owner).toBe('someone else');
    expect(after.reservations[0]!.note).toBe('kept');
    expect(after.reservations.map((r) => r.agentId)).toEqual(['x1', 'x2']);
  });

  it('refuses a duplicate agent id', async () => {
    const pool = poolName();
    const a = await ledger('a');
    a.registerPool(pool, { maxCpu: 8 });
    await a.reserve(pool, 'x', 1, 0);
    const error = await a.reserve(pool, 'x', 1, 0).catch((e: unknown) => e);
    expect(isDuplicateReservationError(error)).toBe(true);
  });

  it('concurrent calls in one process each get their own answer', async () => {
    const pool = poolName();
    const a = await ledger('a');
    a.registerPool(pool, { maxCpu: 5 });
    const results = await Promise.all(
      Array.from({ length: 10 }, (_, i) => a.tryReserve(pool, `c${i}`, 1, 0)),
    );
    expect(results.filter(Boolean)).toHaveLength(5);
    expect(results.slice(0, 5)).toEqual([true, true, true, true, true]);
    expect((await a.getUsage(pool)).cpus).toBe(5);
  });

  it.each([
    ['not JSON', '{"version":1,', /not valid JSON/],
    [
      'an unknown version',
      JSON.stringify({ version: 2, cap: {}, reservations: [] }),
      /version is 2/,
    ],
    [
      'a bad row',
      JSON.stringify({ version: 1, cap: {}, reservations: [{ agentId: 3 }] }),
      /reservations/,
    ],
  ])('refuses %s with LedgerCorruptError and overwrites nothing', async (_, text, message) => {
    const pool = poolName();
    await kv.put(`pool.${pool}`, text);
    const before = (await kv.get(`pool.${pool}`))!.revision;
    const a = await ledger('a');
    a.registerPool(pool, { maxCpu: 4 });
    for (const call of [
      () => a.reserve(pool, 'x', 1, 0),
      () => a.reapStale(pool),
      () => a.list(pool),
    ]) {
      const error = await call().catch((e: unknown) => e);
      expect(isLedgerCorruptError(error), String(error)).toBe(true);
      expect((error as Error).message).toMatch(message);
      expect((error as Error).message).toContain(`pool.${pool}`);
    }
    expect((await kv.get(`pool.${pool}`))!.revision).toBe(before);
  });

  it('refuses a cap mismatch with LedgerCapMismatchError and overwrites nothing', async () => {
    const pool = poolName();
    const a = await ledger('a');
    const b = await ledger('b');
    a.registerPool(pool, { maxCpu: 4 });
    b.registerPool(pool, { maxCpu: 8 });
    await a.reserve(pool, 'x', 1, 0);
    const before = (await kv.get(`pool.${pool}`))!.revision;
    const error = await b.reserve(pool, 'y', 1, 0).catch((e: unknown) => e);
    expect(isLedgerCapMismatchError(error)).toBe(true);
    expect((error as Error).message).toMatch(/maxCpu: 4.*maxCpu: 8/);
    expect((await kv.get(`pool.${pool}`))!.revision).toBe(before);
  });

  it('close ends the lease: a peer reaps the rows left behind at once', async () => {
    const pool = poolName();
    const a = await ledger('a', { leaseMs: 60_000 });
    const b = await ledger('b', { leaseMs: 60_000 });
    a.registerPool(pool, { maxCpu: 2 });
    b.registerPool(pool, { maxCpu: 2 });
    await a.reserve(pool, 'x1', 1, 0);
    await a.reserve(pool, 'x2', 1, 0);
    expect(await b.tryReserve(pool, 'y', 1, 0)).toBe(false);
    await a.close();
    // b learns of the deleted heartbeat from its watch, well within the 60 s lease.
    const until = performance.now() + 5000;
    while ((await b.getUsage(pool)).cpus > 0 && performance.now() < until) {
      await new Promise((r) => setTimeout(r, 20));
    }
    expect(await b.getUsage(pool)).toEqual({ cpus: 0, memBytes: 0 });
    expect(await b.reapStale(pool)).toBe(2);
    expect(await b.tryReserve(pool, 'y', 1, 0)).toBe(true);
  });

  it('a refresh that landed without an answer does not cost the lease', async () => {
    const pool = poolName();
    const a = await ledger('a', { leaseMs: 600 });
    a.registerPool(pool, { maxCpu: 2 });
    await a.reserve(pool, 'x1', 1, 0);
    const leaseId = a.leaseId;
    // As if a refresh was stored but its acknowledgement was lost: the revision moves on.
    const current = (await kv.get(`lease.${leaseId}`))!;
    await kv.update(`lease.${leaseId}`, current.value, current.revision);
    await new Promise((r) => setTimeout(r, 500));
    expect(await a.reserve(pool, 'x2', 1, 0)).toEqual({ ok: true });
    expect(a.leaseId).toBe(leaseId);
    const entry = (await kv.get(`lease.${leaseId}`))!;
    expect(entry.json<{ ended?: string }>().ended).toBeUndefined();
    expect(entry.revision).toBeGreaterThan(current.revision + 1);
  });

  // End `a`'s lease as a peer does when it judges it expired, and make a's last
  // heartbeat look old (its monotonic clock jumps a minute) so its next call
  // takes the refresh-before-call path.
  async function fence(a: NatsPoolLedger): Promise<void> {
    await fenceLeaseKey(kv, a.leaseId);
    skews.set(a, (skews.get(a) ?? 0) + 60_000);
  }

  it('a lease fenced by a peer fails the next call once per pool, then a new lease works', async () => {
    const a = await ledger('a', { leaseMs: 60_000 });
    const p1 = poolName();
    const p2 = poolName();
    a.registerPool(p1, { maxCpu: 2 });
    a.registerPool(p2, { maxCpu: 2 });
    await a.reserve(p1, 'x1', 1, 0);
    const old = a.leaseId;
    await fence(a);
    const error = await a.reserve(p1, 'x2', 1, 0).catch((e: unknown) => e);
    expect(isLedgerLeaseExpiredError(error), String(error)).toBe(true);
    expect((error as Error).message).toContain(p1);
    expect(a.leaseId).not.toBe(old);
    expect(isLedgerLeaseExpiredError(await a.list(p2).catch((e: unknown) => e))).toBe(true);
    // Rows of the old lease no longer count, and calls work again.
    expect(await a.getUsage(p1)).toEqual({ cpus: 0, memBytes: 0 });
    expect(await a.reserve(p1, 'x2', 2, 0)).toEqual({ ok: true });
    expect((await a.list(p1)).map((r) => [r.agentId, r.leaseId])).toEqual([['x2', a.leaseId]]);
  });

  it('the reaper does not use up the lost-lease report a caller is owed', async () => {
    const a = await ledger('a', { leaseMs: 60_000 });
    const pool = poolName();
    a.registerPool(pool, { maxCpu: 2 });
    await a.reserve(pool, 'x1', 1, 0);
    const old = a.leaseId;
    await fence(a);
    // Reaper rounds run first: they find the lease lost and renew it, silently.
    a.start(20);
    try {
      const until = Date.now() + 5000;
      while (a.leaseId === old && Date.now() < until) await new Promise((r) => setTimeout(r, 20));
      expect(a.leaseId).not.toBe(old);
      await new Promise((r) => setTimeout(r, 100));
      const error = await a.reserve(pool, 'x2', 1, 0).catch((e: unknown) => e);
      expect(isLedgerLeaseExpiredError(error), String(error)).toBe(true);
      expect(await a.reserve(pool, 'x2', 1, 0)).toEqual({ ok: true });
    } finally {
      a.stop();
    }
  });

  it('reaps rows whose lease has no heartbeat key; keeps rows without a lease', async () => {
    const pool = poolName();
    const row = (agentId: string, extra: Record<string, unknown>) => ({
      instanceId: 'gone-host',
      pid: 1,
      bootId: 'other-boot',
      agentId,
      cpus: 1,
      memBytes: 0,
      reservedAt: 1,
      ...extra,
    });
    await kv.put(
      `pool.${pool}`,
      JSON.stringify({
        version: 1,
        cap: { maxCpu: 4 },
        reservations: [row('no-heartbeat', { leaseId: 'never-written' }), row('no-lease', {})],
      }),
    );
    const a = await ledger('a');
    a.registerPool(pool, { maxCpu: 4 });
    const snapshot = await a.inspect(pool);
    expect(snapshot.live.map((r) => r.agentId)).toEqual(['no-lease']);
    expect(snapshot.stale.map((s) => [s.row.agentId, s.reason])).toEqual([
      ['no-heartbeat', 'lease-expired'],
    ]);
    expect(snapshot.usage).toEqual({ cpus: 1, memBytes: 0 });
    expect(await a.reapStale(pool)).toBe(1);
    const doc = (await kv.get(`pool.${pool}`))!.json<{
      reservations: Array<{ agentId: string }>;
    }>();
    expect(doc.reservations.map((r) => r.agentId)).toEqual(['no-lease']);
    // A row without a lease goes only when released by agent id (another
    // instance's row: the operator path).
    expect(await a.release(pool, 'no-lease')).toBe(false);
    expect(await a.release(pool, 'no-lease', { anyInstance: true })).toBe(true);
  });

  it('judges leases by server timestamps: a host wall clock hours ahead reaps nothing', async () => {
    const pool = poolName();
    const a = await ledger('a', { leaseMs: 1000 });
    const b = await ledger('b', { leaseMs: 1000 });
    a.registerPool(pool, { maxCpu: 2 });
    b.registerPool(pool, { maxCpu: 2 });
    await a.reserve(pool, 'a1', 1, 0);
    const realNow = Date.now;
    Date.now = () => realNow() + 3 * 3600_000;
    try {
      // Several lease windows pass on b's monotonic clock while a keeps beating.
      for (let i = 0; i < 3; i++) {
        await new Promise((r) => setTimeout(r, 500));
        expect(await b.reapStale(pool)).toBe(0);
      }
      expect((await b.list(pool)).map((r) => r.agentId)).toEqual(['a1']);
    } finally {
      Date.now = realNow;
    }
  });

  it('releaseAllForInstance removes only this instance rows', async () => {
    const pool = poolName();
    const a = await ledger('a');
    const b = await ledger('b');
    a.registerPool(pool, { maxCpu: 8 });
    b.registerPool(pool, { maxCpu: 8 });
    await a.reserve(pool, 'a1', 1, 0);
    await b.reserve(pool, 'b1', 1, 0);
    await a.reserve(pool, 'a2', 1, 0);
    await a.releaseAllForInstance();
    expect((await b.list(pool)).map((r) => r.agentId)).toEqual(['b1']);
  });

  it('refuses bad input with clear errors', async () => {
    const a = await ledger('a');
    expect(() => a.registerPool('a..b', {})).toThrow(
      /may not start or end with '\.' or hold '\.\.'/,
    );
    expect(() => a.registerPool('a/b', {})).toThrow(/Invalid pool name/);
    await expect(a.reserve('unregistered', 'x', 1, 0)).rejects.toThrow(/not registered/);
    a.registerPool('r', { maxCpu: 1 });
    await expect(a.reserve('r', 'x', -1, 0)).rejects.toThrow(/`cpus` to be a finite number >= 0/);
    await expect(a.reserve('r', '', 1, 0)).rejects.toThrow(/`agentId`/);
    await expect(NatsPoolLedger.connect({ servers: server.url, instanceId: '' })).rejects.toThrow(
      /`instanceId`/,
    );
    await expect(
      NatsPoolLedger.connect({ servers: server.url, nc, instanceId: 'x' }),
    ).rejects.toThrow(/exactly one of/);
    await expect(
      NatsPoolLedger.connect({ servers: server.url, instanceId: 'x', bucket: 'a.b' }),
    ).rejects.toThrow(/`bucket`/);
    await expect(
      NatsPoolLedger.connect({ servers: server.url, instanceId: 'x', leaseMs: 10 }),
    ).rejects.toThrow(/`leaseMs` to be at least 300/);
  });
});

describe.runIf(ok)('NatsPoolLedger when the server goes away', () => {
  it('answers every call within timeoutMs while the server is stopped, and settles what it could not answer', async () => {
    const server = await startNatsServer();
    const a = await NatsPoolLedger.connect({
      servers: server.url,
      instanceId: 'stall',
      leaseMs: 20_000,
      timeoutMs: 1000,
    });
    try {
      a.registerPool('p', { maxCpu: 8 });
      expect(await a.tryReserve('p', 'kept', 1, 0)).toBe(true);
      // Stopped, not gone: the connection stays open and the writes go out unanswered.
      // (Waited for: a server not stopped yet has been seen granting s1 right after the signal.)
      await stopProcess(server.process.pid!);
      const calls = ['s1', 's2', 's3', 's4'].map(async (agent) => {
        const started = performance.now();
        const error = await a.reserve('p', agent, 1, 0).then(
          () => undefined,
          (e: unknown) => e,
        );
        return { agent, took: performance.now() - started, error };
      });
      const answers = await Promise.all(calls);
      server.process.kill('SIGCONT');
      for (const { agent, took, error } of answers) {
        // Within timeoutMs, plus a little for a timer late on a loaded machine.
        expect(took, agent).toBeLessThan(1000 + 1000);
        const code = (error as { code?: string } | undefined)?.code;
        expect(['ERR_LEDGER_UNAVAILABLE', 'ERR_LEDGER_OUTCOME_UNKNOWN'], agent).toContain(code);
      }
      // Once the server runs again, a reserve whose outcome was unknown leaves no row.
      let rows: string[] = [];
      for (let i = 0; i < 60; i++) {
        rows = (await a.list('p').catch(() => [])).map((r) => r.agentId);
        if (rows.length === 1) break;
        await new Promise((r) => setTimeout(r, 250));
      }
      expect(rows).toEqual(['kept']);
      expect(await a.tryReserve('p', 's1', 1, 0)).toBe(true);
    } finally {
      server.process.kill('SIGCONT');
      await a.close();
      await server.stop();
    }
  });

  it('fails with LedgerUnavailableError while down and works again when it is back', async () => {
    let server = await startNatsServer();
    const { port, storeDir } = server;
    const a = await NatsPoolLedger.connect({
      servers: server.url,
      instanceId: 'a',
      leaseMs: 20_000,
      timeoutMs: 1500,
    });
    try {
      a.registerPool('p', { maxCpu: 2 });
      expect(await a.tryReserve('p', 'x1', 1, 0)).toBe(true);
      await server.stop({ keepStore: true });

      const started = performance.now();
      const error = await a.reserve('p', 'x2', 1, 0).catch((e: unknown) => e);
      // Sent while the client reconnects, the write may still go out when the server is
      // back: its outcome is unknown (then it is settled), or nothing was sent.
      const code = (error as { code?: string }).code;
      expect(['ERR_LEDGER_UNAVAILABLE', 'ERR_LEDGER_OUTCOME_UNKNOWN'], String(error)).toContain(
        code,
      );
      expect((error as Error).message).toMatch(/within 1500 ms/);
      expect(performance.now() - started).toBeLessThan(10_000);
      expect(isLedgerUnavailableError(await a.getUsage('p').catch((e: unknown) => e))).toBe(true);

      server = await startNatsServer({ port, storeDir });
      let usage: unknown;
      for (let i = 0; i < 40 && usage === undefined; i++) {
        usage = await a.getUsage('p').catch(() => undefined);
        if (usage === undefined) await new Promise((r) => setTimeout(r, 250));
      }
      // The row made before the outage survived it, and x2's call, answered as failed,
      // left no row once settled.
      for (let i = 0; i < 60 && JSON.stringify(usage) !== '{"cpus":1,"memBytes":0}'; i++) {
        await new Promise((r) => setTimeout(r, 250));
        usage = await a.getUsage('p').catch(() => usage);
      }
      expect(usage).toEqual({ cpus: 1, memBytes: 0 });
      expect(await a.tryReserve('p', 'x2', 1, 0)).toBe(true);
      expect(await a.tryReserve('p', 'x3', 1, 0)).toBe(false);
    } finally {
      await a.close();
      await server.stop();
    }
  });

  it('connect fails with LedgerUnavailableError when nothing listens', async () => {
    const error = await NatsPoolLedger.connect({
      servers: 'nats://127.0.0.1:1',
      instanceId: 'a',
      timeoutMs: 1000,
    }).catch((e: unknown) => e);
    expect(isLedgerUnavailableError(error), String(error)).toBe(true);
  });
});
