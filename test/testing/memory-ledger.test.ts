import { MemoryPoolLedger, MemoryPoolStore, TestClock } from 'scaler-primitives/testing';
import { describe, expect, it } from 'vitest';
import {
  isLedgerCapMismatchError,
  isLedgerLeaseExpiredError,
  isLedgerUnavailableError,
} from '../../src/errors/ledger.js';
import { isDuplicateReservationError } from '../../src/errors/resources.js';
import type { LeaseEvent } from '../../src/ledger/types.js';

const GiB = 2 ** 30;

function pair(clock = new TestClock('2026-01-05T09:00:00Z'), leaseTtlMs = 30_000) {
  const store = new MemoryPoolStore();
  const a = new MemoryPoolLedger({ instanceId: 'a', store, clock, leaseTtlMs });
  const b = new MemoryPoolLedger({ instanceId: 'b', store, clock, leaseTtlMs });
  for (const l of [a, b]) l.registerPool('host', { maxCpu: 4, maxMemoryBytes: 8 * GiB });
  return { store, clock, a, b };
}

describe('MemoryPoolLedger', () => {
  it('replicas sharing a store share the cap; rows carry the writer and the clock time', async () => {
    const { a, b, store, clock } = pair();
    expect(await a.reserve('host', 'x', 3, GiB)).toEqual({ ok: true });
    expect(await b.reserve('host', 'y', 2, GiB)).toMatchObject({ ok: false, dimension: 'cpu' });
    const [row] = await b.list('host');
    expect(row).toMatchObject({
      instanceId: 'a',
      agentId: 'x',
      cpus: 3,
      memBytes: GiB,
      reservedAt: clock.now(),
      leaseId: a.leaseId,
      bootId: store.bootId,
    });
    // list hands out copies: the store is not changed through them.
    row!.cpus = 0;
    expect(await a.getUsage('host')).toEqual({ cpus: 3, memBytes: GiB });
    expect(store.read('host')?.reservations).toHaveLength(1);
  });

  it('a crashed replica (abandon) keeps its rows until its last renewal is older than leaseTtlMs + leaseMarginMs', async () => {
    const { a, b, clock } = pair();
    await a.reserve('host', 'x', 4, 0);
    await clock.advance(5_000);
    a.abandon(); // last renewal at 09:00:00 (renewals every 10 s)
    expect(a.lease().health).toBe('lost');
    // deadline 09:00:30, margin 3 s: peers take the row after 09:00:33.
    await clock.advance(28_000);
    expect(await b.reapStale('host')).toBe(0);
    expect(b.inspect('host').stale).toEqual([]);
    await clock.advance(1);
    expect(b.inspect('host').stale.map((s) => [s.row.agentId, s.reason])).toEqual([
      ['x', 'lease-expired'],
    ]);
    expect(await b.list('host')).toEqual([]);
    expect(await b.reapStale('host')).toBe(1);
    expect(await b.reserve('host', 'y', 4, 0)).toEqual({ ok: true });
  });

  it('a live replica keeps its lease fresh on the clock, even when idle for hours', async () => {
    const { a, b, clock } = pair();
    await a.reserve('host', 'x', 1, 0);
    await clock.advance(6 * 3600_000);
    expect(await b.reapStale('host')).toBe(0);
    expect((await b.list('host')).map((r) => r.agentId)).toEqual(['x']);
  });

  it('close ends the lease at once; the closed ledger refuses work', async () => {
    const { a, b } = pair();
    await a.reserve('host', 'x', 1, 0);
    await a.close();
    expect(await b.reapStale('host')).toBe(1);
    await expect(a.reserve('host', 'y', 1, 0)).rejects.toThrow(/closed/);
    await a.close();
  });

  it('the periodic reaper runs on the clock', async () => {
    const { a, b, clock, store } = pair();
    await a.reserve('host', 'x', 1, 0);
    a.abandon();
    b.start(10_000);
    await clock.advance(50_000);
    expect(store.read('host')?.reservations).toEqual([]);
    b.stop();
  });

  it('rows of another boot are stale; rows without a lease stay until released by an operator', async () => {
    const { a, store } = pair();
    store.write('host', {
      version: 1,
      cap: { maxCpu: 4, maxMemoryBytes: 8 * GiB },
      reservations: [
        {
          instanceId: 'old',
          pid: 1,
          bootId: 'older-boot',
          agentId: 'o',
          cpus: 1,
          memBytes: 0,
          reservedAt: 0,
        },
        {
          instanceId: 'kici',
          pid: 1,
          bootId: store.bootId,
          agentId: 'k',
          cpus: 1,
          memBytes: 0,
          reservedAt: 0,
        },
      ],
    });
    expect(a.inspect('host').stale.map((s) => [s.row.agentId, s.reason])).toEqual([
      ['o', 'other-boot'],
    ]);
    expect(await a.reapStale('host')).toBe(1);
    expect(await a.release('host', 'k')).toBe(false);
    expect(await a.release('host', 'k', { instanceId: 'kici' })).toBe(true);
  });

  it('refuses duplicates, a different stored cap, and bad input, writing nothing', async () => {
    const { a, store } = pair();
    await a.reserve('host', 'x', 1, 0);
    await expect(a.reserve('host', 'x', 1, 0)).rejects.toSatisfy(isDuplicateReservationError);
    const other = new MemoryPoolLedger({ instanceId: 'c', store });
    other.registerPool('host', { maxCpu: 2 });
    await expect(other.reserve('host', 'y', 1, 0)).rejects.toSatisfy(isLedgerCapMismatchError);
    await expect(a.reserve('nope', 'y', 1, 0)).rejects.toThrow(/not registered/);
    await expect(a.reserve('host', 'y', -1, 0)).rejects.toThrow(/cpus/);
    await expect(a.release('host', 'x', { any: true } as never)).rejects.toThrow(
      /Unknown key "any" in release options/,
    );
    expect(() => a.registerPool('../x', {})).toThrow(/Invalid pool name/);
    expect(() => new MemoryPoolLedger({ instanceId: '' })).toThrow(/instanceId/);
    expect(() => new MemoryPoolLedger({ instanceId: 'a', ttl: 5 } as never)).toThrow(/Unknown/);
    expect(() => new MemoryPoolStore({ boot: 'x' } as never)).toThrow(/Unknown/);
    expect((await a.list('host')).map((r) => r.agentId)).toEqual(['x']);
  });

  it('reports rows it lost (an operator released them) once, on the next reserve', async () => {
    const { a, b } = pair();
    await a.reserve('host', 'x', 1, 0);
    expect(await b.release('host', 'x', { anyInstance: true })).toBe(true);
    const lost = await a.reserve('host', 'y', 1, 0).catch((error: unknown) => error);
    expect(isLedgerLeaseExpiredError(lost)).toBe(true);
    expect((lost as { agentIds: string[] }).agentIds).toEqual(['x']);
    expect(await a.reserve('host', 'y', 1, 0)).toEqual({ ok: true });
  });
});

