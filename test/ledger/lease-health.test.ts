/**
 * MachineLedger's own lease on a TestClock: the health timeline and its events
 * (renewals fail through an injected fs), healthySince (an instance never
 * judges peers from its own outage or stall), the margin, the lease confirmed
 * before a write, a removed lease file or directory, and option validation.
 */
import * as nodeFs from 'node:fs';
import { mkdtempSync, readFileSync, rmSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { TestClock } from 'scaler-primitives/testing';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { isInvalidInputError } from '../../src/errors/input.js';
import { isLedgerLeaseExpiredError } from '../../src/errors/ledger.js';
import { isLedgerIoError } from '../../src/errors/ledger-fs.js';
import type { MachineLedger } from '../../src/ledger/file/machine-ledger.js';
import type { LedgerFs } from '../../src/ledger/fs.js';
import type { LeaseEvent } from '../../src/ledger/types.js';
import { ledgerFactory, type MakeLedgerOptions } from '../helpers/machine-ledger.js';
import { MetricsHarness, pointValue } from '../helpers/otel.js';

let dir: string;
const ledgers = ledgerFactory(() => dir);
let clock: TestClock;
let t0: number;
// Renewals (futimes of the lease file) fail while this is set, as on a read-only mount.
let failing: NodeJS.ErrnoException | undefined;
let mono: number;

const erofs = () =>
  Object.assign(new Error('EROFS: read-only file system, futime'), { code: 'EROFS' });

let futimesCalls = 0;
const faultyFs: LedgerFs = {
  ...nodeFs,
  futimesSync: (...args: Parameters<typeof nodeFs.futimesSync>) => {
    futimesCalls++;
    if (failing) throw failing;
    return nodeFs.futimesSync(...args);
  },
};

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'ledger-lease-health-'));
  clock = new TestClock('2026-12-04T10:00:00Z');
  t0 = clock.now();
  failing = undefined;
  mono = 1_000_000;
});

afterEach(async () => {
  await ledgers.closeAll({ ignoreErrors: true });
  rmSync(dir, { recursive: true, force: true });
});

function make(options: MakeLedgerOptions = {}): MachineLedger {
  const ledger = ledgers.make({ clock, leaseTtlMs: 1500, fs: faultyFs, ...options });
  ledger.registerPool('p', { maxCpu: 2 });
  return ledger;
}

function record(ledger: MachineLedger): LeaseEvent[] {
  const events: LeaseEvent[] = [];
  ledger.onLeaseEvent((event) => events.push(event));
  return events;
}

const agents = () =>
  (
    JSON.parse(readFileSync(join(dir, 'p.json'), 'utf8')).reservations as Array<{
      agentId: string;
    }>
  ).map((r) => r.agentId);

// A peer's row under lease `leaseId`, whose lease file (when `mtime` is given) was last renewed then.
function seedPeer(leaseId: string, mtime: number | undefined): void {
  writeFileSync(
    join(dir, 'p.json'),
    JSON.stringify({
      version: 1,
      cap: { maxCpu: 2 },
      reservations: [
        {
          instanceId: 'peer',
          pid: 999_999,
          bootId: 'boot-1',
          agentId: 'peer-row',
          cpus: 2,
          memBytes: 0,
          reservedAt: 1,
          leaseId,
        },
      ],
    }),
  );
  if (mtime !== undefined) {
    writeFileSync(join(dir, `${leaseId}.lease`), '');
    utimesSync(join(dir, `${leaseId}.lease`), mtime / 1000, mtime / 1000);
  }
}

async function rejection(promise: Promise<unknown>): Promise<unknown> {
  return promise.then(
    (value) => {
      throw new Error(`expected a rejection, got ${JSON.stringify(value)}`);
    },
    (error: unknown) => error,
  );
}

