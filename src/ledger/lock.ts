/**
 * The pool lock: the directory `<dir>/<pool>.lock`, taken with proper-lockfile
 * (`lockfilePath`, `realpath: false`) so the kici orchestrator's `mkdir` lock and
 * ours exclude each other.
 *
 * proper-lockfile refreshes the directory's mtime while we hold it, and a
 * process that finds the mtime older than the stale window may take the lock
 * over. Two things keep a holder that lost the lock from writing:
 * - our `onCompromised` only marks the handle (it never throws from a timer);
 * - {@link LockHandle.assertOwned}, called right before the rename, compares the
 *   directory's mtime with the last one proper-lockfile set for us.
 */
import lockfile from 'proper-lockfile';
import { LedgerBusyError, LedgerLockCompromisedError } from '../errors.js';
import { hasErrorCode, type LedgerFs } from './fs.js';

/** Timing of the lock. */
export interface LockTiming {
  /** A lock whose mtime is older than this is taken over (proper-lockfile's `stale`, >= 2000). */
  staleMs: number;
  /** Give up with `LedgerBusyError` after trying this long. */
  timeoutMs: number;
}

/** A held lock. */
export interface LockHandle {
  /** Throw `LedgerLockCompromisedError` unless we still own the lock. */
  assertOwned(): Promise<void>;
  /** Release the lock; never throws. */
  release(): Promise<void>;
}

interface MtimeRecord {
  mtimeMs: number | undefined;
}

/**
 * Takes pool locks for one ledger. Wraps the fs handed to proper-lockfile so it
 * knows the mtime proper-lockfile last set on each lock directory.
 */
export class PoolLocker {
  private readonly records = new Map<string, MtimeRecord>();
  // Lock directories we no longer own: releasing must not remove the new owner's.
  private readonly lost = new Set<string>();
  private readonly lockFs: LedgerFs;

  constructor(private readonly fs: LedgerFs) {
    const records = this.records;
    const lost = this.lost;
    const record = (path: string): MtimeRecord => {
      let entry = records.get(path);
      if (!entry) {
        entry = { mtimeMs: undefined };
        records.set(path, entry);
      }
      return entry;
    };
    // proper-lockfile's calls run synchronously (they are single metadata
    // syscalls on a local directory) and answer on the next tick; utimes also
    // records the mtime it set, which is how we recognise our own lock later.
    const later =
      <A extends unknown[], R>(fn: (...args: A) => R) =>
      (...args: [...A, (error: unknown, result?: R) => void]) => {
        const callback = args.pop() as (error: unknown, result?: R) => void;
        let result: R;
        try {
          result = fn(...(args as unknown as A));
        } catch (error) {
          process.nextTick(callback, error);
          return;
        }
        process.nextTick(callback, null, result);
      };
    this.lockFs = {
      ...fs,
      mkdir: later((path: string) => fs.mkdirSync(path)),
      stat: later((path: string) => fs.statSync(path)),
      rmdir: later((path: string) => {
        if (!lost.delete(path)) fs.rmdirSync(path);
      }),
      rmdirSync(path: string) {
        if (!lost.delete(path)) fs.rmdirSync(path);
      },
      utimes: later((path: string, atime: Date | number, mtime: Date | number) => {
        fs.utimesSync(path, atime, mtime);
        record(path).mtimeMs = toMs(mtime);
      }),
    } as unknown as LedgerFs;
  }

