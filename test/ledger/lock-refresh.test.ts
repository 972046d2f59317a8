/**
 * The pool lock protocol (src/ledger/file/lock.ts, takeover.ts): token directory,
 * refresh, fenced write, takeover, and what a lock entry we did not make does.
 */
import * as nodeFs from 'node:fs';
import {
  existsSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  utimesSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { isLedgerLockCompromisedError } from '../../src/errors/ledger.js';
import { isLedgerDirError } from '../../src/errors/ledger-fs.js';
import { heldByCombiningHolder, PoolLocker } from '../../src/ledger/file/lock.js';

const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});
function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'sp-lock-'));
  dirs.push(dir);
  return dir;
}
const timing = { staleMs: 400, timeoutMs: 2_000 };
const age = (path: string, ms: number) => {
  const past = new Date(Date.now() - ms);
  utimesSync(path, past, past);
};

describe('PoolLocker', () => {
  it('holds <pool>.lock (0700) with one token directory in it, refreshes it, and removes both on release', async () => {
    const dir = tempDir();
    const lockPath = join(dir, 'p.lock');
    const handle = await new PoolLocker(nodeFs).acquire('p', lockPath, timing);
    expect(lstatSync(lockPath).mode & 0o777).toBe(0o700);
    expect(readdirSync(lockPath)).toHaveLength(1);
    age(lockPath, 300);
    const aged = lstatSync(lockPath).mtimeMs;
    // Refreshed every staleMs / 4 = 100 ms.
    await new Promise((resolve) => setTimeout(resolve, 400));
    expect(lstatSync(lockPath).mtimeMs).toBeGreaterThan(aged + 200);
    await expect(handle.assertOwned()).resolves.toBeUndefined();
    await handle.write(join(dir, 'p.json'), 'hello', { fsync: true });
    expect(readFileSync(join(dir, 'p.json'), 'utf8')).toBe('hello');
    await handle.release();
    expect(existsSync(lockPath)).toBe(false);
    await handle.release();
  });

  it('a holder that serves the combining directory marks its lock with the sticky bit', async () => {
    const dir = tempDir();
    const lockPath = join(dir, 'p.lock');
    const locker = new PoolLocker(nodeFs);
    const plain = await locker.acquire('p', lockPath, timing);
    expect(lstatSync(lockPath).mode & 0o7777).toBe(0o700);
    expect(heldByCombiningHolder(nodeFs, lockPath, timing.staleMs)).toBe(false);
    await plain.release();
    const combining = await locker.acquire('p', lockPath, { ...timing, combining: true });
    expect(lstatSync(lockPath).mode & 0o7777).toBe(0o1700);
    expect(heldByCombiningHolder(nodeFs, lockPath, timing.staleMs)).toBe(true);
    await combining.release();
    expect(heldByCombiningHolder(nodeFs, lockPath, timing.staleMs)).toBe(false);
    locker.close();
  });

  it('a holder whose lock directory was moved away by a taker writes nothing (fenced rename)', async () => {
    const dir = tempDir();
    const lockPath = join(dir, 'p.lock');
    writeFileSync(join(dir, 'p.json'), 'old');
    const handle = await new PoolLocker(nodeFs).acquire('p', lockPath, timing);
    // A taker moves it away and a new holder makes a fresh lock directory.
    renameSync(lockPath, join(dir, '.p.lock.stale.x'));
    mkdirSync(lockPath, 0o700);
    const error = await handle.write(join(dir, 'p.json'), 'new', { fsync: false }).catch((e) => e);
    expect(isLedgerLockCompromisedError(error)).toBe(true);
    await expect(handle.assertOwned()).rejects.toSatisfy(isLedgerLockCompromisedError);
    expect(readFileSync(join(dir, 'p.json'), 'utf8')).toBe('old');
    // Release leaves the new holder's lock directory alone.
    await handle.release();
    expect(existsSync(lockPath)).toBe(true);
  });

  it('a fresh lock without a token (a kici holder) is waited for; a stale one is taken over and removed', async () => {
    const dir = tempDir();
    const lockPath = join(dir, 'p.lock');
    mkdirSync(lockPath);
    const locker = new PoolLocker(nodeFs);
    await expect(
      locker.acquire('p', lockPath, { staleMs: 5_000, timeoutMs: 150 }),
    ).rejects.toMatchObject({ code: 'ERR_LEDGER_BUSY' });
    writeFileSync(join(lockPath, 'leftover'), 'x');
    age(lockPath, 10_000);
    const handle = await locker.acquire('p', lockPath, { staleMs: 5_000, timeoutMs: 1_000 });
    expect(readdirSync(lockPath)).toHaveLength(1);
    expect(readdirSync(dir).filter((name) => name.includes('stale'))).toEqual([]);
    await handle.release();
  });

  it('a token placed late into a lock someone else holds backs off', async () => {
    const dir = tempDir();
    const lockPath = join(dir, 'p.lock');
    const locker = new PoolLocker(nodeFs);
    const claim = (
      locker as unknown as { claimToken(l: string, t: string): string | undefined | false }
    ).claimToken.bind(locker);
    // Ours, with another token already inside.
    mkdirSync(lockPath, 0o700);
    mkdirSync(join(lockPath, 'other'), 0o700);
    expect(claim(lockPath, 'late')).toBe(false);
    expect(readdirSync(lockPath)).toEqual(['other']);
    rmSync(lockPath, { recursive: true });
    // A kici lock (mkdir with the default mode: group/other bits set) with no token.
    mkdirSync(lockPath, 0o755);
    expect(claim(lockPath, 'late')).toBe(false);
    expect(readdirSync(lockPath)).toEqual([]);
    rmSync(lockPath, { recursive: true });
    // The lock vanished between our mkdir and our token.
    expect(claim(lockPath, 'late')).toBe(false);
    // Ours and empty: the token is alone.
    mkdirSync(lockPath, 0o700);
    expect(claim(lockPath, 'mine')).not.toBe(false);
  });

  it('a lock entry that is not a directory is refused with LedgerDirError, never removed or followed', async () => {
    const dir = tempDir();
    const lockPath = join(dir, 'p.lock');
    const target = join(dir, 'target');
    mkdirSync(target);
    nodeFs.symlinkSync(target, lockPath);
    age(target, 60_000);
    const error = await new PoolLocker(nodeFs).acquire('p', lockPath, timing).catch((e) => e);
    expect(isLedgerDirError(error)).toBe(true);
    expect(String(error.message)).toContain(lockPath);
    expect(lstatSync(lockPath).isSymbolicLink()).toBe(true);
    expect(existsSync(target)).toBe(true);
  });
});

