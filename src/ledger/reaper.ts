/**
 * The periodic reaper behind `PoolLedger.start` and `stop`, shared by ledger
 * backends: an unref'd timer that reaps every registered pool. A failed round
 * is dropped (the next tick retries); nothing is ever thrown from the timer.
 */
import { type Clock, type ClockTimer, systemClock } from '../clock.js';
import { checkAmount } from './checks.js';

/** How often `start()` reaps when no interval is given. */
export const DEFAULT_REAP_INTERVAL_MS = 30_000;

/** One ledger's reaper timer. */
export class Reaper {
  private timer: ClockTimer | undefined;
  private timerClock: Clock | undefined;
  private closed = false;

  /**
   * @param pools - The pools to reap on each tick (read anew every tick).
   * @param reap - Reaps one pool; a rejection is ignored.
   * @param clock - The clock the interval runs on (read when the timer starts).
   */
  constructor(
    private readonly pools: () => Iterable<string>,
    private readonly reap: (pool: string) => Promise<unknown>,
    private readonly clock: () => Clock = () => systemClock,
  ) {}

  /** Reap every `intervalMs`. Idempotent, and a no-op once closed. */
  start(intervalMs: number): void {
    checkAmount('intervalMs', intervalMs);
    if (this.timer || this.closed) return;
    this.timerClock = this.clock();
    this.timer = this.timerClock.setInterval(() => {
      for (const pool of this.pools()) this.reap(pool).catch(() => {});
    }, intervalMs);
    this.timer.unref();
  }

  /** Stop the timer; `start` may run it again. */
  stop(): void {
    this.timerClock?.clearInterval(this.timer);
    this.timer = undefined;
  }

  /** Stop the timer for good (the ledger is closing). */
  close(): void {
    this.closed = true;
    this.stop();
  }
}
