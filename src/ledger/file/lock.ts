/**
 * The pool lock: the directory `<dir>/<pool>.lock`, made by `mkdir`, as the kici
 * orchestrator's ledger makes it, so its processes and ours exclude each other.
 *
 * Inside the lock directory each of our holders keeps a token directory
 * `<pool>.lock/<token>/` (random, per acquisition). The protocol:
 *
 * 1. `lstat <pool>.lock`: a lock not refreshed for `staleMs` is taken over
 *    (see `takeover.ts`), a fresh one ends the try. A free lock is made with
 *    `mkdir <pool>.lock` (0700; 01700, the sticky bit set, by a holder that
 *    serves the combining directory); `EEXIST` there (another process was
 *    faster) ends the try too.
 * 2. `mkdir <pool>.lock/<token>`; then the lock is ours only if the directory
 *    holds our token and nothing else and has no group/other permission bits
 *    (kici's lock directories do: `mkdir` with the default mode). A process
 *    descheduled between steps 1 and 2 may be placing its token into a lock
 *    someone else took meanwhile: of two tokens, the second to arrive sees the
 *    first and backs off, so at most one of ours passes.
 * 3. Every write goes through {@link LockHandle.write}: the temp file is made in
 *    the token directory and renamed from there over the pool file. That rename
 *    is the fence: once a taker has moved the lock directory away, the source
 *    path no longer exists and a holder that stalled anywhere writes nothing.
 * 4. While held, the lock directory's mtime is refreshed every `staleMs / 4`;
 *    release removes the token directory, then the lock directory.
 */
import { join } from 'node:path';
import { type Clock, type ClockTimer, systemClock } from '../../clock.js';
import { LedgerBusyError, LedgerDirError } from '../../errors/index.js';
import { hasErrorCode, type LedgerFs } from '../fs.js';
import { directoryId, holdLock, type LockHandle, type OnStuck, removeLock } from './lock-handle.js';
import { LockWaker } from './lock-wake.js';
import { takeOverIfStale } from './takeover.js';
import { queuePath, WaitQueue } from './wait-queue.js';

export type { FencedWriteOptions, LockHandle } from './lock-handle.js';

/** Timing of the lock. */
export interface LockTiming {
  /** A lock whose mtime is older than this is taken over. */
  staleMs: number;
  /** Give up with `LedgerBusyError` after trying this long. */
  timeoutMs: number;
  /**
   * The holder serves the combining directory (claims and answers posted
   * requests, see `combining/channel.ts`): its token says so, so a waiter can tell a
   * holder that will answer it from one that will not.
   */
  combining?: boolean;
}

/**
 * What a waiter that handed its calls to the holder (cross-process combining,
 * see `combining/channel.ts`) does while it waits for the lock.
 */
export interface WaitHooks {
  /** Called once, after the first attempt found the lock taken. */
  contended(): void;
  /** True once the wait is over without the lock (the holder answered). */
  settled(): boolean;
  /** At the timeout: true when the wait must go on (a holder took the calls; its answer decides). */
  mustWait(): boolean;
  /** True while the calls are posted for a holder to apply. */
  posted(): boolean;
  /**
   * The pause of a posted waiter while the lock is held by a holder that
   * serves posted requests: until the answer arrives, the holder's release
   * wakes it, or a short bound passes (then it looks at the lock again).
   */
  pause(): Promise<void>;
}

/** Per-acquisition token: unique on this host (pid) and across attempts (random). */
function newToken(): string {
  return `${process.pid}.${Math.random().toString(36).slice(2, 12)}`;
}

// The mode bit a holder that serves the combining directory makes its lock with.
const COMBINING_MARK = 0o1000;

/**
 * True when the lock at `lockPath` is held right now by a holder of ours that
 * serves the combining directory: a private (0700) lock directory with the
 * sticky bit (the mark such a holder makes it with), refreshed within
 * `staleMs`. One `lstat`: a posted waiter asks this every time it wakes.
 * False for a free lock, a kici orchestrator's lock (made with the default
 * mode), a holder of ours that does not combine (an older version, a pool
 * whose name cannot travel in a request), a stale lock (its holder is gone:
 * someone must take it over), or a link.
 */
