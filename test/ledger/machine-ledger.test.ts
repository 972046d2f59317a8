import * as nodeFs from 'node:fs';
import {
  chmodSync,
  chownSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmdirSync,
  rmSync,
  statSync,
  utimesSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { TestClock } from 'scaler-primitives/testing';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  isLedgerBusyError,
  isLedgerCapMismatchError,
  isLedgerCorruptError,
  isLedgerLockCompromisedError,
  type LedgerBusyError,
} from '../../src/errors/ledger.js';
import { isLedgerDirError } from '../../src/errors/ledger-fs.js';
import { isDuplicateReservationError } from '../../src/errors/resources.js';
import { MachineLedger } from '../../src/ledger/file/machine-ledger.js';
import type { LedgerFs } from '../../src/ledger/fs.js';
import { ledgerFactory } from '../helpers/machine-ledger.js';

let dir: string;
const ledgers = ledgerFactory(() => dir);
const make = ledgers.make;

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'ledger-unit-'));
});

afterEach(async () => {
  await ledgers.closeAll();
  rmSync(dir, { recursive: true, force: true });
});

const file = (pool = 'p') => join(dir, `${pool}.json`);
const read = (pool = 'p') => JSON.parse(readFileSync(file(pool), 'utf8'));

function seedFile(doc: unknown, pool = 'p'): string {
  const text = typeof doc === 'string' ? doc : JSON.stringify(doc, null, 2);
  writeFileSync(file(pool), text);
  return text;
}

const peerRow = (over: Record<string, unknown> = {}) => ({
  instanceId: 'peer',
  pid: 999_999,
  bootId: 'boot-1',
  agentId: 'peer-agent',
  cpus: 1,
  memBytes: 100,
  reservedAt: 1,
  ...over,
});

describe('MachineLedger basics', () => {
  it('grants until the cap, refuses with the reason, and releases idempotently', async () => {
    const ledger = make();
    ledger.registerPool('p', { maxCpu: 2, maxMemoryBytes: 1000 });
    expect(await ledger.reserve('p', 'a1', 1.5, 400)).toEqual({ ok: true });
    expect(await ledger.reserve('p', 'a2', 1, 100)).toEqual({
      ok: false,
      pool: 'p',
      dimension: 'cpu',
      requested: 1,
      used: 1.5,
      max: 2,
      neverFits: false,
    });
    expect(await ledger.tryReserve('p', 'a2', 0.5, 600)).toBe(true);
    expect(await ledger.tryReserve('p', 'a3', 0, 1)).toBe(false);
    expect(await ledger.getUsage('p')).toEqual({ cpus: 2, memBytes: 1000 });
    expect((await ledger.list('p')).map((r) => r.agentId)).toEqual(['a1', 'a2']);
    expect(await ledger.release('p', 'a1')).toBe(true);
    expect(await ledger.release('p', 'a1')).toBe(false);
    expect(await ledger.getUsage('p')).toEqual({ cpus: 0.5, memBytes: 600 });
  });

  it('writes the seed wire format plus pidStartTime and leaseId', async () => {
    const ledger = make({ now: () => 1234 });
    ledger.registerPool('p', { maxCpu: 4 });
    await ledger.reserve('p', 'a1', 1, 2);
    const doc = read();
    expect(doc.version).toBe(1);
    expect(doc.cap).toEqual({ maxCpu: 4 });
    expect(doc.reservations[0]).toMatchObject({
      instanceId: 'me',
      pid: process.pid,
      bootId: 'boot-1',
      agentId: 'a1',
      cpus: 1,
      memBytes: 2,
      reservedAt: 1234,
      leaseId: ledger.leaseId,
    });
    expect(typeof doc.reservations[0].pidStartTime).toBe('number');
  });

  it('refuses a second live reservation for the same agent', async () => {
    const ledger = make();
    ledger.registerPool('p', {});
    await ledger.reserve('p', 'a1', 1, 1);
    await expect(ledger.reserve('p', 'a1', 1, 1)).rejects.toSatisfy(isDuplicateReservationError);
  });

  it.each([
    ['unregistered pool', (l: MachineLedger) => l.reserve('nope', 'a', 1, 1), /not registered/],
    ['negative cpus', (l: MachineLedger) => l.reserve('p', 'a', -1, 1), /`cpus`.*got `-1`/],
    ['NaN memBytes', (l: MachineLedger) => l.reserve('p', 'a', 1, Number.NaN), /`memBytes`/],
    ['empty agent', (l: MachineLedger) => l.reserve('p', '', 1, 1), /`agentId`/],
  ])('throws TypeError for %s', async (_name, call, message) => {
    const ledger = make();
    ledger.registerPool('p', {});
    await expect(call(ledger)).rejects.toThrow(message);
    await expect(call(ledger)).rejects.toBeInstanceOf(TypeError);
  });

  it.each(['../etc/x', 'a/b', '', '.', '..', 'x\0y', 'x'.repeat(129)])(
    'refuses pool name %j everywhere',
    async (pool) => {
      const ledger = make();
      expect(() => ledger.registerPool(pool, {})).toThrow(/Invalid pool name/);
      await expect(ledger.release(pool, 'a')).rejects.toThrow(/Invalid pool name/);
      await expect(ledger.list(pool)).rejects.toThrow(/Invalid pool name/);
    },
  );

  it('rejects a bad instanceId and bad timings with TypeError', () => {
    expect(() => new MachineLedger({ instanceId: '' })).toThrow(/`instanceId`/);
    expect(() => new MachineLedger({ instanceId: 'x', leaseTtlMs: 0 })).toThrow(/`leaseTtlMs`/);
  });
});

