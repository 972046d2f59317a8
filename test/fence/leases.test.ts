/**
 * Every lease an agent depends on: `leaseEnv` carries a list, `readLeasesEnv`
 * reads it back strictly, and one fence over several leases fires at the
 * first that lapses (driven by the test clock; file leases are real files).
 */
import { mkdtempSync, rmSync, symlinkSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  type FenceExpiry,
  type FenceLease,
  leaseEnv,
  readLeaseEnv,
  readLeasesEnv,
  watchLeaseFromEnv,
} from 'scaler-primitives/fence';
import { TestClock } from 'scaler-primitives/testing';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { isScalerError } from '../../src/errors/base.js';
import { LEASE_ENV, MAX_LEASES } from '../../src/fence/lease.js';

const fileLease: FenceLease = {
  location: { kind: 'file', path: '/var/lib/ci/ledger/4f0c9e1a.lease' },
  leaseMs: 30_000,
  marginMs: 3_000,
};
const natsLease: FenceLease = {
  location: { kind: 'nats', bucket: 'scaler-pools', key: 'lease.host-a' },
  leaseMs: 6_000,
  marginMs: 1_000,
};
const memoryLease = { location: { kind: 'memory' }, leaseMs: 30_000, marginMs: 3_000 } as const;

const envWith = (value: unknown) => ({ [LEASE_ENV]: JSON.stringify(value) });

