import { describe, expect, it } from 'vitest';
import {
  isDuplicateReservationError,
  isLedgerCapMismatchError,
  isLedgerLeaseExpiredError,
} from '../../src/errors.js';
import { MemoryPoolLedger, MemoryPoolStore, TestClock } from '../../src/testing/index.js';

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

  it('a crashed replica (abandon) keeps its rows until its lease is older than leaseTtlMs', async () => {
    const { a, b, clock } = pair();
    await a.reserve('host', 'x', 4, 0);
    a.abandon();
    await clock.advance(29_000);
    expect(await b.reapStale('host')).toBe(0);
    expect(b.inspect('host').stale).toEqual([]);
    await clock.advance(2_000);
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
    await clock.advance(45_000);
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