describe('refusals and bad state write nothing', () => {
  it('a refused reservation leaves the file byte-for-byte and unreplaced', async () => {
    const ledger = make();
    ledger.registerPool('p', { maxCpu: 1 });
    await ledger.reserve('p', 'a1', 1, 0);
    const before = readFileSync(file());
    const inode = statSync(file()).ino;
    expect((await ledger.reserve('p', 'a2', 0.5, 0)).ok).toBe(false);
    expect(await ledger.release('p', 'not-there')).toBe(false);
    expect(readFileSync(file())).toEqual(before);
    expect(statSync(file()).ino).toBe(inode);
  });

  it('a refused first reservation does not create the file', async () => {
    const ledger = make();
    ledger.registerPool('p', { maxCpu: 1 });
    expect((await ledger.reserve('p', 'a', 2, 0)).ok).toBe(false);
    expect(() => statSync(file())).toThrow();
  });

  it.each([
    ['truncated JSON', '{"version":1,"cap":{},"reserv'],
    ['empty file', ''],
    ['unknown version', '{"version":2,"cap":{},"reservations":[]}'],
    ['wrong schema', '{"version":1,"cap":{},"reservations":[{"agentId":3}]}'],
  ])('%s: LedgerCorruptError naming the file, file untouched', async (_name, text) => {
    seedFile(text);
    const ledger = make();
    ledger.registerPool('p', {});
    const error = await ledger.reserve('p', 'a', 0, 0).catch((e: unknown) => e);
    expect(isLedgerCorruptError(error)).toBe(true);
    expect((error as Error).message).toContain(file());
    await expect(ledger.release('p', 'a')).rejects.toSatisfy(isLedgerCorruptError);
    await expect(ledger.reapStale('p')).rejects.toSatisfy(isLedgerCorruptError);
    expect(readFileSync(file(), 'utf8')).toBe(text);
  });

  it('a stored cap that differs from the registered one: LedgerCapMismatchError, file untouched', async () => {
    const text = seedFile({ version: 1, cap: { maxCpu: 8 }, reservations: [] });
    const ledger = make();
    ledger.registerPool('p', { maxCpu: 4 });
    const error = await ledger.reserve('p', 'a', 1, 0).catch((e: unknown) => e);
    expect(isLedgerCapMismatchError(error)).toBe(true);
    expect((error as Error).message).toMatch(/maxCpu: 8.*maxCpu: 4/);
    expect(readFileSync(file(), 'utf8')).toBe(text);
  });

  it('keeps unknown fields of the document and of rows when it rewrites', async () => {
    seedFile({
      version: 1,
      cap: { maxCpu: 4 },
      writer: 'kici',
      reservations: [peerRow({ labels: ['x'] })],
    });
    const ledger = make();
    ledger.registerPool('p', { maxCpu: 4 });
    await ledger.reserve('p', 'a', 1, 0);
    const doc = read();
    expect(doc.writer).toBe('kici');
    expect(doc.reservations[0]).toEqual(peerRow({ labels: ['x'] }));
  });
});

