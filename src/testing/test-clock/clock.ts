/**
 * TestClock: virtual time for everything that takes a `clock` option. Time
 * moves only when the test says so; due timers fire in time order, and the
 * promise chains each one starts settle before the next one fires.
 */
import type { Clock, ClockTimer } from '../../clock.js';
import { iso, toEpoch } from './instant.js';
import { settleChains } from './settle.js';
import { TIMEOUT_MAX, TimerQueue, VirtualTimer } from './timers.js';

/**
 * A `Clock` with virtual time. It starts at a given instant and moves
 * only through {@link TestClock.advance}, {@link TestClock.advanceTo} and
 * {@link TestClock.runAll}, which fire due timers in time order (creation order
 * among equals) and, after each, wait for the promise chains it started to
 * settle: when `advance` resolves, the destroy that followed an idle timeout
 * has happened. Timers follow Node's contract (a delay below 1 or above
 * 2^31-1 ms becomes 1 ms; `unref` is honoured by `runAll`).
 *
 * Time zones: `now()` is epoch milliseconds, as `Date.now()`; anything that
 * reads a zone from it uses the process's zone, as with the system clock.
 *
 * @example
 * ```ts
 * import { TestClock } from 'scaler-primitives/testing';
 * const clock = new TestClock('2026-01-05T09:00:00Z');
 * const fired: string[] = [];
 * clock.setTimeout(() => fired.push(new Date(clock.now()).toISOString()), 90_000);
 * await clock.advance(60_000); // nothing yet
 * await clock.advance(30_000); // fired at 09:01:30
 * console.log(fired); // ['2026-01-05T09:01:30.000Z']
 * ```
 */
export class TestClock implements Clock {
  #now: number;
  #nextId = 1;
  readonly #queue = new TimerQueue();
  #busy = false;
  readonly #settleTurns: number;

  /**
   * @param start - Where time starts: a `Date`, an ISO 8601 string
   *   (`2026-01-05T09:00:00Z`), or epoch milliseconds.
   * @param options - `settleTurns`.
   * @throws TypeError when `start` is not a valid instant or an option is out of range.
   */
  constructor(
    start: Date | string | number,
    options: {
      /**
       * The most real event-loop turns (`setImmediate`) to take after each timer
       * fires (and at the end of `advance`), after the microtask queue is drained.
       * A turn is taken only while one would run something: an immediate is
       * queued or an I/O request (a file read, a DNS lookup, a socket write) is in
       * flight. Promise chains settle without any; a turn also lets `setImmediate`
       * callbacks and I/O that is already complete run. 0 never takes one.
       * @default 1
       */
      settleTurns?: number;
    } = {},
  ) {
    this.#now = toEpoch('start', start);
    const unknown = Object.keys(options ?? {}).filter((key) => key !== 'settleTurns');
    if (unknown.length > 0) {
      throw new TypeError(
        `Unknown TestClock option \`${unknown[0]}\`: the accepted option is \`settleTurns\``,
      );
    }
    const turns = options?.settleTurns ?? 1;
    if (!Number.isInteger(turns) || turns < 0 || turns > 100) {
      throw new TypeError(
        `Expected \`settleTurns\` to be an integer from 0 to 100, got \`${String(turns)}\``,
      );
    }
    this.#settleTurns = turns;
  }

  /** The virtual time, in epoch milliseconds. */
  now(): number {
    return this.#now;
  }