describe('MemoryPoolLedger lease', () => {
  const T0 = Date.parse('2026-01-05T09:00:00Z');

  function watched(ledger: MemoryPoolLedger, clock: TestClock) {
    const seen: Array<[string, number, string]> = [];
    ledger.onLeaseEvent((e: LeaseEvent) => seen.push([e.type, clock.now() - T0, e.lease.health]));
    return seen;
  }

  it('describes its lease: held, renewed every leaseTtlMs/3 on the clock, memory location', async () => {
    const { a, clock } = pair();
    expect(a.lease()).toEqual({
      health: 'held',
      leaseId: a.leaseId,
      confirmedAt: T0,
      deadline: T0 + 30_000,
      leaseMs: 30_000,
      marginMs: 3_000,
      location: { kind: 'memory' },
    });
    await clock.advance(25_000);
    expect(a.lease()).toMatchObject({ health: 'held', confirmedAt: T0 + 20_000 });
    expect(new MemoryPoolLedger({ instanceId: 'm', leaseTtlMs: 600_000 }).lease().marginMs).toBe(
      60_000,
    );
  });

  it('failRenewals: at risk at 2/3, lost at the deadline, each once; renewed when off again', async () => {
    const { a, clock } = pair();
    const seen = watched(a, clock);
    await clock.advance(10_000); // renewed at 09:00:10
    a.failRenewals(true);
    await clock.advance(29_999);
    expect(seen).toEqual([['lease-at-risk', 30_000, 'at-risk']]);
    expect(a.lease()).toMatchObject({ health: 'at-risk', deadline: T0 + 40_000 });
    await clock.advance(1);
    expect(seen.map((e) => e.slice(0, 2))).toEqual([
      ['lease-at-risk', 30_000],
      ['lease-lost', 40_000],
    ]);
    await clock.advance(60_000); // nothing more while it stays lost
    expect(seen).toHaveLength(2);
    a.failRenewals(false);
    expect(seen[2]).toEqual(['lease-renewed', 100_000, 'held']);
    expect(a.lease()).toMatchObject({ health: 'held', confirmedAt: T0 + 100_000 });
  });

  it('a renewal that comes back before the deadline ends the risk; a throwing listener harms nothing', async () => {
    const { a, clock } = pair();
    a.onLeaseEvent(() => {
      throw new Error('listener bug');
    });
    const seen = watched(a, clock);
    const off = a.onLeaseEvent(() => seen.push(['removed listener called', 0, '']));
    off();
    off();
    a.failRenewals(true);
    await clock.advance(25_000);
    a.failRenewals(false);
    await clock.advance(60_000);
    expect(seen.map((e) => e.slice(0, 2))).toEqual([
      ['lease-at-risk', 20_000],
      ['lease-renewed', 25_000],
    ]);
    expect(() => a.onLeaseEvent('x' as never)).toThrow(TypeError);
    expect(() => a.failRenewals(1 as never)).toThrow(/`on`/);
  });

  it('refuses to write rows under an unconfirmed lease, and writes nothing', async () => {
    const { a, b, clock } = pair();
    a.failRenewals(true);
    await clock.advance(10_000); // exactly a third: still confirmed
    expect(await a.reserve('host', 'x', 1, 0)).toEqual({ ok: true });
    await clock.advance(1);
    const refused = await a.reserve('host', 'y', 1, 0).catch((e: unknown) => e);
    expect(isLedgerUnavailableError(refused)).toBe(true);
    expect(String((refused as Error).message)).toMatch(/nothing was written/);
    await expect(a.adopt('host', [{ agentId: 'z', cpus: 1, memBytes: 0 }])).rejects.toSatisfy(
      isLedgerUnavailableError,
    );
    expect((await b.list('host')).map((r) => r.agentId)).toEqual(['x']);
    // release and list still work
    expect(await a.release('host', 'x')).toBe(true);
    a.failRenewals(false);
    expect(await a.reserve('host', 'y', 1, 0)).toEqual({ ok: true });
  });

  it('peers take the rows of a replica whose renewals fail after its deadline plus the margin', async () => {
    const { a, b, clock } = pair();
    await a.reserve('host', 'x', 4, 0);
    a.failRenewals(true); // last renewal 09:00:00; deadline 09:00:30; peers after 09:00:33
    await clock.advance(33_000);
    expect(await b.reapStale('host')).toBe(0);
    await clock.advance(1);
    expect(await b.reapStale('host')).toBe(1);
    expect(await b.reserve('host', 'y', 4, 0)).toEqual({ ok: true });
    // a is back: its next reserve says its row was lost.
    a.failRenewals(false);
    await expect(a.reserve('host', 'z', 0, 0)).rejects.toSatisfy(isLedgerLeaseExpiredError);
  });

  it('no replica judges others from its own outage: a peer is expired only after lease + margin of its own healthy renewals', async () => {
    const { a, b, clock } = pair();
    await a.reserve('host', 'x', 4, 0);
    // A storage outage for both, longer than the lease.
    a.failRenewals(true);
    b.failRenewals(true);
    await clock.advance(120_000);
    expect(await b.reapStale('host')).toBe(0); // b judges nobody while failing
    b.failRenewals(false); // b is back first; a is still failing
    await clock.advance(33_000);
    expect(await b.reapStale('host')).toBe(0);
    expect(b.inspect('host').stale).toEqual([]);
    a.failRenewals(false); // a is back within b's window: its row stays
    await clock.advance(120_000);
    expect(await b.reapStale('host')).toBe(0);
    expect((await b.list('host')).map((r) => r.agentId)).toEqual(['x']);
  });

  it('a replica started after a crash reaps by lease only once it has renewed for lease + margin itself', async () => {
    const clock = new TestClock('2026-01-05T09:00:00Z');
    const store = new MemoryPoolStore();
    const a = new MemoryPoolLedger({ instanceId: 'a', store, clock });
    a.registerPool('host', { maxCpu: 4 });
    await a.reserve('host', 'x', 4, 0);
    a.abandon();
    await clock.advance(600_000);
    const b = new MemoryPoolLedger({ instanceId: 'b', store, clock });
    b.registerPool('host', { maxCpu: 4 });
    expect(await b.reapStale('host')).toBe(0);
    await clock.advance(33_000);
    expect(await b.reapStale('host')).toBe(0);
    await clock.advance(1);
    expect(await b.reapStale('host')).toBe(1);
  });

  it('a stall longer than half a lease breaks the healthy streak (a late renewal starts a new one)', async () => {
    // A clock whose timers run only when the test says: b's process stalls.
    let now = T0;
    const timers: Array<{ fn: () => void; every?: number; at: number }> = [];
    const handle = { unref: () => handle, ref: () => handle, hasRef: () => false };
    const clock = {
      now: () => now,
      setTimeout: (fn: () => void, ms: number) => {
        timers.push({ fn, at: now + ms });
        return handle;
      },
      clearTimeout: () => {},
      setInterval: (fn: () => void, ms: number) => {
        timers.push({ fn, every: ms, at: now + ms });
        return handle;
      },
      clearInterval: () => {},
    };
    const store = new MemoryPoolStore();
    const a = new MemoryPoolLedger({ instanceId: 'a', store, clock });
    const b = new MemoryPoolLedger({ instanceId: 'b', store, clock });
    for (const l of [a, b]) l.registerPool('host', { maxCpu: 4 });
    await a.reserve('host', 'x', 4, 0);
    a.abandon();
    const seen: string[] = [];
    b.onLeaseEvent((e) => seen.push(e.type));
    now += 100_000; // no timer ran meanwhile: b was stopped
    expect(b.lease().health).toBe('lost');
    // Its first act when it wakes: the renewal timer, 100 s late.
    const renewOfB = timers.filter((t) => t.every !== undefined)[1]!;
    renewOfB.fn();
    expect(b.lease()).toMatchObject({ health: 'held', confirmedAt: now });
    // The late renewal first says what the stall did: the lease had lapsed.
    expect(seen).toEqual(['lease-at-risk', 'lease-lost', 'lease-renewed']);
    // a's lease looks 100 s old, but b has been healthy for 0 ms: nothing expires yet.
    expect(await b.reapStale('host')).toBe(0);
    for (let i = 0; i < 3; i++) {
      now += 10_000;
      renewOfB.fn();
    }
    now += 3_000;
    expect(await b.reapStale('host')).toBe(0);
    now += 1;
    expect(await b.reapStale('host')).toBe(1);
  });

  it('a timer that fires a moment early (by the wall clock) looks again at its instant', () => {
    let now = T0;
    const timeouts: Array<{ fn: () => void; ms: number }> = [];
    const handle = { unref: () => handle, ref: () => handle, hasRef: () => false };
    const clock = {
      now: () => now,
      setTimeout: (fn: () => void, ms: number) => {
        timeouts.push({ fn, ms });
        return handle;
      },
      clearTimeout: () => {},
      setInterval: () => handle,
      clearInterval: () => {},
    };
    const a = new MemoryPoolLedger({ instanceId: 'a', clock });
    const seen: string[] = [];
    a.onLeaseEvent((e) => seen.push(e.type));
    a.failRenewals(true);
    const [atRisk, lost] = timeouts.slice(-2);
    expect([atRisk!.ms, lost!.ms]).toEqual([20_000, 30_000]);
    now = T0 + 19_999; // one ms early
    atRisk!.fn();
    expect(seen).toEqual([]);
    expect(timeouts.at(-1)!.ms).toBe(1);
    now = T0 + 20_000;
    timeouts.at(-1)!.fn();
    expect(seen).toEqual(['lease-at-risk']);
    now = T0 + 29_999;
    lost!.fn();
    expect(seen).toEqual(['lease-at-risk']);
    now = T0 + 30_000;
    timeouts.at(-1)!.fn();
    expect(seen).toEqual(['lease-at-risk', 'lease-lost']);
  });

  it('validates leaseMarginMs', () => {
    expect(() => new MemoryPoolLedger({ instanceId: 'a', leaseMarginMs: -1 })).toThrow(
      /leaseMarginMs/,
    );
    expect(
      () => new MemoryPoolLedger({ instanceId: 'a', leaseTtlMs: 1000, leaseMarginMs: 1000 }),
    ).toThrow(/< `leaseTtlMs`/);
    expect(() => new MemoryPoolLedger({ instanceId: 'a', leaseMarginMs: Number.NaN })).toThrow(
      /leaseMarginMs/,
    );
    expect(new MemoryPoolLedger({ instanceId: 'a', leaseMarginMs: 0 }).lease().marginMs).toBe(0);
  });
});