describe('stale rows', () => {
  it('a row from another boot is reaped', async () => {
    seedFile({ version: 1, cap: {}, reservations: [peerRow({ bootId: 'boot-0' })] });
    const ledger = make();
    ledger.registerPool('p', {});
    expect(await ledger.list('p')).toEqual([]);
    expect(await ledger.reapStale('p')).toBe(1);
    expect(read().reservations).toEqual([]);
  });

  it('same-instance rows: a dead pid is reaped, EPERM-style alive is kept', async () => {
    seedFile({
      version: 1,
      cap: {},
      reservations: [
        peerRow({ instanceId: 'me', pid: 111, agentId: 'dead' }),
        peerRow({ instanceId: 'me', pid: 222, agentId: 'alive' }),
      ],
    });
    const ledger = make({ isProcessAlive: (pid) => pid === 222 });
    ledger.registerPool('p', {});
    expect(await ledger.reapStale('p')).toBe(1);
    expect(read().reservations.map((r: { agentId: string }) => r.agentId)).toEqual(['alive']);
  });

  it('same-instance rows: a reused pid (other start time) is reaped', async () => {
    seedFile({
      version: 1,
      cap: {},
      reservations: [
        peerRow({ instanceId: 'me', pid: 222, pidStartTime: 10, agentId: 'old' }),
        peerRow({ instanceId: 'me', pid: 333, pidStartTime: 20, agentId: 'same' }),
      ],
    });
    const ledger = make({
      isProcessAlive: () => true,
      processStartTime: (pid) => (pid === 222 ? 11 : pid === 333 ? 20 : undefined),
    });
    ledger.registerPool('p', {});
    const snapshot = await ledger.inspect('p');
    expect(snapshot.stale.map((s) => [s.row.agentId, s.reason])).toEqual([['old', 'pid-reused']]);
    expect(snapshot.live.map((r) => r.agentId)).toEqual(['same']);
  });

  it('peer rows: lease fresh kept, lease expired or missing reaped once this instance renewed for a window and the margin, no lease kept (seed rule)', async () => {
    const clock = new TestClock(1_000_000);
    const start = clock.now();
    const fresh = join(dir, 'fresh-lease.lease');
    const old = join(dir, 'old-lease.lease');
    writeFileSync(fresh, '');
    writeFileSync(old, '');
    const touch = (path: string, at: number) => utimesSync(path, at / 1000, at / 1000);
    touch(fresh, start - 1_000);
    touch(old, start - 60_000);
    seedFile({
      version: 1,
      cap: {},
      reservations: [
        peerRow({ agentId: 'fresh', leaseId: 'fresh-lease' }),
        peerRow({ agentId: 'old', leaseId: 'old-lease' }),
        peerRow({ agentId: 'missing', leaseId: 'no-such-lease' }),
        peerRow({ agentId: 'legacy' }),
      ],
    });
    const ledger = make({ clock, leaseTtlMs: 30_000, isProcessAlive: () => false });
    ledger.registerPool('p', {});
    const liveNow = async () => (await ledger.inspect('p')).live.map((r) => r.agentId);
    // No lease of its own yet: it judges no peer expired, whatever the mtimes say.
    expect(await liveNow()).toEqual(['fresh', 'old', 'missing', 'legacy']);
    // Its lease starts now; renewing for less than the window plus the margin
    // (30 s + 3 s) is not enough to judge a peer.
    expect(await ledger.reapStale('p')).toBe(0);
    await clock.advance(30_000);
    touch(fresh, clock.now());
    expect(await liveNow()).toEqual(['fresh', 'old', 'missing', 'legacy']);
    await clock.advance(3_001);
    const snapshot = await ledger.inspect('p');
    expect(snapshot.live.map((r) => r.agentId)).toEqual(['fresh', 'legacy']);
    expect(snapshot.stale.map((s) => [s.row.agentId, s.reason])).toEqual([
      ['old', 'lease-expired'],
      ['missing', 'lease-expired'],
    ]);
    // `fresh` stops renewing: expired past the window plus the margin, not before.
    await clock.advance(29_999);
    expect(await liveNow()).toEqual(['fresh', 'legacy']);
    await clock.advance(2);
    expect(await ledger.reapStale('p')).toBe(3);
    expect(read().reservations.map((r: { agentId: string }) => r.agentId)).toEqual(['legacy']);
  });

  it('stale rows do not count against the cap, and a refusal still writes nothing', async () => {
    const text = seedFile({
      version: 1,
      cap: { maxCpu: 1 },
      reservations: [peerRow({ bootId: 'boot-0', cpus: 1 }), peerRow({ agentId: 'x', cpus: 0.5 })],
    });
    const ledger = make();
    ledger.registerPool('p', { maxCpu: 1 });
    expect(await ledger.reserve('p', 'big', 0.6, 0)).toMatchObject({ ok: false, used: 0.5 });
    expect(readFileSync(file(), 'utf8')).toBe(text);
    expect(await ledger.reserve('p', 'small', 0.5, 0)).toEqual({ ok: true });
    expect(read().reservations.map((r: { agentId: string }) => r.agentId)).toEqual(['x', 'small']);
  });

  it('reapStale also sweeps old temp files of this pool and long-expired lease files', async () => {
    // Temp files are judged on the system clock, lease files on the ledger's.
    const clock = new TestClock(Date.now());
    const touch = (name: string, at: number) => {
      writeFileSync(join(dir, name), '');
      utimesSync(join(dir, name), new Date(at), new Date(at));
    };
    const ledger = make({ clock });
    ledger.registerPool('p', {});
    touch('dead.lease', clock.now() - 20 * 30_000);
    // Its own lease starts: no lease file is removed before it has renewed for ten windows.
    await ledger.reapStale('p');
    expect(nodeFs.existsSync(join(dir, 'dead.lease'))).toBe(true);
    await clock.advance(10 * 30_000 + 1);
    const now = Date.now();
    touch('.p.json.123.abcd.tmp', now - 60_000); // killed writer of p: removed
    touch('.p.json.456.ef01.tmp', now - 100); // may belong to a live writer: kept
    touch('.q.json.123.abcd.tmp', now - 60_000); // another pool's: kept
    touch('recent.lease', clock.now() - 31_000); // expired, but recently: kept
    await ledger.reapStale('p');
    expect(nodeFs.readdirSync(dir).sort()).toEqual(
      [
        '.p.json.456.ef01.tmp',
        '.q.json.123.abcd.tmp',
        `${ledger.leaseId}.lease`,
        'recent.lease',
      ].sort(),
    );
  });

  it('releaseAllForInstance removes only this instance’s rows in every registered pool', async () => {
    seedFile({ version: 1, cap: {}, reservations: [peerRow()] }, 'p');
    const ledger = make();
    ledger.registerPool('p', {});
    ledger.registerPool('q', {});
    await ledger.reserve('p', 'a', 1, 1);
    await ledger.reserve('q', 'b', 1, 1);
    await ledger.releaseAllForInstance();
    expect(read('p').reservations.map((r: { agentId: string }) => r.agentId)).toEqual([
      'peer-agent',
    ]);
    expect(read('q').reservations).toEqual([]);
  });

  it('release with an instance filter only removes that instance’s row', async () => {
    seedFile({ version: 1, cap: {}, reservations: [peerRow()] });
    const ledger = make();
    ledger.registerPool('p', {});
    expect(await ledger.release('p', 'peer-agent', { instanceId: 'other' })).toBe(false);
    expect(await ledger.release('p', 'peer-agent', { instanceId: 'peer' })).toBe(true);
    expect(read().reservations).toEqual([]);
  });
});

