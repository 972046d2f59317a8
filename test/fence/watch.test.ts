import { mkdirSync, mkdtempSync, rmSync, symlinkSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type FenceExpiry, leaseEnv, watchLease, watchLeaseFromEnv } from 'scaler-primitives/fence';
import { TestClock } from 'scaler-primitives/testing';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';

// A whole second, so a file's mtime set with utimes reads back exactly.
const T0 = Math.floor(Date.now() / 1000) * 1000;

let dir: string;
let file: string;
let clock: TestClock;
let expiries: FenceExpiry[];
const onExpire = (expiry: FenceExpiry) => {
  expiries.push(expiry);
};

function touch(at: number): void {
  utimesSync(file, at / 1000, at / 1000);
}

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'fence-'));
  file = join(dir, 'lease-a.lease');
  writeFileSync(file, 'lease');
  touch(T0);
  clock = new TestClock(T0);
  expiries = [];
});
afterEach(() => {
  rmSync(dir, { recursive: true, force: true });
});

const lease = () => ({
  location: { kind: 'file' as const, path: file },
  leaseMs: 3000,
  marginMs: 1000,
});

describe('watchLease, file lease', () => {
  it('fires once, stopBeforeMs before mtime + leaseMs', async () => {
    const fence = watchLease({ ...lease(), stopBeforeMs: 500, pollMs: 100, onExpire, clock });
    expect(fence.deadline()).toBe(T0 + 3000);
    expect(fence.firesAt()).toBe(T0 + 2500);
    await clock.advance(2499);
    expect(expiries).toEqual([]);
    expect(fence.fired()).toBe(false);
    await clock.advance(1);
    expect(expiries).toEqual([{ reason: 'deadline', deadline: T0 + 3000, lease: lease() }]);
    expect(fence.fired()).toBe(true);
    await clock.advance(10_000);
    expect(expiries).toHaveLength(1);
  });

  it('defaults: fires a quarter of the lease before the deadline', async () => {
    const fence = watchLease({ ...lease(), onExpire, clock });
    expect(fence.firesAt()).toBe(T0 + 2250);
    await clock.advance(2249);
    expect(expiries).toHaveLength(0);
    await clock.advance(1);
    expect(expiries).toHaveLength(1);
  });

  it('a renewal (a newer mtime) moves the deadline, even one seen only when the timer fires', async () => {
    const fence = watchLease({ ...lease(), stopBeforeMs: 500, pollMs: 750, onExpire, clock });
    await clock.advance(2000);
    touch(T0 + 2000);
    await clock.advance(100); // no poll yet: the timer at 2500 reads the file again
    expect(fence.deadline()).toBe(T0 + 3000);
    await clock.advance(500);
    expect(expiries).toEqual([]);
    expect(fence.deadline()).toBe(T0 + 5000);
    await clock.advance(1899);
    expect(expiries).toEqual([]);
    await clock.advance(1);
    expect(expiries.map((e) => [e.reason, e.deadline])).toEqual([['deadline', T0 + 5000]]);
  });

  it('an mtime already past the deadline fires at once', async () => {
    touch(T0 - 2800);
    watchLease({ ...lease(), stopBeforeMs: 500, onExpire, clock });
    expect(expiries.map((e) => e.reason)).toEqual(['deadline']);
  });

  it('a lease file removed (its ledger closed) fires "gone" within pollMs', async () => {
    const fence = watchLease({ ...lease(), pollMs: 100, onExpire, clock });
    await clock.advance(450);
    rmSync(file);
    await clock.advance(49);
    expect(expiries).toEqual([]);
    await clock.advance(1);
    expect(expiries.map((e) => e.reason)).toEqual(['gone']);
    expect(fence.fired()).toBe(true);
  });

  it('a missing lease file at start fires "gone" on the next turn, after the caller holds the fence', async () => {
    rmSync(file);
    const fence = watchLease({ ...lease(), onExpire, clock });
    expect(expiries).toEqual([]);
    await clock.advance(1);
    expect(expiries.map((e) => e.reason)).toEqual(['gone']);
    expect(fence.deadline()).toBeUndefined();
    // A missing directory (ENOTDIR/ENOENT on the way) is gone too.
    const other = watchLease({
      ...lease(),
      location: { kind: 'file', path: join(file, 'below.lease') },
      onExpire,
      clock,
    });
    await clock.advance(1);
    expect(other.fired()).toBe(true);
  });

  it('a symlink to a fresh file, or a directory, at the lease path is not a lease', async () => {
    const target = join(dir, 'target');
    writeFileSync(target, 'x');
    const link = join(dir, 'link.lease');
    symlinkSync(target, link);
    watchLease({ ...lease(), location: { kind: 'file', path: link }, onExpire, clock });
    const sub = join(dir, 'dir.lease');
    mkdirSync(sub);
    watchLease({ ...lease(), location: { kind: 'file', path: sub }, onExpire, clock });
    await clock.advance(1);
    expect(expiries.map((e) => e.reason)).toEqual(['not-a-file', 'not-a-file']);
  });

  it('a lease file replaced by a symlink while watched fires "not-a-file"', async () => {
    watchLease({ ...lease(), pollMs: 100, onExpire, clock });
    const target = join(dir, 'target');
    writeFileSync(target, 'x');
    rmSync(file);
    symlinkSync(target, file);
    await clock.advance(100);
    expect(expiries.map((e) => e.reason)).toEqual(['not-a-file']);
  });

  it('a lease file that cannot be read at start is an error; a read error later is no renewal', async () => {
    // A symbolic link loop on the way: lstat fails with ELOOP (as it would with
    // EACCES for an agent without search permission).
    const loop = join(dir, 'loop');
    symlinkSync(loop, loop);
    let caught: unknown;
    try {
      watchLease({
        ...lease(),
        location: { kind: 'file', path: join(loop, 'a.lease') },
        onExpire,
        clock,
      });
    } catch (error) {
      caught = error;
    }
    expect((caught as { code?: string }).code).toBe('ERR_LEDGER_UNAVAILABLE');
    expect((caught as Error).message).toMatch(
      /loop\/a\.lease cannot be read by this process \(ELOOP\)/,
    );
    expect(clock.pending()).toHaveLength(0);

    const inner = join(dir, 'inner');
    mkdirSync(inner);
    const innerFile = join(inner, 'a.lease');
    writeFileSync(innerFile, '');
    utimesSync(innerFile, T0 / 1000, T0 / 1000);
    const fence = watchLease({
      ...lease(),
      location: { kind: 'file', path: innerFile },
      pollMs: 100,
      stopBeforeMs: 500,
      onExpire,
      clock,
    });
    await clock.advance(1000);
    rmSync(inner, { recursive: true });
    symlinkSync(inner, inner); // reads now fail with ELOOP: neither gone nor renewed
    await clock.advance(1499);
    expect(expiries).toEqual([]);
    await clock.advance(1);
    expect(expiries.map((e) => [e.reason, e.deadline])).toEqual([['deadline', T0 + 3000]]);
    expect(fence.fired()).toBe(true);
  });

  it('a lease longer than the longest Node timer waits, it does not spin', async () => {
    const days40 = 40 * 24 * 3600 * 1000;
    const fence = watchLease({ ...lease(), leaseMs: days40, pollMs: 3_600_000, onExpire, clock });
    expect(fence.firesAt()).toBe(T0 + days40 * 0.75);
    await clock.advance(10_000);
    expect(expiries).toEqual([]);
    expect(clock.pending().every((timer) => timer.inMs > 1000)).toBe(true);
    fence.close();
  });

  it('close() stops the fence: no call after it', async () => {
    const fence = watchLease({ ...lease(), onExpire, clock });
    await clock.advance(1000);
    fence.close();
    await clock.advance(10_000);
    expect(expiries).toEqual([]);
    expect(clock.pending()).toHaveLength(0);
  });

  it('timers are unref’d: a fence never keeps the agent alive', () => {
    watchLease({ ...lease(), onExpire, clock });
    expect(clock.pending().length).toBeGreaterThan(0);
    expect(clock.pending().every((timer) => !timer.ref)).toBe(true);
  });

  it('watchLeaseFromEnv watches the lease a backend handed over', async () => {
    const fence = watchLeaseFromEnv({
      env: leaseEnv(lease()),
      onExpire,
      clock,
      stopBeforeMs: 1000,
    });
    expect(fence?.firesAt()).toBe(T0 + 2000);
    await clock.advance(2000);
    expect(expiries.map((e) => e.reason)).toEqual(['deadline']);
  });
});

