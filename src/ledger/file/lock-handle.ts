/**
 * A held pool lock (see `lock.ts` for the protocol): the fenced write through
 * our token directory, the refresh of the lock's mtime while held, release.
 */
import { basename, join } from 'node:path';
import { type ClockTimer, systemClock } from '../../clock.js';
import { LedgerLockCompromisedError } from '../../errors/index.js';
import { hasErrorCode, type LedgerFs, writeAll } from '../fs.js';

/** Options of {@link LockHandle.write}. */
export interface FencedWriteOptions {
  /** fdatasync the temp file before the rename. */
  fsync: boolean;
}

/** A held lock. */
export interface LockHandle {
  /** Our token directory inside the lock directory (gone once the lock is lost). */
  readonly tokenDir: string;
  /** Throw `LedgerLockCompromisedError` unless our token is still inside the lock directory. */
  assertOwned(): Promise<void>;
  /**
   * Replace `file` with `text` atomically, fenced by the lock: temp file in our
   * token directory, optional fdatasync, rename over `file`. Fsync the
   * directory of `file` afterwards to make the rename durable.
   *
   * @throws LedgerLockCompromisedError when the lock was taken over (nothing written).
   */
  write(file: string, text: string, options: FencedWriteOptions): Promise<void>;
  /** Release the lock; never throws. */
  release(): Promise<void>;
}

/** Why a lock of ours could not be removed: the system error of the failed removal. */
export interface StuckLock {
  error: unknown;
}

/** Told when a release could not remove the lock at `lockPath` (see {@link removeLock}). */
export type OnStuck = (
  lockPath: string,
  tokenDir: string,
  id: string | undefined,
  error: unknown,
) => void;

/**
 * Remove our token directory and then the lock directory (identity `lockId`,
 * see {@link directoryId}).
 * `done`: both are gone, or the lock is not ours any more (taken over: the
 * directory there is not ours to remove). Otherwise a removal failed (a
 * read-only filesystem, an I/O error) and the lock is still ours: try again
 * later; the result carries the error.
 */
export function removeLock(
  fs: LedgerFs,
  lockPath: string,
  tokenDir: string,
  lockId: string | undefined,
): 'done' | StuckLock {
  try {
    fs.rmdirSync(tokenDir);
  } catch (error) {
    if (hasErrorCode(error, 'ENOENT') || hasErrorCode(error, 'ENOTDIR')) {
      // Our token is gone: the lock was taken over (the directory there now is
      // not ours to remove), unless it is still our own directory (an earlier
      // try removed the token, then failed on the lock directory).
      if (!sameDirectory(fs, lockPath, lockId)) return 'done';
    } else if (!hasErrorCode(error, 'ENOTEMPTY')) {
      return { error };
    } else {
      try {
        fs.rmSync(tokenDir, { recursive: true, force: true });
      } catch (error) {
        return { error };
      }
    }
  }
  try {
    fs.rmdirSync(lockPath);
  } catch (error) {
    // ENOTEMPTY: a late token arrived; its owner keeps the lock or backs off.
    if (!hasErrorCode(error, 'ENOENT') && !hasErrorCode(error, 'ENOTEMPTY')) return { error };
  }
  return 'done';
}

/**
 * A directory's identity: its inode and birth time (an inode number alone is
 * reused at once for the next directory made); `undefined` where the
 * filesystem keeps no birth time (then a lock directory is never removed by identity).
 */
export function directoryId(stat: { ino: number; birthtimeMs: number }): string | undefined {
  return stat.birthtimeMs > 0 ? `${stat.ino}@${stat.birthtimeMs}` : undefined;
}

function sameDirectory(fs: LedgerFs, path: string, id: string | undefined): boolean {
  if (id === undefined) return false;
  try {
    const stat = fs.lstatSync(path, { throwIfNoEntry: false });
    return stat?.isDirectory() === true && directoryId(stat) === id;
  } catch {
    return false;
  }
}

/**
 * The handle of a lock just taken with our token inside it (`held.id`: the
 * lock directory's identity). `onStuck` is told when release could not remove the
 * lock (see {@link removeLock}).
 */
export function holdLock(
  fs: LedgerFs,
  pool: string,
  lockPath: string,
  held: { token: string; id: string | undefined },
  staleMs: number,
  onStuck: OnStuck = () => {},
): LockHandle {
  const tokenDir = join(lockPath, held.token);
  const lost = (why: string, cause?: unknown) =>
    new LedgerLockCompromisedError(
      pool,
      `Lost the lock ${lockPath} of pool ${JSON.stringify(pool)} (${why}); another process took it over after it looked stale. Nothing was written; retry the operation.`,
      cause === undefined ? undefined : { cause },
    );
  const owned = (): boolean => {
    try {
      return fs.lstatSync(tokenDir).isDirectory();
    } catch {
      return false;
    }
  };
  let refresher: ClockTimer | undefined = systemClock.setInterval(
    () => {
      // Only while our token is inside: never keep someone else's lock fresh.
      if (!owned()) return;
      try {
        const seconds = systemClock.now() / 1000;
        fs.utimesSync(lockPath, seconds, seconds);
      } catch {
        // The next tick tries again; the write path is fenced anyway.
      }
    },
    Math.max(50, Math.floor(staleMs / 4)),
  );
  refresher.unref();
  let released = false;
  const handle: LockHandle = {
    tokenDir,
    async assertOwned() {
      if (released || !owned()) throw lost('our token is gone from the lock directory');
    },
    async write(file, text, options) {
      if (released) throw lost('the lock was released');
      const temp = join(tokenDir, `${basename(file)}.tmp`);
      const { O_WRONLY, O_CREAT, O_EXCL, O_NOFOLLOW } = fs.constants;
      let fd: number;
      try {
        fd = fs.openSync(temp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0o644);
      } catch (error) {
        if (hasErrorCode(error, 'ENOENT') || hasErrorCode(error, 'ENOTDIR')) {
          throw lost('our token directory is gone', error);
        }
        throw error;
      }
      let renamed = false;
      try {
        try {
          writeAll(fs, fd, text);
          if (options.fsync) await datasync(fs, fd);
        } finally {
          fs.closeSync(fd);
        }
        try {
          fs.renameSync(temp, file);
        } catch (error) {
          if (hasErrorCode(error, 'ENOENT')) throw lost('our token directory is gone', error);
          throw error;
        }
        renamed = true;
      } finally {
        if (!renamed) {
          try {
            fs.unlinkSync(temp);
          } catch {
            // Never created, or removed with the moved lock.
          }
        }
      }
    },
    async release() {
      if (released) return;
      released = true;
      systemClock.clearInterval(refresher);
      refresher = undefined;
      const removed = removeLock(fs, lockPath, tokenDir, held.id);
      if (removed !== 'done') onStuck(lockPath, tokenDir, held.id, removed.error);
    },
  };
  return handle;
}

function datasync(fs: LedgerFs, fd: number): Promise<void> {
  return new Promise((resolve, reject) => {
    fs.fdatasync(fd, (error) => (error ? reject(error) : resolve()));
  });
}