describe('group commit', () => {
  it('32 concurrent calls share few writes and each gets its own answer in order', async () => {
    let renames = 0;
    const fs = {
      ...nodeFs,
      renameSync: (a: nodeFs.PathLike, b: nodeFs.PathLike) => {
        renames++;
        nodeFs.renameSync(a, b);
      },
    } as LedgerFs;
    const ledger = make({ fs });
    ledger.registerPool('p', { maxCpu: 10 });
    const results = await Promise.all(
      Array.from({ length: 32 }, (_, i) => ledger.reserve('p', `a${i}`, 0.5, 0)),
    );
    expect(results.map((r) => r.ok)).toEqual(Array.from({ length: 32 }, (_, i) => i < 20));
    expect(renames).toBeLessThanOrEqual(2);
    expect(read().reservations.map((r: { agentId: string }) => r.agentId)).toEqual(
      Array.from({ length: 20 }, (_, i) => `a${i}`),
    );
  });

  it('a failed write fails the whole batch and the file keeps its old content', async () => {
    let fail = false;
    const fs = {
      ...nodeFs,
      renameSync: (a: nodeFs.PathLike, b: nodeFs.PathLike) => {
        if (fail) throw Object.assign(new Error('disk on fire'), { code: 'EIO' });
        nodeFs.renameSync(a, b);
      },
    } as LedgerFs;
    const ledger = make({ fs });
    ledger.registerPool('p', {});
    await ledger.reserve('p', 'first', 1, 1);
    const before = readFileSync(file(), 'utf8');
    fail = true;
    const results = await Promise.allSettled([
      ledger.reserve('p', 'a', 1, 1),
      ledger.reserve('p', 'b', 1, 1),
    ]);
    expect(results.map((r) => r.status)).toEqual(['rejected', 'rejected']);
    expect(readFileSync(file(), 'utf8')).toBe(before);
    expect(nodeFs.readdirSync(dir).filter((f) => f.endsWith('.tmp'))).toEqual([]);
    fail = false;
    expect(await ledger.reserve('p', 'a', 1, 1)).toEqual({ ok: true });
  });
});

