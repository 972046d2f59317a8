/**
 * A held pool lock (see `lock.ts` for the protocol): the fenced write through
 * our token directory, the refresh of the lock's mtime while held, release.
 */
import { basename, join } from 'node:path';
import { type ClockTimer, systemClock } from '../clock.js';
import { LedgerLockCompromisedError } from '../errors.js';
import { hasErrorCode, type LedgerFs, writeAll } from './fs.js';

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

/**
 * The handle of a lock just taken with our `token` inside it.
 */
export function holdLock(
  fs: LedgerFs,
  pool: string,
  lockPath: string,
  token: string,
  staleMs: number,
): LockHandle {
  const tokenDir = join(lockPath, token);
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
      try {
        fs.rmdirSync(tokenDir);
      } catch (error) {
        if (!hasErrorCode(error, 'ENOTEMPTY')) {
          // Gone: the lock was taken over; the directory there is not ours to remove.
          return;
        }
        try {
          fs.rmSync(tokenDir, { recursive: true, force: true });
        } catch {
          return;
        }
      }
      try {
        fs.rmdirSync(lockPath);
      } catch {
        // ENOTEMPTY: a late token arrived; its owner keeps the lock or backs off.
      }
    },
  };
  return handle;
}

function datasync(fs: LedgerFs, fd: number): Promise<void> {
  return new Promise((resolve, reject) => {
    fs.fdatasync(fd, (error) => (error ? reject(error) : resolve()));
  });
}