describe('watchLease, NATS lease (a scripted read)', () => {
  const nats = { kind: 'nats' as const, bucket: 'ledger', key: 'lease.a' };
  const L = 3000;

  /** A read whose answer is `answer(now)`, recording when each read was sent. */
  function scripted(answer: (at: number) => number | undefined | Error | 'hang') {
    const sent: number[] = [];
    const read = async () => {
      const at = clock.now() - T0;
      sent.push(at);
      const value = answer(at);
      if (value === 'hang') return new Promise<number | undefined>(() => {});
      if (value instanceof Error) throw value;
      return value;
    };
    return { read, sent };
  }

  it('no renewal: the first revision counts as written a third of the lease before the first read; fires at that deadline', async () => {
    const { read, sent } = scripted(() => 7);
    const fence = watchLease({
      location: nats,
      leaseMs: L,
      marginMs: 500,
      pollMs: 150,
      read,
      onExpire,
      clock,
    });
    await clock.settle(); // the first read answers
    expect(fence.deadline()).toBe(T0 + 2000);
    // Not dated by a renewal yet: no stopBeforeMs (the peers' margin is the stop time).
    expect(fence.firesAt()).toBe(T0 + 2000);
    await clock.advance(1999);
    expect(expiries).toEqual([]);
    await clock.advance(1);
    expect(expiries.map((e) => [e.reason, e.deadline])).toEqual([['deadline', T0 + 2000]]);
    expect(sent.slice(0, 3)).toEqual([0, 150, 300]);
    const reads = sent.length;
    await clock.advance(2000);
    expect(sent.length).toBe(reads); // no reads once fired
  });

  it('a first renewal that comes late (but within 2/3 of the lease) keeps a fresh agent running', async () => {
    const { read } = scripted((at) => (at < 1800 ? 7 : 8));
    const fence = watchLease({
      location: nats,
      leaseMs: L,
      marginMs: 500,
      pollMs: 150,
      read,
      onExpire,
      clock,
    });
    await clock.settle();
    await clock.advance(1800);
    expect(expiries).toEqual([]);
    expect(fence.deadline()).toBe(T0 + 1650 + L);
    expect(fence.firesAt()).toBe(T0 + 1650 + L - 750);
  });

  it('a new revision is dated from the send time of the last read that did not see it', async () => {
    // Revision 8 is written at 1000: the read sent at 900 misses it, the one at 1050 sees it.
    const { read } = scripted((at) => (at < 1000 ? 7 : 8));
    const fence = watchLease({
      location: nats,
      leaseMs: L,
      marginMs: 500,
      pollMs: 150,
      read,
      onExpire,
      clock,
    });
    await clock.settle(); // the first read answers
    await clock.advance(1050);
    expect(fence.deadline()).toBe(T0 + 900 + L);
    await clock.advance(900 + L - 750 - 1050 - 1);
    expect(expiries).toEqual([]);
    await clock.advance(1);
    expect(expiries.map((e) => [e.reason, e.deadline])).toEqual([['deadline', T0 + 3900]]);
  });

  it('a controller renewing every third of its lease keeps the agent running', async () => {
    const { read } = scripted((at) => 1 + Math.floor(at / 1000));
    const fence = watchLease({ location: nats, leaseMs: L, marginMs: 500, read, onExpire, clock });
    await clock.settle(); // the first read answers
    await clock.advance(30_000);
    expect(expiries).toEqual([]);
    expect(fence.deadline()).toBeGreaterThan(clock.now() + 1500);
  });

  it('failed reads are no renewal: the renewal after them is dated from the last successful read', async () => {
    // Reads fail from 500 to 1150; revision 8 is there from 1000 on.
    const { read } = scripted((at) =>
      at >= 500 && at < 1150 ? new Error('timeout') : at < 1000 ? 7 : 8,
    );
    const fence = watchLease({
      location: nats,
      leaseMs: L,
      marginMs: 500,
      pollMs: 150,
      read,
      onExpire,
      clock,
    });
    await clock.settle(); // the first read answers
    await clock.advance(1199);
    expect(fence.deadline()).toBe(T0 + 2000);
    await clock.advance(1); // the read sent at 1200 sees 8; the last good one was sent at 450
    expect(fence.deadline()).toBe(T0 + 450 + L);
  });

  it('a read answering nonsense counts as failed; a revision going back is no renewal', async () => {
    const { read } = scripted((at) =>
      at < 300 ? 7 : at < 600 ? ('8' as never) : at < 900 ? 5 : 6,
    );
    const fence = watchLease({
      location: nats,
      leaseMs: L,
      marginMs: 500,
      pollMs: 150,
      read,
      onExpire,
      clock,
    });
    await clock.settle(); // the first read answers
    await clock.advance(750);
    expect(fence.deadline()).toBe(T0 + 2000); // "8" and 5 renewed nothing
    await clock.advance(150); // 6 after 5 (seen at 750) is a renewal: 750 + L
    expect(fence.deadline()).toBe(T0 + 750 + L);
  });

  it('a key that is gone fires "ended" at once', async () => {
    const { read } = scripted((at) => (at < 400 ? 7 : undefined));
    watchLease({ location: nats, leaseMs: L, marginMs: 500, pollMs: 150, read, onExpire, clock });
    await clock.settle();
    await clock.advance(449);
    expect(expiries).toEqual([]);
    await clock.advance(1);
    expect(expiries.map((e) => e.reason)).toEqual(['ended']);
  });

  it('a read that never answers does not hold the fence back', async () => {
    const { read, sent } = scripted((at) => (at < 200 ? 7 : 'hang'));
    watchLease({ location: nats, leaseMs: L, marginMs: 500, pollMs: 100, read, onExpire, clock });
    await clock.settle();
    await clock.advance(1999);
    expect(expiries).toEqual([]);
    await clock.advance(1);
    expect(expiries.map((e) => e.reason)).toEqual(['deadline']);
    expect(sent).toEqual([0, 100, 200]);
  });

  it('the default clock of a NATS lease is monotonic', async () => {
    const fence = watchLease({
      location: nats,
      leaseMs: 60_000,
      marginMs: 500,
      read: async () => 1,
      onExpire,
    });
    await clock.settle(); // the first read answers
    expect(fence.deadline()).toBeLessThan(
      Date.now() - performance.timeOrigin + 3_600_000 * 24 * 365 * 60,
    );
    expect(
      Math.abs(fence.deadline()! - (performance.timeOrigin + performance.now() + 40_000)),
    ).toBeLessThan(1000);
    fence.close();
  });
});