  /**
   * Take the lock of `pool`, retrying with jitter until `timing.timeoutMs`.
   *
   * @throws LedgerBusyError naming the pool and the lock's age.
   */
  async acquire(
    pool: string,
    file: string,
    lockPath: string,
    timing: LockTiming,
  ): Promise<LockHandle> {
    const started = Date.now();
    let compromised: Error | undefined;
    for (;;) {
      try {
        const release = await lockfile.lock(file, {
          lockfilePath: lockPath,
          realpath: false,
          stale: timing.staleMs,
          retries: 0,
          fs: this.lockFs,
          onCompromised: (error) => {
            compromised = error;
          },
        });
        const entry = this.records.get(lockPath) ?? { mtimeMs: undefined };
        this.records.set(lockPath, entry);
        // With a cached mtime precision proper-lockfile does not touch the fresh
        // directory, so its creation mtime is our baseline.
        entry.mtimeMs = this.fs.statSync(lockPath).mtimeMs;
        return this.handle(pool, lockPath, entry, release, () => compromised);
      } catch (error) {
        if (!hasErrorCode(error, 'ELOCKED')) throw error;
      }
      const waited = Date.now() - started;
      if (waited >= timing.timeoutMs) throw await this.busy(pool, lockPath, waited, timing);
      await sleep(Math.min(retryDelay(waited), timing.timeoutMs - waited));
    }
  }

  private handle(
    pool: string,
    lockPath: string,
    entry: MtimeRecord,
    release: () => Promise<void>,
    compromised: () => Error | undefined,
  ): LockHandle {
    const fs = this.fs;
    const lostSet = this.lost;
    const lost = (why: string, cause?: unknown) =>
      new LedgerLockCompromisedError(
        pool,
        `Lost the lock ${lockPath} of pool ${JSON.stringify(pool)} (${why}); another process took it over after it looked stale. Nothing was written; retry the operation.`,
        cause === undefined ? undefined : { cause },
      );
    const handle: LockHandle = {
      async assertOwned() {
        const early = compromised();
        if (early) throw lost(early.message, early);
        let mtimeMs: number;
        try {
          mtimeMs = fs.statSync(lockPath).mtimeMs;
        } catch (error) {
          throw lost('the lock directory is gone', error);
        }
        const late = compromised();
        if (late) throw lost(late.message, late);
        if (entry.mtimeMs === undefined || Math.floor(mtimeMs) !== Math.floor(entry.mtimeMs)) {
          throw lost('its mtime is no longer the one we set');
        }
      },
      async release() {
        // A holder that stalled past the stale window may have lost the lock
        // after its write: never remove a lock directory that is not ours.
        try {
          await handle.assertOwned();
        } catch {
          lostSet.add(lockPath);
        }
        try {
          await release();
        } catch {
          // Already released or compromised: nothing of ours to remove.
        } finally {
          lostSet.delete(lockPath);
        }
      },
    };
    return handle;
  }

  private async busy(
    pool: string,
    lockPath: string,
    waited: number,
    timing: LockTiming,
  ): Promise<LedgerBusyError> {
    let age: number | undefined;
    try {
      const stat = await this.fs.promises.stat(lockPath);
      const since = stat.birthtimeMs > 0 ? stat.birthtimeMs : stat.mtimeMs;
      age = Math.max(0, Date.now() - since);
    } catch {
      age = undefined;
    }
    const ageText =
      age === undefined ? 'was released just now' : `is ${(age / 1000).toFixed(1)} s old`;
    return new LedgerBusyError(
      pool,
      age,
      `Pool ${JSON.stringify(pool)} is busy: could not take the lock ${lockPath} within ${waited} ms; the lock ${ageText} (a lock not refreshed for ${timing.staleMs} ms is taken over). Retry later, or raise \`lockTimeoutMs\`.`,
    );
  }
}

function toMs(value: unknown): number | undefined {
  if (value instanceof Date) return value.getTime();
  if (typeof value === 'number') return value * 1000;
  if (typeof value === 'string') return Number(value) * 1000;
  return undefined;
}

/**
 * How long a waiter sleeps before trying again. Every millisecond (the timer
 * floor) while the wait is short: a lock is held for about one disk flush, and
 * a waiter that sleeps longer mostly finds it taken again, which is what makes
 * tails long under contention. Past 250 ms the holder is probably stuck (it is
 * taken over after the stale window), so poll gently, with jitter.
 */
function retryDelay(waitedMs: number): number {
  return waitedMs < 250 ? 1 : 5 + Math.random() * 10;
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, Math.max(0, ms)));
}
