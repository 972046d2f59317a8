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
import type * as ProperLockfile from 'proper-lockfile';
import { monotonicEpochNow, sleep, systemClock } from '../clock.js';
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

// proper-lockfile installs a process exit hook (signal-exit) when it is loaded,
// so it is loaded on the first lock, not when the package is imported.
type LockfileApi = Pick<typeof ProperLockfile, 'lock'>;
let loading: Promise<LockfileApi> | undefined;
function loadLockfile(): Promise<LockfileApi> {
  loading ??= import('proper-lockfile').then((mod) => mod.default);
  return loading;
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
        // Record what the filesystem stored, not what we asked for: utimes goes
        // through float seconds, so about half of all whole-millisecond times read
        // back as .999 of the millisecond before, and the ownership check would
        // then see a lock we still hold as taken over.
        record(path).mtimeMs = fs.statSync(path).mtimeMs;
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
    const started = systemClock.now();
    const queue = new WaitQueue(this.fs, queuePath(lockPath));
    let compromised: Error | undefined;
    const lockfile = await loadLockfile();
    for (;;) {
      if (queue.myTurn()) {
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
          queue.leave();
          const entry = this.records.get(lockPath) ?? { mtimeMs: undefined };
          this.records.set(lockPath, entry);
          // With a cached mtime precision proper-lockfile does not touch the fresh
          // directory, so its creation mtime is our baseline.
          entry.mtimeMs = this.fs.statSync(lockPath).mtimeMs;
          return this.handle(pool, lockPath, entry, release, () => compromised);
        } catch (error) {
          if (!hasErrorCode(error, 'ELOCKED')) {
            queue.leave();
            throw error;
          }
        }
        queue.claim();
      }
      const waited = systemClock.now() - started;
      if (waited >= timing.timeoutMs) {
        queue.leave();
        throw await this.busy(pool, lockPath, waited, timing);
      }
      // Waiters behind an older one only need to notice when it is their turn.
      const delay = queue.leading() ? retryDelay(waited) : 2 + Math.random();
      await sleep(Math.min(delay, timing.timeoutMs - waited));
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
      age = Math.max(0, systemClock.now() - since);
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

/** The advisory wait-queue file of a lock: `<dir>/.<pool>.queue`, beside `<dir>/<pool>.lock`. */
function queuePath(lockPath: string): string {
  const slash = lockPath.lastIndexOf('/');
  return `${lockPath.slice(0, slash + 1)}.${lockPath.slice(slash + 1, -'.lock'.length)}.queue`;
}

// A head-of-line claim older than this is ignored: its waiter died or stalled.
const CLAIM_TTL_MS = 10;

/**
 * An advisory first-come-first-served order among waiters of one lock, so a
 * process that keeps re-taking the lock cannot starve the others. The queue file
 * names the oldest waiter (its start time and id) and when it last said so; a
 * waiter only tries the lock when no older waiter has claimed the head within
 * `CLAIM_TTL_MS`. It is only a hint: the lock itself is still the `mkdir`, a
 * dead waiter's claim expires on its own, and writers that do not know the file
 * (the kici orchestrator) simply compete as before.
 */
class WaitQueue {
  private readonly start = monotonicEpochNow();
  private readonly id = `${process.pid}.${Math.random().toString(36).slice(2, 10)}`;
  private claimed = false;

  constructor(
    private readonly fs: LedgerFs,
    private readonly path: string,
  ) {}

  /** True unless an older waiter holds a fresh claim on the head of the line. */
  myTurn(): boolean {
    const head = this.read();
    if (head === undefined || head.id === this.id) return true;
    if (systemClock.now() - head.touchedAt > CLAIM_TTL_MS) return true;
    return head.start > this.start || (head.start === this.start && head.id > this.id);
  }

  /** True while our claim is the head of the line. */
  leading(): boolean {
    return this.claimed;
  }

  /** After a failed attempt: claim (or keep) the head of the line if no older waiter has it. */
  claim(): void {
    if (!this.myTurn()) {
      this.claimed = false;
      return;
    }
    try {
      this.fs.writeFileSync(this.path, `${this.start} ${systemClock.now()} ${this.id}\n`, {
        mode: 0o644,
      });
      this.claimed = true;
    } catch {
      // Advisory only.
    }
  }

  /** Done waiting (the lock is ours, or we gave up): drop our claim if it is still there. */
  leave(): void {
    if (!this.claimed) return;
    this.claimed = false;
    if (this.read()?.id !== this.id) return;
    try {
      this.fs.unlinkSync(this.path);
    } catch {
      // Already gone.
    }
  }

  private read(): { start: number; touchedAt: number; id: string } | undefined {
    let text: string;
    try {
      text = this.fs.readFileSync(this.path, 'utf8');
    } catch {
      return undefined;
    }
    const [start, touchedAt, id] = text.trim().split(' ');
    const parsed = { start: Number(start), touchedAt: Number(touchedAt), id: id ?? '' };
    return Number.isFinite(parsed.start) && Number.isFinite(parsed.touchedAt) && parsed.id
      ? parsed
      : undefined;
  }
}