describe('watchLease refuses bad options, naming the value', () => {
  const base = () => ({ ...lease(), onExpire, clock });
  it.each<[string, Record<string, unknown>, RegExp]>([
    ['an unknown option', { stopBefore: 5 }, /Unknown key "stopBefore".*`stopBeforeMs`/],
    [
      'stopBeforeMs over half the lease',
      { stopBeforeMs: 1501 },
      /`stopBeforeMs` to be a finite number from 0 to leaseMs \/ 2 \(1500\), got `1501`/,
    ],
    ['a negative stopBeforeMs', { stopBeforeMs: -1 }, /stopBeforeMs.*got `-1`/],
    ['pollMs 0', { pollMs: 0 }, /`pollMs` to be > 0, got `0`/],
    [
      'pollMs over a quarter of the lease',
      { pollMs: 751 },
      /pollMs.*leaseMs \/ 4 \(750\), got `751`/,
    ],
    [
      'an infinite lease',
      { leaseMs: Number.POSITIVE_INFINITY },
      /options\.leaseMs.*got `null`|options\.leaseMs/,
    ],
    ['a negative margin', { marginMs: -1 }, /options\.marginMs.*got `-1`/],
    ['read on a file lease', { read: async () => 1 }, /`read` is for a NATS lease/],
    ['onExpire not a function', { onExpire: 'exit' }, /`onExpire` to be a function, got `"exit"`/],
    ['a clock without timers', { clock: { now: () => 0 } }, /clock\.setTimeout/],
    ['a memory lease', { location: { kind: 'memory' } }, /cannot watch it/],
    [
      'a path with NUL',
      { location: { kind: 'file', path: '/a\0b' } },
      /absolute file path, got `"\/a\\u0000b"`/,
    ],
  ])('%s', (_name, patch, message) => {
    expect(() => watchLease({ ...base(), ...patch } as never)).toThrow(message);
    expect(clock.pending()).toHaveLength(0);
  });

  it('options that are not an object', () => {
    expect(() => watchLease(undefined as never)).toThrow(
      /`options` to be an object, got `undefined`/,
    );
  });
});