describe('leaseEnv with several leases, and readLeasesEnv', () => {
  it('one lease is written as the document every release reads (version 1), byte for byte', () => {
    // What leaseEnv(lease) of the previous release wrote for this lease.
    const previous =
      '{"version":1,"location":{"kind":"file","path":"/var/lib/ci/ledger/4f0c9e1a.lease"},"leaseMs":30000,"marginMs":3000}';
    expect(leaseEnv(fileLease)).toEqual({ SCALER_LEASE: previous });
    expect(leaseEnv([fileLease])).toEqual({ SCALER_LEASE: previous });
    // A memory lease beside it is left out: still one lease, still version 1.
    expect(leaseEnv([memoryLease, fileLease])).toEqual({ SCALER_LEASE: previous });
    expect(readLeasesEnv({ SCALER_LEASE: previous })).toEqual([fileLease]);
    expect(readLeaseEnv({ SCALER_LEASE: previous })).toEqual(fileLease);
  });

  it('round-trips several leases in order through one variable (version 2)', () => {
    const env = leaseEnv([natsLease, fileLease]);
    expect(Object.keys(env)).toEqual(['SCALER_LEASE']);
    expect(JSON.parse(env.SCALER_LEASE!)).toEqual({
      version: 2,
      leases: [natsLease, fileLease],
    });
    expect(readLeasesEnv(env)).toEqual([natsLease, fileLease]);
    // The reader of 0.1 accepts only `version`, `location`, `leaseMs` and
    // `marginMs` and refuses any other key (checked by hand against its code:
    // `Unknown key "leases"`), so an agent of 0.1 refuses a list at start
    // rather than fencing one of its leases.
    expect(Object.keys(JSON.parse(env.SCALER_LEASE!))).toEqual(['version', 'leases']);
    // The same lease twice is handed over once.
    expect(readLeasesEnv(leaseEnv([fileLease, natsLease, fileLease]))).toEqual([
      fileLease,
      natsLease,
    ]);
  });

  it('hands over nothing for no lease, an empty list or memory leases only', () => {
    expect(leaseEnv(undefined)).toEqual({});
    expect(leaseEnv([])).toEqual({});
    expect(leaseEnv([memoryLease, memoryLease])).toEqual({});
    expect(readLeasesEnv({})).toEqual([]);
  });

  it('readLeaseEnv (deprecated) never picks one of several leases silently', () => {
    let caught: unknown;
    try {
      readLeaseEnv(leaseEnv([natsLease, fileLease]));
    } catch (error) {
      caught = error;
    }
    expect(isScalerError(caught)).toBe(true);
    expect((caught as Error).message).toMatch(/carries 2 leases.*readLeasesEnv/);
  });

  it('leaseEnv refuses a bad lease in a list, naming its place and value', () => {
    expect(() => leaseEnv([fileLease, { ...natsLease, leaseMs: -5 }])).toThrow(
      /`leases\[1\]\.leaseMs` to be a finite number > 0, got `-5`/,
    );
    expect(() => leaseEnv([fileLease, 'x' as never])).toThrow(
      /`leases\[1\]` to be an object, got `"x"`/,
    );
    expect(() =>
      leaseEnv([{ ...fileLease, location: { kind: 'file', path: 'rel.lease' } }]),
    ).toThrow(/`leases\[0\]\.location\.path` to be an absolute file path, got `"rel.lease"`/);
    const many = Array.from({ length: MAX_LEASES + 1 }, (_, i) => ({
      ...fileLease,
      location: { kind: 'file' as const, path: `/l/${i}.lease` },
    }));
    expect(() => leaseEnv(many)).toThrow(/at most 16 leases, got 17/);
  });

  const good = { version: 2, leases: [fileLease, natsLease] };
  it.each<[string, Record<string, string>, RegExp]>([
    [
      'a list that is not a list',
      envWith({ version: 2, leases: {} }),
      /list of 1 to 16.*got `\{\}`/,
    ],
    ['an empty list', envWith({ version: 2, leases: [] }), /list of 1 to 16 leases, got `\[\]`/],
    [
      'too long a list',
      envWith({ version: 2, leases: Array.from({ length: 17 }, () => fileLease) }),
      /list of 1 to 16 leases/,
    ],
    ['no list', envWith({ version: 2 }), /list of 1 to 16 leases, got `undefined`/],
    [
      'a list item that is not an object',
      envWith({ version: 2, leases: [fileLease, 7] }),
      /`SCALER_LEASE\.leases\[1\]` to be an object, got `7`/,
    ],
    [
      'a bad value in an item',
      envWith({ version: 2, leases: [fileLease, { ...natsLease, marginMs: '1s' }] }),
      /`SCALER_LEASE\.leases\[1\]\.marginMs` to be a finite number >= 0, got `"1s"`/,
    ],
    [
      'an unknown key in an item',
      envWith({ version: 2, leases: [{ ...fileLease, ttl: 1 }] }),
      /Unknown key "ttl"/,
    ],
    [
      'an unknown key in the document',
      envWith({ ...good, lease: fileLease }),
      /Unknown key "lease".*`leases`/,
    ],
    [
      'a single-lease key in a list document',
      envWith({ ...good, leaseMs: 1 }),
      /Unknown key "leaseMs"/,
    ],
    [
      'a memory lease in the list',
      envWith({ version: 2, leases: [fileLease, memoryLease] }),
      /memory.*cannot watch it/,
    ],
    [
      'a bad bucket in an item',
      envWith({
        version: 2,
        leases: [{ ...natsLease, location: { kind: 'nats', bucket: 'a b', key: 'k' } }],
      }),
      /leases\[0\]\.location\.bucket` to be a NATS KV bucket name.*got `"a b"`/,
    ],
    ['a later version', envWith({ ...good, version: 3 }), /`version` 1 .*or 2 .*got `3`/],
  ])('readLeasesEnv refuses %s, naming the value', (_name, env, message) => {
    let caught: unknown;
    try {
      readLeasesEnv(env);
    } catch (error) {
      caught = error;
    }
    expect(isScalerError(caught)).toBe(true);
    expect((caught as Error).message).toMatch(/^Invalid SCALER_LEASE: /);
    expect((caught as Error).message).toMatch(message);
    // The agent's entry point refuses it the same way: it never runs unfenced.
    expect(() => watchLeaseFromEnv({ env })).toThrow(message);
  });
});

// A whole second, so a file's mtime set with utimes reads back exactly.
const T0 = Math.floor(Date.now() / 1000) * 1000;

describe('watchLeaseFromEnv over several leases (test clock)', () => {
  let dir: string;
  let clock: TestClock;
  let expiries: FenceExpiry[];
  const onExpire = (expiry: FenceExpiry) => {
    expiries.push(expiry);
  };
  const fileAt = (name: string): FenceLease => ({
    location: { kind: 'file', path: join(dir, name) },
    leaseMs: 3000,
    marginMs: 500,
  });
  const touch = (lease: FenceLease, at: number) => {
    if (lease.location.kind !== 'file') throw new Error('not a file lease');
    utimesSync(lease.location.path, at / 1000, at / 1000);
  };
  const nats: FenceLease = {
    location: { kind: 'nats', bucket: 'scaler-pools', key: 'lease.host-a' },
    leaseMs: 3000,
    marginMs: 500,
  };
  /** A heartbeat key whose revision the test bumps (a renewal) or not. */
  function heartbeat() {
    let revision = 1;
    let reads = 0;
    return {
      read: async () => {
        reads++;
        return revision;
      },
      renew: () => {
        revision++;
      },
      reads: () => reads,
    };
  }

  let a: FenceLease;
  let b: FenceLease;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'fence-leases-'));
    clock = new TestClock(T0);
    expiries = [];
    a = fileAt('a.lease');
    b = fileAt('b.lease');
    for (const lease of [a, b]) {
      if (lease.location.kind === 'file') writeFileSync(lease.location.path, '');
      touch(lease, T0);
    }
  });
  afterEach(() => {
    rmSync(dir, { recursive: true, force: true });
  });

  /** Renew `leases` every `every` ms (their mtime = now) for `forMs`. */
  async function renewing(leases: FenceLease[], forMs: number, nats?: { renew(): void }) {
    for (let t = 0; t < forMs; t += 500) {
      await clock.advance(500);
      for (const lease of leases) touch(lease, clock.now());
      nats?.renew();
    }
  }

  it('the first lease that lapses fires, once, and the others stop being watched', async () => {
    const fence = watchLeaseFromEnv({
      env: leaseEnv([a, b]),
      onExpire,
      clock,
      pollMs: 100,
      stopBeforeMs: 500,
    })!;
    expect(fence.deadline()).toBe(T0 + 3000);
    await renewing([a, b], 2000);
    expect(expiries).toEqual([]);
    // b stops being renewed; a goes on.
    const bLast = clock.now();
    for (let t = 0; t < 4000; t += 500) {
      await clock.advance(500);
      touch(a, clock.now());
    }
    expect(expiries).toEqual([{ reason: 'deadline', deadline: bLast + 3000, lease: b }]);
    expect(fence.fired()).toBe(true);
    // Nothing more is watched: no timer left, and no second call however long.
    expect(clock.pending()).toHaveLength(0);
    await clock.advance(60_000);
    expect(expiries).toHaveLength(1);
  });

  it('a NATS lease beside a file lease: the NATS lease lapsing alone stops the agent', async () => {
    const key = heartbeat();
    const fence = watchLeaseFromEnv({
      env: leaseEnv([a, nats]),
      read: key.read,
      onExpire,
      clock,
      pollMs: 100,
      stopBeforeMs: 500,
    })!;
    await renewing([a], 3000, key);
    expect(expiries).toEqual([]);
    const reads = key.reads();
    expect(reads).toBeGreaterThan(20);
    // The key is no longer renewed; the file lease is.
    for (let t = 0; t < 4000 && expiries.length === 0; t += 100) {
      await clock.advance(100);
      touch(a, clock.now());
    }
    expect(expiries.map((e) => [e.reason, e.lease])).toEqual([['deadline', nats]]);
    expect(fence.fired()).toBe(true);
    await clock.advance(10_000);
    expect(clock.pending()).toHaveLength(0);
    const after = key.reads();
    await clock.advance(10_000);
    expect(key.reads()).toBe(after); // the key is not read any more
  });

  it('the file lease lapsing alone stops it too, while the NATS key is renewed', async () => {
    const key = heartbeat();
    watchLeaseFromEnv({
      env: leaseEnv([a, nats]),
      read: key.read,
      onExpire,
      clock,
      pollMs: 100,
      stopBeforeMs: 500,
    });
    await renewing([a], 2000, key);
    const aLast = clock.now();
    for (let t = 0; t < 4000 && expiries.length === 0; t += 100) {
      await clock.advance(100);
      if (t % 500 === 0) key.renew();
    }
    expect(expiries.map((e) => [e.reason, e.lease, e.deadline])).toEqual([
      ['deadline', a, aLast + 3000],
    ]);
    // It fired stopBeforeMs before the file lease's deadline.
    expect(clock.now()).toBe(aLast + 2500);
  });

  it('a file lease removed (its ledger closed) stops the agent at once, whatever the others say', async () => {
    watchLeaseFromEnv({ env: leaseEnv([a, b]), onExpire, clock, pollMs: 100 });
    await clock.advance(300);
    if (b.location.kind === 'file') rmSync(b.location.path);
    await clock.advance(100);
    expect(expiries.map((e) => [e.reason, e.lease])).toEqual([['gone', b]]);
  });

  it('deadline() and firesAt() are those of the lease that lapses first', async () => {
    touch(b, T0 - 1000);
    const fence = watchLeaseFromEnv({
      env: leaseEnv([a, b]),
      onExpire,
      clock,
      stopBeforeMs: 500,
    })!;
    expect(fence.deadline()).toBe(T0 + 2000);
    expect(fence.firesAt()).toBe(T0 + 1500);
  });

  it('close() stops every lease: no call after it, no timer left', async () => {
    const key = heartbeat();
    const fence = watchLeaseFromEnv({
      env: leaseEnv([a, b, nats]),
      read: key.read,
      onExpire,
      clock,
    })!;
    await clock.advance(1000);
    fence.close();
    await clock.advance(60_000);
    expect(expiries).toEqual([]);
    expect(fence.fired()).toBe(false);
    expect(clock.pending()).toHaveLength(0);
  });

  it('an onExpire that throws still stops the agent (the fence calls the hard stop)', async () => {
    // The hard stop is checked with real processes (hard-stop.test.ts); here only
    // that the thrown error does not escape into the timer that fired.
    const seen: FenceExpiry[] = [];
    watchLeaseFromEnv({
      env: leaseEnv([a, b]),
      onExpire: (expiry) => {
        seen.push(expiry);
        return Promise.reject(new Error('cleanup failed')).catch(() => {});
      },
      clock,
    });
    await clock.advance(3000);
    expect(seen).toHaveLength(1);
  });

  it('a lease that cannot be read at start is an error, and the fences already started are closed', () => {
    const loop = join(dir, 'loop');
    symlinkSync(loop, loop);
    const bad: FenceLease = { ...a, location: { kind: 'file', path: join(loop, 'x.lease') } };
    expect(() =>
      watchLeaseFromEnv({ env: leaseEnv([a, nats, bad]), read: async () => 1, clock }),
    ).toThrow(/cannot be read by this process \(ELOOP\)/);
    expect(clock.pending()).toHaveLength(0);
  });

  it('refuses a NATS lease without a reader, and one reader for two NATS leases', () => {
    const other: FenceLease = {
      ...nats,
      location: { kind: 'nats', bucket: 'gpu-pools', key: 'lease.host-a' },
    };
    expect(() => watchLeaseFromEnv({ env: leaseEnv([a, nats]), clock })).toThrow(
      /carries a NATS lease \(scaler-pools\/lease\.host-a\): fence it with `watchLeasesFromEnv` of `scaler-primitives\/fence\/nats`/,
    );
    expect(() =>
      watchLeaseFromEnv({ env: leaseEnv([nats, other]), read: async () => 1, clock }),
    ).toThrow(/carries 2 NATS leases .*`read` reads one key/);
    expect(() => watchLeaseFromEnv({ env: leaseEnv([a, b]), read: async () => 1, clock })).toThrow(
      /`read` is for a NATS lease/,
    );
    expect(() =>
      watchLeaseFromEnv({ env: leaseEnv([a]), onExpire: 'stop' as never, clock }),
    ).toThrow(/`onExpire` to be a function, got `"stop"`/);
    expect(clock.pending()).toHaveLength(0);
  });
});