describe('the wait-queue file', () => {
  it('is never written or read through a symlink', async () => {
    const dir = tempDir();
    const lockPath = join(dir, 'p.lock');
    const victim = join(dir, 'victim');
    writeFileSync(victim, 'precious');
    nodeFs.symlinkSync(victim, join(dir, '.p.queue'));
    const locker = new PoolLocker(nodeFs);
    const holder = await locker.acquire('p', lockPath, timing);
    // A waiter that fails its attempts would claim the head of the queue.
    const waiting = locker
      .acquire('p', lockPath, { staleMs: 5_000, timeoutMs: 300 })
      .catch((e) => e);
    await new Promise((resolve) => setTimeout(resolve, 100));
    await holder.release();
    const second = await waiting;
    if (!(second instanceof Error)) await second.release();
    expect(readFileSync(victim, 'utf8')).toBe('precious');
  });

  it('a FIFO or a directory there neither hangs nor breaks the lock', async () => {
    const dir = tempDir();
    const lockPath = join(dir, 'p.lock');
    nodeFs.mkdirSync(join(dir, '.p.queue'));
    const locker = new PoolLocker(nodeFs);
    const holder = await locker.acquire('p', lockPath, timing);
    const waiting = locker.acquire('p', lockPath, { staleMs: 5_000, timeoutMs: 1_000 });
    await new Promise((resolve) => setTimeout(resolve, 50));
    await holder.release();
    await (await waiting).release();
    rmSync(join(dir, '.p.queue'), { recursive: true });
    const { execFileSync } = await import('node:child_process');
    execFileSync('mkfifo', [join(dir, '.p.queue')]);
    const again = await locker.acquire('p', lockPath, timing);
    const behind = locker.acquire('p', lockPath, { staleMs: 5_000, timeoutMs: 1_000 });
    await new Promise((resolve) => setTimeout(resolve, 50));
    await again.release();
    await (await behind).release();
    expect(lstatSync(join(dir, '.p.queue')).isFIFO()).toBe(true);
  });
});
