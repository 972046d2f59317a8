/**
 * Time as a seam. This is the only file under `src/` that reads the system clock
 * or starts a timer; everything that decides by time takes a `Clock`
 * (option `clock`), so a test clock can drive it.
 *
 * Two kinds of wait exist:
 * - waits that decide something (a lease window, an idle timeout, a reaper
 *   interval): they go through the injected `clock`;
 * - waits on another process or a server (a lock poll, a NATS retry pause, a
 *   latency measurement): they are real whatever clock is injected, and use
 *   {@link systemClock}, {@link monotonicNow} and {@link sleep} from here by name.
 */

/**
 * A timer started by a `Clock`: Node's `Timeout` contract, as far as we use it.
 *
 * @example
 * ```ts
 * import type { Clock, ClockTimer } from 'scaler-primitives';
 *
 * declare const clock: Clock;
 * declare function reap(): Promise<void>;
 * const timer: ClockTimer = clock.setInterval(() => void reap(), 30_000);
 * timer.unref(); // a background task never keeps the process alive
 * ```
 */
export interface ClockTimer {
  /** Let the process exit while this timer is pending. */
  unref(): ClockTimer;
  /** Keep the process alive while this timer is pending (the default). */
  ref(): ClockTimer;
  /** Whether the timer keeps the process alive. */
  hasRef(): boolean;
}

/**
 * A source of time and timers with Node's contract. Pass one as the `clock`
 * option of `ScalerManager`, `MachineLedger` or `NatsPoolLedger`; the test kit's
 * `TestClock` implements it with virtual time.
 *
 * @example
 * ```ts
 * import { systemClock } from 'scaler-primitives';
 * const t = systemClock.setTimeout(() => console.log('tick'), 1000).unref();
 * systemClock.clearTimeout(t);
 * ```
 */
export interface Clock {
  /** Milliseconds since the Unix epoch, as `Date.now()`. */
  now(): number;
  /** Run `fn` once after `ms` milliseconds, as Node's `setTimeout`. */
  setTimeout(fn: () => void, ms: number): ClockTimer;
  /** Cancel a timer from {@link Clock.setTimeout}; `undefined` and unknown timers are ignored. */
  clearTimeout(timer: ClockTimer | undefined): void;
  /** Run `fn` every `ms` milliseconds, as Node's `setInterval`. */
  setInterval(fn: () => void, ms: number): ClockTimer;
  /** Cancel a timer from {@link Clock.setInterval}; `undefined` and unknown timers are ignored. */
  clearInterval(timer: ClockTimer | undefined): void;
}

/**
 * The system clock: `Date.now` and Node's timers. The default `clock` everywhere.
 *
 * @example
 * ```ts
 * import { MachineLedger, systemClock } from 'scaler-primitives';
 * const ledger = new MachineLedger({ instanceId: 'orchestrator-a', clock: systemClock }); // the default
 * ```
 */
export const systemClock: Clock = Object.freeze({
  now: () => Date.now(),
  setTimeout: (fn: () => void, ms: number): ClockTimer => setTimeout(fn, ms),
  clearTimeout: (timer: ClockTimer | undefined) => {
    if (timer !== undefined) clearTimeout(timer as NodeJS.Timeout);
  },
  setInterval: (fn: () => void, ms: number): ClockTimer => setInterval(fn, ms),
  clearInterval: (timer: ClockTimer | undefined) => {
    if (timer !== undefined) clearInterval(timer as NodeJS.Timeout);
  },
});

/**
 * This host's monotonic clock in milliseconds (`performance.now()`): for
 * measuring real durations (latency, a lease's local refresh age), never for
 * deciding by wall time.
 *
 * @example
 * ```ts
 * const started = monotonicNow();
 * await kv.get('pool.build-host');
 * const latencyMs = monotonicNow() - started;
 * ```
 */
export function monotonicNow(): number {
  return performance.now();
}

/**
 * Epoch milliseconds from the monotonic clock (`performance.timeOrigin + performance.now()`).
 *
 * @example
 * ```ts
 * const refreshedAt = monotonicEpochNow(); // does not jump when the wall clock is set
 * ```
 */
export function monotonicEpochNow(): number {
  return performance.timeOrigin + performance.now();
}

/**
 * A real pause on the system clock (a wait on another process or a server).
 *
 * @example
 * ```ts
 * await sleep(50); // let the process holding the lock finish, then poll again
 * ```
 */
export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, Math.max(0, ms)));
}

/**
 * Resolve the `clock` / `now` pair of options: `clock` wins; a bare `now`
 * (the older shorthand) reads time from it and keeps the system timers.
 *
 * @example
 * ```ts
 * const clock = resolveClock(options.clock, options.now); // systemClock when neither is given
 * ```
 */
export function resolveClock(clock: Clock | undefined, now: (() => number) | undefined): Clock {
  if (clock !== undefined) {
    for (const method of [
      'now',
      'setTimeout',
      'clearTimeout',
      'setInterval',
      'clearInterval',
    ] as const) {
      if (typeof clock[method] !== 'function') {
        throw new TypeError(
          `Expected \`clock.${method}\` to be a function, got \`${typeof clock[method]}\``,
        );
      }
    }
    return clock;
  }
  if (now === undefined) return systemClock;
  if (typeof now !== 'function')
    throw new TypeError(`Expected \`now\` to be a function, got \`${typeof now}\``);
  return { ...systemClock, now };
}

/**
 * Resolve after one real turn of the event loop (`setImmediate`): every
 * microtask queued so far, and those they queue, has run by then. The test
 * kit's `TestClock` uses it to let the promise chains a timer starts settle.
 *
 * @example
 * ```ts
 * setImmediate(() => console.log('ran'));
 * await nextTurn(); // 'ran' has been printed
 * ```
 */
export function nextTurn(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}