describe('the lease timeline', () => {
  it('is none before the first write, then held, with its deadline, margin and file', async () => {
    const ledger = make();
    expect(ledger.lease()).toMatchObject({
      health: 'none',
      confirmedAt: undefined,
      deadline: undefined,
      leaseMs: 1500,
      marginMs: 1000,
      location: { kind: 'file', path: join(dir, `${ledger.leaseId}.lease`) },
    });
    expect(await ledger.reserve('p', 'a', 1, 0)).toEqual({ ok: true });
    expect(ledger.lease()).toEqual({
      health: 'held',
      leaseId: ledger.leaseId,
      confirmedAt: t0,
      deadline: t0 + 1500,
      leaseMs: 1500,
      marginMs: 1000,
      location: { kind: 'file', path: join(dir, `${ledger.leaseId}.lease`) },
    });
    // confirmedAt is the value written as the lease file's mtime.
    expect(Math.abs(statSync(join(dir, `${ledger.leaseId}.lease`)).mtimeMs - t0)).toBeLessThan(1);
    // Renewed every third of the window by its own timer.
    await clock.advance(500);
    expect(ledger.lease()).toMatchObject({ health: 'held', confirmedAt: t0 + 500 });
  });

  it('at-risk at two thirds, lost at the deadline, renewed on the next confirmed renewal; each once, counted', async () => {
    const metrics = new MetricsHarness();
    try {
      const ledger = make({ meterProvider: metrics.provider });
      const events = record(ledger);
      await ledger.reserve('p', 'a', 1, 0);
      failing = erofs();
      // The renewal at +500 fails: still held (nothing due yet).
      await clock.advance(999);
      expect(events).toEqual([]);
      expect(ledger.lease().health).toBe('held');
      // +1000: the renewal then fails too; nothing confirmed for two thirds of the window.
      await clock.advance(1);
      expect(events.map((e) => e.type)).toEqual(['lease-at-risk']);
      expect(events[0]!.lease).toMatchObject({
        health: 'at-risk',
        confirmedAt: t0,
        deadline: t0 + 1500,
      });
      expect((events[0]!.error as { code?: string }).code).toBe('EROFS');
      expect(ledger.lease().health).toBe('at-risk');
      await clock.advance(499);
      expect(events).toHaveLength(1);
      await clock.advance(1);
      expect(events.map((e) => e.type)).toEqual(['lease-at-risk', 'lease-lost']);
      expect(events[1]!.lease.health).toBe('lost');
      // Lost stays lost (no repeated events) while renewals keep failing.
      await clock.advance(3_000);
      expect(events).toHaveLength(2);
      expect(ledger.lease().health).toBe('lost');
      failing = undefined;
      await clock.advance(500);
      expect(events.map((e) => e.type)).toEqual(['lease-at-risk', 'lease-lost', 'lease-renewed']);
      expect(events[2]!.lease).toMatchObject({ health: 'held', confirmedAt: t0 + 5_000 });
      expect(ledger.lease()).toMatchObject({ health: 'held', deadline: t0 + 6_500 });
      const m = await metrics.collect();
      for (const type of ['lease-at-risk', 'lease-lost', 'lease-renewed']) {
        expect(
          pointValue(m, 'scaler.ledger.lease.events', { 'scaler.lease.event': type }),
          type,
        ).toBe(1);
      }
    } finally {
      await metrics.shutdown();
    }
  });

  it('a single failed renewal is no event; one that recovers before the deadline says renewed after at-risk', async () => {
    const ledger = make();
    const events = record(ledger);
    await ledger.reserve('p', 'a', 1, 0);
    failing = erofs();
    await clock.advance(500);
    failing = undefined;
    await clock.advance(500);
    expect(events).toEqual([]);
    failing = erofs();
    await clock.advance(1_000); // +1500, +2000 fail: at-risk at +2000 + 0 (confirmed at +1000)
    expect(events.map((e) => e.type)).toEqual(['lease-at-risk']);
    failing = undefined;
    await clock.advance(500);
    expect(events.map((e) => e.type)).toEqual(['lease-at-risk', 'lease-renewed']);
  });

  it('a stalled process (no timer ran) says at-risk, lost and renewed when it renews again', async () => {
    // A long window on a clock whose timers are the system's: none fires during the test.
    let wall = t0;
    const ledger = make({
      clock: undefined,
      now: () => wall,
      leaseTtlMs: 60_000,
      hooks: { monotonic: () => mono },
    });
    const events = record(ledger);
    await ledger.reserve('p', 'a', 1, 0);
    // Stopped for 70 s: the first call after it renews before acting, and what
    // was due meanwhile is said first, in order.
    wall += 70_000;
    mono += 70_000;
    expect(ledger.lease().health).toBe('lost');
    expect(await ledger.reserve('p', 'b', 1, 0)).toEqual({ ok: true });
    expect(events.map((e) => [e.type, e.lease.health])).toEqual([
      ['lease-at-risk', 'at-risk'],
      ['lease-lost', 'lost'],
      ['lease-renewed', 'held'],
    ]);
    expect(ledger.lease()).toMatchObject({ health: 'held', confirmedAt: wall });
  });

  it('listener errors are caught; off() removes a listener; a non-function is refused', async () => {
    const ledger = make();
    const seen: string[] = [];
    ledger.onLeaseEvent(() => {
      throw new Error('listener bug');
    });
    const off = ledger.onLeaseEvent((e) => seen.push(e.type));
    await ledger.reserve('p', 'a', 1, 0);
    failing = erofs();
    await clock.advance(1_000);
    expect(seen).toEqual(['lease-at-risk']);
    off();
    await clock.advance(500);
    expect(seen).toEqual(['lease-at-risk']);
    expect(() => ledger.onLeaseEvent('nope' as never)).toThrow(
      /Expected `listener` to be a function, got `string`/,
    );
  });

  it('no events after close', async () => {
    const ledger = make();
    const events = record(ledger);
    await ledger.reserve('p', 'a', 1, 0);
    await ledger.close();
    failing = erofs();
    await clock.advance(5_000);
    expect(events).toEqual([]);
  });
});