export function heldByCombiningHolder(fs: LedgerFs, lockPath: string, staleMs: number): boolean {
  try {
    const stat = fs.lstatSync(lockPath, { throwIfNoEntry: false });
    if (stat === undefined) return false;
    return (
      stat.isDirectory() &&
      (stat.mode & 0o077) === 0 &&
      (stat.mode & COMBINING_MARK) !== 0 &&
      systemClock.now() - stat.mtimeMs <= staleMs
    );
  } catch {
    return false;
  }
}

// How often a lock whose release failed (see PoolLocker) is removed again.
const RELEASE_RETRY_MS = 100;

/** Takes pool locks for one ledger. */
export class PoolLocker {
  readonly #fs: LedgerFs;
  readonly #waker: LockWaker;
  readonly #clock: Clock;
  // Per lock path, the names its waiters wake on (made once).
  readonly #wakeNames = new Map<string, ReturnType<typeof wakeNames>>();
  // Locks of ours whose release failed (a read-only filesystem): lock path to
  // our token directory in it and the error of the last try. Removed again
  // every RELEASE_RETRY_MS and before the next acquire of the pool, so that
  // once the fault clears every process proceeds at once instead of after the
  // stale window.
  readonly #stuck = new Map<string, { tokenDir: string; id: string | undefined; error: unknown }>();
  #retry: ClockTimer | undefined;

  constructor(fs: LedgerFs, clock: Clock = systemClock) {
    this.#fs = fs;
    this.#waker = new LockWaker(fs);
    this.#clock = clock;
  }

