/**
 * Waking the waiters of a pool lock. A waiter that only polled would notice a
 * released lock on its next timer tick (1 ms at best, more under load), and
 * under contention that hand-over gap is most of the time a reservation
 * takes. Instead each ledger watches the directories its pools live in
 * (`fs.watch`, inotify on Linux) and wakes a waiter as soon as the entry it
 * waits on changes: `<pool>.lock` (taken or released, by us or by the kici
 * orchestrator) or `.<pool>.queue` (the head of the wait queue left it, or a
 * first waiter claimed it). Only an entry made, removed or renamed wakes
 * anyone: the head rewriting its claim in place does not.
 *
 * It only shortens sleeps: every waiter still wakes on its timer, so a
 * filesystem that reports nothing (a network mount, a watch that failed or
 * hit the inotify limit) behaves as before, by polling.
 *
 * A watch is kept only while a waiter of this process waits on the
 * directory: from the first sleep of a wait for a lock (`begin`) to the end of
 * that wait (`end`: it got the lock, gave up, or now sleeps on its combining
 * inbox instead), and the last one to end it closes the watch. Every change in
 * a busy ledger directory (each lock taken and released, each pool file
 * replaced, each lease renewed) wakes the process that watches it, although
 * most of its waits are answered through the combining inbox. (Until 2026-12
 * a watch ended at the first change 50 ms after its last sleeper: at 8
 * processes that woke each of them about once more per reserve and release,
 * for nothing.)
 */
import { type ClockTimer, systemClock } from '../../clock.js';
import { timerMs } from '../../internal/timer-ms.js';
import type { LedgerFs } from '../fs.js';

interface Sleeper {
  names: ReadonlySet<string>;
  wake: () => void;
}

type FSWatcher = ReturnType<LedgerFs['watch']>;

/** One directory's watch, shared by every waiter of every pool in it. */
class DirWatch {
  readonly #sleepers = new Set<Sleeper>();
  #watcher: FSWatcher | undefined;

  // `onQuiet` runs when the last sleeper leaves.
  constructor(
    watcher: FSWatcher,
    private readonly onQuiet: () => void,
  ) {
    this.#watcher = watcher;
    watcher.on('change', (event: string, name: string | Buffer | null) => {
      // Only entries made, removed or renamed: a rewrite of the queue file (the
      // head refreshing its claim) or the lock's mtime refresh wakes nobody.
      if (this.#sleepers.size > 0 && event === 'rename') this.#changed(name);
    });
    // A watch that fails (the directory went away, inotify gave up) ends; sleepers poll.
    watcher.on('error', () => this.close());
  }

  get open(): boolean {
    return this.#watcher !== undefined;
  }

  add(sleeper: Sleeper): void {
    this.#sleepers.add(sleeper);
  }

  remove(sleeper: Sleeper): void {
    this.#sleepers.delete(sleeper);
    if (this.#sleepers.size === 0) this.onQuiet();
  }

  get quiet(): boolean {
    return this.#sleepers.size === 0;
  }

  close(): void {
    const watcher = this.#watcher;
    this.#watcher = undefined;
    try {
      watcher?.close();
    } catch {
      // Closed already.
    }
    for (const sleeper of [...this.#sleepers]) sleeper.wake();
  }

  #changed(name: string | Buffer | null): void {
    // Without a name (some platforms), any change may be the one waited for.
    const entry = name === null ? undefined : String(name);
    for (const sleeper of [...this.#sleepers]) {
      if (entry === undefined || sleeper.names.has(entry)) sleeper.wake();
    }
  }
}

/** The directory watches of one ledger, made on first contention, closed with the ledger. */
export class LockWaker {
  readonly #fs: LedgerFs;
  readonly #watches = new Map<string, DirWatch | null>();
  // Per directory, the waits between `begin` and `end`.
  readonly #waits = new Map<string, number>();

  constructor(fs: LedgerFs) {
    this.#fs = fs;
  }

  /**
   * Sleep up to `ms`, or less when one of `names` (entries of `dir`) changes.
   * Resolves `true` when woken by a change, `false` on the timer. Outside a
   * wait (`begin`), the watch ends with the sleep.
   */
  sleep(dir: string, names: ReadonlySet<string>, ms: number): Promise<boolean> {
    ms = timerMs(ms);
    const watch = this.#watch(dir);
    if (watch === undefined) return timer(ms);
    return new Promise((resolve) => {
      let handle: ClockTimer | undefined;
      const sleeper: Sleeper = {
        names,
        wake: () => finish(true),
      };
      const finish = (woken: boolean) => {
        systemClock.clearTimeout(handle);
        watch.remove(sleeper);
        resolve(woken);
      };
      handle = systemClock.setTimeout(() => finish(false), ms);
      watch.add(sleeper);
    });
  }

  /** True while `dir` is watched. */
  watching(dir: string): boolean {
    return this.#watches.get(dir)?.open === true;
  }

  /**
   * A wait on a lock in `dir` begins: its watch is kept (made if needed) until
   * the matching `end`. True when the watch was made just now: it saw nothing
   * of what changed before, so the wait should look again before it sleeps.
   */
  begin(dir: string): boolean {
    this.#waits.set(dir, (this.#waits.get(dir) ?? 0) + 1);
    const existed = this.watching(dir);
    return this.#watch(dir) !== undefined && !existed;
  }

  /** The wait `begin` started has ended; the last one closes the watch. */
  end(dir: string): void {
    const waits = (this.#waits.get(dir) ?? 1) - 1;
    if (waits > 0) {
      this.#waits.set(dir, waits);
      return;
    }
    this.#waits.delete(dir);
    const watch = this.#watches.get(dir);
    if (watch?.quiet) this.#close(dir, watch);
  }

  /** Stop every watch; sleeping waiters wake and go on polling. */
  close(): void {
    for (const watch of this.#watches.values()) watch?.close();
    this.#watches.clear();
  }

  #close(dir: string, watch: DirWatch): void {
    watch.close();
    if (this.#watches.get(dir) === watch) this.#watches.delete(dir);
  }

  #watch(dir: string): DirWatch | undefined {
    const known = this.#watches.get(dir);
    if (known === null) return undefined;
    if (known?.open) return known;
    let watch: DirWatch | null;
    try {
      // Not persistent: a waiting ledger keeps the process alive through its timer only.
      const made: DirWatch = new DirWatch(this.#fs.watch(dir, { persistent: false }), () => {
        // The last sleeper left: outside every wait, nobody needs the watch.
        if (!this.#waits.has(dir)) this.#close(dir, made);
      });
      watch = made;
    } catch {
      // No watch here (ENOSPC: the inotify limit; ENOSYS; an fs seam without watch): poll.
      watch = null;
    }
    this.#watches.set(dir, watch);
    return watch ?? undefined;
  }
}

function timer(ms: number): Promise<boolean> {
  return new Promise((resolve) => systemClock.setTimeout(() => resolve(false), ms));
}