describe('judging peers only while renewing (healthySince)', () => {
  it('a fresh instance keeps a silent peer row until it has renewed for the window plus the margin', async () => {
    seedPeer('peer-lease', t0 - 60_000);
    const ledger = make();
    expect(await ledger.reapStale('p')).toBe(0);
    await clock.advance(2_500);
    expect((await ledger.inspect('p')).live.map((r) => r.agentId)).toEqual(['peer-row']);
    await clock.advance(1);
    expect((await ledger.inspect('p')).stale.map((s) => s.reason)).toEqual(['lease-expired']);
    expect(await ledger.reserve('p', 'a', 2, 0)).toEqual({ ok: true });
    expect(agents()).toEqual(['a']);
  });

  it('after its own outage, a peer that did not renew meanwhile is kept until this instance renewed for window + margin again', async () => {
    const ledger = make();
    await ledger.reapStale('p');
    await clock.advance(3_000);
    // A peer that renews up to now, then its renewals fail too (the same read-only mount).
    seedPeer('peer-lease', clock.now());
    failing = erofs();
    await clock.advance(3_000);
    // Back: this instance's first renewal is at +6500 (its timer), a new streak.
    failing = undefined;
    await clock.advance(500);
    const back = clock.now();
    expect(ledger.lease()).toMatchObject({ health: 'held', confirmedAt: back });
    // By mtime alone the peer is 3.5 s silent (> 1.5 s + 1 s): it is kept.
    expect(await ledger.reserve('p', 'a', 1, 0)).toMatchObject({ ok: false, used: 2 });
    expect(agents()).toEqual(['peer-row']);
    await clock.advance(2_500);
    expect(await ledger.reserve('p', 'a', 1, 0)).toMatchObject({ ok: false });
    await clock.advance(1);
    expect(await ledger.reserve('p', 'a', 1, 0)).toEqual({ ok: true });
    expect(agents()).toEqual(['a']);
  });

  it('a stall (a gap of more than half the window between renewals) starts a new streak', async () => {
    const ledger = make({ hooks: { monotonic: () => mono } });
    await ledger.reapStale('p');
    await clock.advance(3_000);
    // Silent for longer than window + margin by its mtime: expired, but for the stall.
    seedPeer('peer-lease', clock.now() - 2_600);
    // The process was stopped for 3 s: its monotonic clock jumps, the renewal after it breaks the streak.
    mono += 3_000;
    await clock.advance(500);
    expect((await ledger.inspect('p')).live.map((r) => r.agentId)).toEqual(['peer-row']);
    await clock.advance(2_501);
    expect((await ledger.inspect('p')).stale.map((s) => s.row.agentId)).toEqual(['peer-row']);
  });

  it('a missing lease file is expired at once only for an instance renewing for window + margin', async () => {
    seedPeer('closed-peer', undefined);
    const ledger = make();
    expect(await ledger.reapStale('p')).toBe(0);
    await clock.advance(2_000);
    expect(await ledger.reapStale('p')).toBe(0);
    await clock.advance(501);
    expect(await ledger.reapStale('p')).toBe(1);
  });

  it('the margin is added to the window, and is an option', async () => {
    const ledger = make({ leaseMarginMs: 0 });
    expect(ledger.lease().marginMs).toBe(0);
    await ledger.reapStale('p');
    await clock.advance(1_600);
    // (utimes keeps nanoseconds of a float: stay a millisecond off the boundary.)
    seedPeer('peer-lease', clock.now() - 1_499);
    expect((await ledger.inspect('p')).live).toHaveLength(1);
    await clock.advance(2);
    expect((await ledger.inspect('p')).stale).toHaveLength(1);
  });
});