  /** The virtual time as a `Date`. */
  date(): Date {
    return new Date(this.#now);
  }

  /** Run `fn` once, `ms` virtual milliseconds from now. */
  setTimeout(fn: () => void, ms: number): ClockTimer {
    return this.#add(fn, ms, false);
  }

  /** Cancel a timer; `undefined` and timers of other clocks are ignored. */
  clearTimeout(timer: ClockTimer | undefined): void {
    this.#cancel(timer);
  }

  /** Run `fn` every `ms` virtual milliseconds. */
  setInterval(fn: () => void, ms: number): ClockTimer {
    return this.#add(fn, ms, true);
  }

  /** Cancel an interval; `undefined` and timers of other clocks are ignored. */
  clearInterval(timer: ClockTimer | undefined): void {
    this.#cancel(timer);
  }

  /**
   * Move time forward by `ms`, firing every timer due on the way in time
   * order, each followed by a settle; then a last settle at the target.
   *
   * @returns Resolves once time is at the target and the chains have settled.
   * @throws TypeError when `ms` is not a finite number >= 0, or another
   *   advance is running. Rejects with what a timer callback threw (time stays
   *   at that timer's instant).
   */
  advance(ms: number): Promise<void> {
    if (typeof ms !== 'number' || !Number.isFinite(ms) || ms < 0) {
      return Promise.reject(
        new TypeError(`Expected \`ms\` to be a finite number >= 0, got \`${String(ms)}\``),
      );
    }
    return this.#exclusive(() => this.#runUntil(this.#now + ms));
  }

  /**
   * Move time forward to `instant`, as {@link TestClock.advance}.
   *
   * @throws TypeError when `instant` is invalid or earlier than now.
   */
  advanceTo(instant: Date | string | number): Promise<void> {
    let target: number;
    try {
      target = toEpoch('instant', instant);
    } catch (error) {
      return Promise.reject(error);
    }
    if (target < this.#now) {
      return Promise.reject(
        new TypeError(
          `Expected \`instant\` to be now (${iso(this.#now)}) or later, got ${iso(target)}: a TestClock never goes back`,
        ),
      );
    }
    return this.#exclusive(() => this.#runUntil(target));
  }

  /**
   * Fire timers in time order, moving time to each, until no timer that keeps
   * the process alive is left (unref'd timers, such as the manager's
   * maintenance interval, do not keep it going; they fire when due on the way).
   *
   * @returns The number of timers fired.
   * @throws Error when `limit` timers fired and ref'd timers remain (an
   *   interval that never stops); the message lists them.
   */
  runAll(
    options: {
      /**
       * The most timers to fire before giving up with an error (an interval that
       * keeps the clock busy forever).
       * @default 10000
       */
      limit?: number;
    } = {},
  ): Promise<number> {
    const limit = options?.limit ?? 10_000;
    if (!Number.isInteger(limit) || limit < 1) {
      return Promise.reject(
        new TypeError(`Expected \`limit\` to be an integer >= 1, got \`${String(limit)}\``),
      );
    }
    return this.#exclusive(async () => {
      let fired = 0;
      while (this.#queue.hasRefed()) {
        if (fired >= limit) {
          const left = this.pending()
            .filter((t) => t.ref)
            .map((t) => `#${t.id} ${t.kind}${t.name ? ` ${t.name}` : ''} due ${t.due}`);
          throw new Error(
            `TestClock.runAll fired ${limit} timers and ref'd timers remain (${left.join('; ')}): an interval keeps the clock busy. Clear it, unref it, or use advance().`,
          );
        }
        const timer = this.#queue.peek();
        if (timer === undefined) break;
        await this.#fire(timer);
        fired++;
      }
      await this.settle();
      return fired;
    });
  }

  /** Every waiting timer, soonest first (for debugging a test). */
  pending(): {
    /** The timer's id on this clock (in creation order). */
    id: number;
    /** `timeout` (fires once) or `interval` (fires every `intervalMs`). */
    kind: 'timeout' | 'interval';
    /** When it fires next, in epoch milliseconds. */
    dueAt: number;
    /** The same instant as an ISO string. */
    due: string;
    /** Milliseconds from now until it fires. */
    inMs: number;
    /** The interval's period. */
    intervalMs?: number;
    /** False when `unref()` was called: it does not keep {@link TestClock.runAll} going. */
    ref: boolean;
    /** The callback's function name, when it has one. */
    name: string;
  }[] {
    return [...this.#queue.all()]
      .sort((a, b) => a.dueAt - b.dueAt || a.seq - b.seq)
      .map((timer) => {
        const out: ReturnType<TestClock['pending']>[number] = {
          id: timer.id,
          kind: timer.intervalMs === undefined ? 'timeout' : 'interval',
          dueAt: timer.dueAt,
          due: iso(timer.dueAt),
          inMs: timer.dueAt - this.#now,
          ref: timer.refed,
          name: timer.fn.name,
        };
        if (timer.intervalMs !== undefined) out.intervalMs = timer.intervalMs;
        return out;
      });
  }

  /**
   * Let promise chains settle without moving time: drain the microtask and
   * `process.nextTick` queues (chains that hop between them included), then,
   * while an immediate or an I/O request is pending, take up to `settleTurns`
   * real event-loop turns (draining again after each).
   *
   * @example
   * ```ts
   * import type { ScalerManager } from 'scaler-primitives/manager';
   * import type { TestClock } from 'scaler-primitives/testing';
   *
   * declare const manager: ScalerManager; // built with `clock`
   * declare const clock: TestClock;
   * void manager.requestScale({ jobId: 'job-1', labels: ['linux'] }); // not awaited
   * await clock.settle(); // its spawn has been called
   * ```
   */
  settle(): Promise<void> {
    return settleChains(this.#settleTurns);
  }

  async #exclusive<T>(run: () => Promise<T>): Promise<T> {
    if (this.#busy) {
      throw new TypeError(
        'A TestClock advance is already running: await it before moving time again (timer callbacks must not advance the clock).',
      );
    }
    this.#busy = true;
    try {
      return await run();
    } finally {
      this.#busy = false;
    }
  }

  async #runUntil(target: number): Promise<void> {
    for (;;) {
      const next = this.#queue.peek();
      if (next === undefined || next.dueAt > target) break;
      await this.#fire(next);
    }
    this.#now = target;
    await this.settle();
  }

  /**
   * Fire the soonest timer (`timer`) at its instant, then let its chains
   * settle. What the callback throws is thrown here (the callers are async:
   * it becomes their rejection).
   */
  #fire(timer: VirtualTimer): Promise<void> {
    if (timer.dueAt > this.#now) this.#now = timer.dueAt;
    if (timer.intervalMs === undefined) this.#queue.remove(timer);
    else this.#queue.rescheduleTop(this.#now + timer.intervalMs);
    timer.fn();
    return this.settle();
  }

  #add(fn: () => void, ms: number, repeat: boolean): VirtualTimer {
    if (typeof fn !== 'function') {
      throw new TypeError(`Expected the timer callback to be a function, got \`${typeof fn}\``);
    }
    let delay = Number(ms);
    if (!(delay >= 1 && delay <= TIMEOUT_MAX)) delay = 1;
    const timer = new VirtualTimer(
      this.#nextId++,
      fn,
      this.#now + delay,
      repeat ? delay : undefined,
    );
    this.#queue.push(timer, timer.dueAt);
    return timer;
  }

  #cancel(timer: ClockTimer | undefined): void {
    if (timer instanceof VirtualTimer) this.#queue.remove(timer);
  }
}