  /** Stop watching pool directories (waiters that still wait go on polling). */
  close(): void {
    this.#waker.close();
    if (this.#stuck.size > 0) this.#removeStuck();
    this.#clock.clearInterval(this.#retry);
    this.#retry = undefined;
  }

  /** The locks of ours whose release failed and is retried (for tests). */
  stuckLocks(): string[] {
    return [...this.#stuck.keys()];
  }

  // A release that could not remove the lock: retried in the background.
  #onStuck: OnStuck = (lockPath, tokenDir, id, error) => {
    this.#stuck.set(lockPath, { tokenDir, id, error });
    if (this.#retry !== undefined) return;
    this.#retry = this.#clock.setInterval(() => this.#removeStuck(), RELEASE_RETRY_MS);
    this.#retry.unref();
  };

  // Try again to remove the stuck locks (all, or the one at `only`).
  #removeStuck(only?: string): void {
    for (const [lockPath, stuck] of this.#stuck) {
      if (only !== undefined && lockPath !== only) continue;
      const removed = removeLock(this.#fs, lockPath, stuck.tokenDir, stuck.id);
      if (removed === 'done') this.#stuck.delete(lockPath);
      else stuck.error = removed.error;
    }
    if (this.#stuck.size === 0) {
      this.#clock.clearInterval(this.#retry);
      this.#retry = undefined;
    }
  }

  /**
   * Take the lock of `pool`, retrying until `timing.timeoutMs`. With `hooks`,
   * `undefined` when the wait ended without the lock because `hooks.settled()`.
   *
   * @throws LedgerBusyError naming the pool and the lock's age.
   * @throws LedgerDirError when `<pool>.lock` exists and is not a directory.
   * @throws the system error (EROFS, EIO...) that keeps this ledger's own last
   * lock of the pool from being removed, at once: every waiter, this one too,
   * would wait for that lock until the fault clears.
   */
  acquire(pool: string, lockPath: string, timing: LockTiming): Promise<LockHandle>;
  acquire(
    pool: string,
    lockPath: string,
    timing: LockTiming,
    hooks: WaitHooks,
  ): Promise<LockHandle | undefined>;
  async acquire(
    pool: string,
    lockPath: string,
    timing: LockTiming,
    hooks?: WaitHooks,
  ): Promise<LockHandle | undefined> {
    if (this.#stuck.size > 0) {
      this.#removeStuck(lockPath);
      // Our own release of this lock still fails (a read-only filesystem): the
      // write this wait is for would fail the same way, so fail now rather
      // than wait out the fault. Nothing is posted yet.
      const stuck = this.#stuck.get(lockPath);
      if (stuck !== undefined) throw stuck.error;
    }
    const started = systemClock.now();
    const queue = new WaitQueue(this.#fs, queuePath(lockPath));
    let wake = this.#wakeNames.get(lockPath);
    if (wake === undefined) {
      wake = wakeNames(lockPath);
      this.#wakeNames.set(lockPath, wake);
    }
    let contended = false;
    // A posted waiter behind a live holder that combines has nothing to try:
    // that holder applies its request, or wakes it when it releases. So until
    // then it neither tries the lock nor stands in line.
    let deferring = false;
    // Whether this wait keeps the directory's watch (`LockWaker.begin`): from
    // its first sleep on the lock, not while deferring.
    let begun = false;
    try {
      for (;;) {
        if (hooks?.settled()) {
          queue.leave();
          return undefined;
        }
        if (deferring) deferring = heldByCombiningHolder(this.#fs, lockPath, timing.staleMs);
        if (!deferring) {
          // Whether it is our turn is read only once the lock looks free.
          let turn: boolean | undefined;
          let token: { token: string; id: string | undefined } | undefined;
          try {
            token = this.attempt(pool, lockPath, timing, () => {
              turn = queue.myTurn();
              return turn;
            });
          } catch (error) {
            queue.leave();
            throw error;
          }
          if (token !== undefined) {
            queue.leave();
            return holdLock(this.#fs, pool, lockPath, token, timing.staleMs, this.#onStuck);
          }
          if (!contended) {
            contended = true;
            hooks?.contended();
          }
          // A posted waiter leaves the line only while the lock is held by a
          // holder that will apply its request (one of ours that combines).
          // Behind any other holder (the kici orchestrator's ledger, which knows
          // nothing of posted requests) it waits in line like every plain waiter
          // and takes the lock itself, then serves every posted request as holder.
          deferring =
            hooks?.posted() === true && heldByCombiningHolder(this.#fs, lockPath, timing.staleMs);
          if (deferring) {
            queue.leave();
            if (begun) this.#waker.end(wake.dir);
            begun = false;
          } else queue.claim(turn);
        }
        const waited = systemClock.now() - started;
        if (waited >= timing.timeoutMs && !hooks?.mustWait()) {
          queue.leave();
          throw await this.busy(pool, lockPath, waited, timing);
        }
        if (deferring && hooks) {
          await hooks.pause();
          continue;
        }
        // Waiters behind an older one only need to notice when it is their turn:
        // the head of the line wakes when the lock changes, the others when the
        // queue does (each still polls, for changes no watch reports).
        const leading = queue.leading();
        if (!begun) {
          begun = true;
          // A watch made only now missed whatever changed since the try
          // above (a release then would wake nobody until the timer): try
          // once more, now watched, before the first sleep.
          if (this.#waker.begin(wake.dir)) continue;
        }
        // A watch that failed since (and is made again by the sleep) polls meanwhile.
        const delay = this.#waker.watching(wake.dir)
          ? watchedRetryDelay(leading)
          : leading
            ? retryDelay(waited)
            : 2 + Math.random();
        await this.#waker.sleep(
          wake.dir,
          leading ? wake.lock : wake.queue,
          Math.max(1, Math.min(delay, timing.timeoutMs - waited)),
        );
      }
    } finally {
      if (begun) this.#waker.end(wake.dir);
    }
  }

  // One try: the token when the lock is ours now, else undefined.
  // `ourTurn` says whether the wait queue lets us take a free lock now.
  private attempt(
    pool: string,
    lockPath: string,
    timing: LockTiming,
    ourTurn: () => boolean,
  ): { token: string; id: string | undefined } | undefined {
    const token = newToken();
    const mode = timing.combining === true ? 0o700 | COMBINING_MARK : 0o700;
    // Look before the mkdir: a held lock then costs one lstat, not a failed
    // mkdir (and its thrown EEXIST) and an lstat.
    const found = takeOverIfStale(this.#fs, lockPath, timing.staleMs, token);
    if (found === 'not-a-directory') {
      throw new LedgerDirError(
        lockPath,
        `The lock entry ${lockPath} of pool ${JSON.stringify(pool)} is not a directory; it is not a lock this ledger or the kici orchestrator made. Remove it once you know what put it there.`,
      );
    }
    if (found === 'held' || !ourTurn() || !this.makeLockDir(lockPath, mode)) return undefined;
    const id = this.claimToken(lockPath, token);
    return id === false ? undefined : { token, id };
  }

  private makeLockDir(lockPath: string, mode: number): boolean {
    try {
      this.#fs.mkdirSync(lockPath, mode);
      return true;
    } catch (error) {
      if (hasErrorCode(error, 'EEXIST')) return false;
      throw error;
    }
  }

  // Place our token in the lock directory and check that it is alone there.
  // The lock directory we just made is removed again when that fails (no
  // inode left for the token, say): a failed acquire leaves no lock behind.
  // False, or the lock directory's identity (see directoryId) when the lock is ours.
  private claimToken(lockPath: string, token: string): string | undefined | false {
    const fs = this.#fs;
    const tokenDir = join(lockPath, token);
    try {
      fs.mkdirSync(tokenDir, 0o700);
    } catch (error) {
      // The lock directory was taken over (or released) since our mkdir.
      if (hasErrorCode(error, 'ENOENT') || hasErrorCode(error, 'ENOTDIR')) return false;
      this.removeEmptyLock(lockPath);
      throw error;
    }
    let alone = false;
    let failed = false;
    let id: string | undefined;
    try {
      const entries = fs.readdirSync(lockPath);
      const stat = fs.lstatSync(lockPath);
      id = directoryId(stat);
      alone =
        entries.length === 1 &&
        entries[0] === token &&
        stat.isDirectory() &&
        (stat.mode & 0o077) === 0;
    } catch {
      failed = true;
    }
    if (!alone) {
      try {
        fs.rmdirSync(tokenDir);
      } catch {
        // Taken over with the lock directory: gone already.
      }
      if (failed) this.removeEmptyLock(lockPath);
    }
    return alone ? id : false;
  }

  // Remove the lock directory we made a moment ago, if it is still empty (a
  // token that arrived meanwhile keeps it: ENOTEMPTY). When that fails too (a
  // filesystem turned read-only in between) it is retried like a stuck release.
  private removeEmptyLock(lockPath: string): void {
    try {
      this.#fs.rmdirSync(lockPath);
    } catch (error) {
      if (hasErrorCode(error, 'ENOENT') || hasErrorCode(error, 'ENOTEMPTY')) return;
      let id: string | undefined;
      try {
        const stat = this.#fs.lstatSync(lockPath, { throwIfNoEntry: false });
        id = stat === undefined ? undefined : directoryId(stat);
      } catch {
        id = undefined;
      }
      // No token of ours inside: removeLock finds none and checks the identity.
      if (id !== undefined) this.#onStuck(lockPath, join(lockPath, '.no-token'), id, error);
    }
  }

  private async busy(
    pool: string,
    lockPath: string,
    waited: number,
    timing: LockTiming,
  ): Promise<LedgerBusyError> {
    let age: number | undefined;
    try {
      const stat = this.#fs.lstatSync(lockPath);
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
 * minimum) while the wait is short: a lock is held for about one disk flush, and
 * a waiter that sleeps longer mostly finds it taken again, which is what makes
 * tails long under contention. Past 250 ms the holder is probably stuck (it is
 * taken over after the stale window), so poll gently, with jitter.
 */
export function retryDelay(waitedMs: number): number {
  return waitedMs < 250 ? 1 : 5 + Math.random() * 10;
}

/**
 * How long a waiter sleeps while the pool directory is watched: any change of
 * the lock (or of the queue, for the others) wakes it at once, so the timer
 * only covers what no watch reports (a lock made stale by a dead holder, a
 * change made over a network mount). Short timers here would only keep the
 * CPU from the holder everyone waits for.
 */
function watchedRetryDelay(leading: boolean): number {
  return leading ? 10 + Math.random() * 5 : 20 + Math.random() * 10;
}

/** The directory of a pool lock and the entry names in it whose changes wake its waiters. */
function wakeNames(lockPath: string): {
  dir: string;
  lock: ReadonlySet<string>;
  queue: ReadonlySet<string>;
} {
  const slash = lockPath.lastIndexOf('/');
  return {
    dir: lockPath.slice(0, slash),
    lock: new Set([lockPath.slice(slash + 1)]),
    queue: new Set([queuePath(lockPath).slice(slash + 1)]),
  };
}