describe('a write is made only under a confirmed lease', () => {
  it('when the lease cannot be renewed, the call fails with a typed error and writes nothing', async () => {
    const ledger = make();
    await ledger.reserve('p', 'a', 1, 0);
    const before = statSync(join(dir, 'p.json'));
    failing = erofs();
    await clock.advance(501);
    const error = await rejection(ledger.reserve('p', 'b', 1, 0));
    expect(isLedgerIoError(error), String(error)).toBe(true);
    expect(error).toMatchObject({ pool: 'p', errno: 'EROFS', mayHaveWritten: false });
    expect((error as Error).message).toMatch(/\.lease/);
    expect(((error as Error).cause as { code?: string }).code).toBe('EROFS');
    const after = statSync(join(dir, 'p.json'));
    expect([after.ino, after.mtimeMs]).toEqual([before.ino, before.mtimeMs]);
    expect(agents()).toEqual(['a']);
    failing = undefined;
    expect(await ledger.reserve('p', 'b', 1, 0)).toEqual({ ok: true });
    expect(agents()).toEqual(['a', 'b']);
  });

  it('a recent lease is checked with one lstat: a removed lease file is made again before the row is written', async () => {
    const ledger = make();
    await ledger.reserve('p', 'a', 1, 0);
    const lease = join(dir, `${ledger.leaseId}.lease`);
    // The lease is recent and its file is there: no renewal for the next write.
    futimesCalls = 0;
    expect(await ledger.reserve('p', 'b', 1, 0)).toEqual({ ok: true });
    expect(futimesCalls).toBe(0);
    rmSync(lease);
    expect(await ledger.reserve('p', 'c', 0, 0)).toEqual({ ok: true });
    expect(statSync(lease).isFile()).toBe(true);
    expect(futimesCalls).toBe(1);
    expect(agents()).toEqual(['a', 'b', 'c']);
  });

  it('a removed ledger directory is made again (0700), the lease file first, and lost rows are reported once', async () => {
    const ledger = make();
    await ledger.reserve('p', 'a', 1, 0);
    rmSync(dir, { recursive: true });
    const error = await rejection(ledger.reserve('p', 'b', 1, 0));
    // The row of `a` went with the directory: reported as lost, nothing else written.
    expect(isLedgerLeaseExpiredError(error), String(error)).toBe(true);
    expect((error as { agentIds: string[] }).agentIds).toEqual(['a']);
    expect(statSync(dir).mode & 0o777).toBe(0o700);
    expect(statSync(join(dir, `${ledger.leaseId}.lease`)).isFile()).toBe(true);
    expect(await ledger.reserve('p', 'b', 1, 0)).toEqual({ ok: true });
    expect(agents()).toEqual(['b']);
    expect(await ledger.pools()).toEqual(['p']);
    rmSync(dir, { recursive: true });
    expect(await ledger.pools()).toEqual([]);
  });
});

describe('option leaseMarginMs', () => {
  it.each([
    [1500, 1000],
    [30_000, 3000],
    [100_000, 10_000],
    [99_999, 10_000],
  ])('defaults to max(1000, ceil(leaseTtlMs / 10)): %i -> %i', (leaseTtlMs, margin) => {
    expect(make({ leaseTtlMs }).lease().marginMs).toBe(margin);
  });

  it.each([-1, Number.NaN, Number.POSITIVE_INFINITY, '500', null])(
    'refuses %s naming the option and the value',
    (value) => {
      expect(() => make({ leaseMarginMs: value as number })).toThrow(
        new RegExp(
          `Expected \`leaseMarginMs\` to be a finite number >= 0, got \`${String(value)}\``,
        ),
      );
    },
  );

  it('a misspelt key is refused by the strict key check, naming the nearest', () => {
    let error: unknown;
    try {
      make({ leaseMargin: 500 } as never);
    } catch (e) {
      error = e;
    }
    expect(isInvalidInputError(error), String(error)).toBe(true);
    expect((error as Error).message).toMatch(/leaseMarginMs/);
  });
});