describe('lock', () => {
  it('a held, fresh lock ends in LedgerBusyError naming the pool and the lock age', async () => {
    mkdirSync(join(dir, 'p.lock'));
    const ledger = make({ lockTimeoutMs: 300 });
    ledger.registerPool('p', {});
    const error = (await ledger
      .reserve('p', 'a', 1, 1)
      .catch((e: unknown) => e)) as LedgerBusyError;
    expect(isLedgerBusyError(error)).toBe(true);
    expect(error.pool).toBe('p');
    expect(error.lockAgeMs).toBeGreaterThanOrEqual(0);
    expect(error.message).toMatch(/Pool "p" is busy.* s old/);
  });

  it('watches the ledger directory only while it waits on the lock, not after', async () => {
    // The directory's watch wakes this process at every change there (each
    // lock taken and released, each pool file replaced): once the wait ends it
    // must be gone, not left to the next change.
    const open = new Set<nodeFs.FSWatcher>();
    const watched: string[] = [];
    const fs = {
      ...nodeFs,
      watch: (path: string, options: nodeFs.WatchOptions) => {
        const watcher = nodeFs.watch(path, options);
        if (path === dir) {
          watched.push(path);
          open.add(watcher);
          const close = watcher.close.bind(watcher);
          watcher.close = () => {
            open.delete(watcher);
            close();
          };
        }
        return watcher;
      },
    } as unknown as LedgerFs;
    // A held lock with the default mode (the kici orchestrator's): the waiter
    // stands in line and sleeps on the directory's watch.
    const lockDir = join(dir, 'p.lock');
    mkdirSync(lockDir);
    const ledger = make({ fs });
    ledger.registerPool('p', {});
    const reserved = ledger.reserve('p', 'a', 1, 1);
    for (let i = 0; i < 200 && open.size === 0; i++) {
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
    expect(open.size).toBe(1);
    rmdirSync(lockDir);
    expect(await reserved).toEqual({ ok: true });
    expect(open.size).toBe(0);
    // Changes in the directory now reach no watch of this ledger.
    expect(await ledger.release('p', 'a')).toBe(true);
    expect(watched).toHaveLength(1);
  });

  it('tries the lock once more right after it starts watching, so a release just before the watch is not missed', async () => {
    // The kici-style lock is released while the waiter makes its watch (after
    // its failed try): the watch never reports that release. The waiter must
    // take the lock in the same turn of the event loop, not after a timer.
    const lockDir = join(dir, 'p.lock');
    let immediateRan = false;
    let tookLockAfterImmediate: boolean | undefined;
    const fs = {
      ...nodeFs,
      watch: (path: string, options: nodeFs.WatchOptions) => {
        if (path === dir && nodeFs.existsSync(lockDir)) {
          rmdirSync(lockDir);
          setImmediate(() => {
            immediateRan = true;
          });
        }
        return nodeFs.watch(path, options);
      },
      mkdirSync: (path: string, options?: nodeFs.MakeDirectoryOptions | number) => {
        if (path === lockDir && tookLockAfterImmediate === undefined) {
          tookLockAfterImmediate = immediateRan;
        }
        return nodeFs.mkdirSync(path, options);
      },
    } as unknown as LedgerFs;
    mkdirSync(lockDir);
    const ledger = make({ fs });
    ledger.registerPool('p', {});
    expect(await ledger.reserve('p', 'a', 1, 1)).toEqual({ ok: true });
    expect(tookLockAfterImmediate).toBe(false);
  });

  it('waits its turn behind an older waiter with a fresh claim, and ignores a stale claim', async () => {
    const queue = join(dir, '.p.queue');
    // One claim stamped 150 ms ahead stays fresh until then, however late this
    // process's timers run under load (a refresher every 2 ms did not, on a busy machine).
    writeFileSync(queue, `1 ${Date.now() + 150} older.1\n`);
    const ledger = make();
    ledger.registerPool('p', {});
    const started = Date.now();
    expect(await ledger.reserve('p', 'a', 1, 1)).toEqual({ ok: true });
    expect(Date.now() - started).toBeGreaterThanOrEqual(140);
    writeFileSync(queue, `1 ${Date.now() - 1_000} older.1\n`);
    const again = Date.now();
    expect(await ledger.reserve('p', 'b', 1, 1)).toEqual({ ok: true });
    // A stale claim is ignored at once; a claim that was obeyed would hold it until the
    // 15 s lock timeout (the 1 s bound only absorbs a busy machine).
    expect(Date.now() - again).toBeLessThan(1_000);
  });

  it('a lock left by a dead holder is taken over once it is older than the stale window', async () => {
    mkdirSync(join(dir, 'p.lock'));
    const past = new Date(Date.now() - 5_000);
    utimesSync(join(dir, 'p.lock'), past, past);
    const ledger = make({ staleMs: 2_000, lockTimeoutMs: 1_000 });
    ledger.registerPool('p', {});
    expect(await ledger.reserve('p', 'a', 1, 1)).toEqual({ ok: true });
    expect(() => statSync(join(dir, 'p.lock'))).toThrow();
  });

  it('a holder whose lock was taken over does not write (ownership check before rename)', async () => {
    const lockDir = join(dir, 'p.lock');
    const ledger = make({
      hooks: {
        beforeCommit: () => {
          // Another process decides our lock is stale and takes it.
          rmSync(lockDir, { recursive: true });
          mkdirSync(lockDir);
          const later = new Date(Date.now() + 3_000);
          utimesSync(lockDir, later, later);
        },
      },
    });
    ledger.registerPool('p', {});
    const error = await ledger.reserve('p', 'a', 1, 1).catch((e: unknown) => e);
    expect(isLedgerLockCompromisedError(error)).toBe(true);
    expect(() => statSync(file())).toThrow();
    expect(nodeFs.readdirSync(dir).filter((f) => f.endsWith('.tmp'))).toEqual([]);
    // The thief's lock is not ours to remove.
    expect(statSync(lockDir).isDirectory()).toBe(true);
  });
});

describe('directory', () => {
  it('creates the directory with mode 0700', async () => {
    const sub = join(dir, 'nested', 'ledger');
    const ledger = make({ dir: sub });
    expect(await ledger.dir()).toBe(sub);
    expect(statSync(sub).mode & 0o777).toBe(0o700);
  });

  it('accepts explicitDir as an alias of dir', async () => {
    const ledger = new MachineLedger({ instanceId: 'x', explicitDir: dir });
    ledgers.track(ledger);
    expect(await ledger.dir()).toBe(dir);
  });

  it('uses SCALER_PRIMITIVES_LEDGER_DIR when no dir is given', async () => {
    const ledger = new MachineLedger({
      instanceId: 'x',
      env: { SCALER_PRIMITIVES_LEDGER_DIR: dir },
    });
    ledgers.track(ledger);
    expect(await ledger.dir()).toBe(dir);
  });

  it('refuses a world-writable directory', async () => {
    chmodSync(dir, 0o777);
    const ledger = make();
    ledger.registerPool('p', {});
    const error = await ledger.reserve('p', 'a', 1, 1).catch((e: unknown) => e);
    expect(isLedgerDirError(error)).toBe(true);
    expect((error as Error).message).toMatch(/world-writable/);
    expect((error as Error).message).toContain(dir);
  });

  it.runIf(process.getuid?.() === 0)('refuses a directory owned by another user', async () => {
    chownSync(dir, 4321, 4321);
    const ledger = make();
    const error = await ledger.dir().catch((e: unknown) => e);
    expect(isLedgerDirError(error)).toBe(true);
    expect((error as Error).message).toMatch(/owned by uid 4321/);
  });
});
