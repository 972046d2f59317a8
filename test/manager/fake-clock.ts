/**
 * A small deterministic clock for the manager's tests: virtual time, timers
 * that fire only when the test advances time, in due order.
 */
import type { Clock, ClockTimer } from '../../src/clock.js';

interface Pending {
  id: number;
  at: number;
  every: number | undefined;
  fn: () => void;
  ref: boolean;
}

class Timer implements ClockTimer {
  constructor(readonly pending: Pending) {}
  unref(): ClockTimer {
    this.pending.ref = false;
    return this;
  }
  ref(): ClockTimer {
    this.pending.ref = true;
    return this;
  }
  hasRef(): boolean {
    return this.pending.ref;
  }
}

export class FakeClock implements Clock {
  #now: number;
  #seq = 0;
  readonly #timers = new Map<number, Pending>();

  constructor(start = Date.UTC(2026, 0, 5, 12, 0, 0)) {
    this.#now = start;
  }

  now(): number {
    return this.#now;
  }

  setTimeout(fn: () => void, ms: number): ClockTimer {
    return this.#add(fn, ms, undefined);
  }

  setInterval(fn: () => void, ms: number): ClockTimer {
    return this.#add(fn, ms, Math.max(1, ms));
  }

  clearTimeout(timer: ClockTimer | undefined): void {
    if (timer instanceof Timer) this.#timers.delete(timer.pending.id);
  }

  clearInterval(timer: ClockTimer | undefined): void {
    this.clearTimeout(timer);
  }

  /** Timers pending now. */
  get pending(): number {
    return this.#timers.size;
  }

  /** Timers pending that keep the process alive. */
  get referenced(): number {
    return [...this.#timers.values()].filter((t) => t.ref).length;
  }

  /** Move time forward by `ms`, firing due timers in order, letting promises settle after each. */
  async advance(ms: number): Promise<void> {
    const end = this.#now + ms;
    for (;;) {
      await settle();
      let next: Pending | undefined;
      for (const t of this.#timers.values()) {
        if (t.at <= end && (next === undefined || t.at < next.at)) next = t;
      }
      if (next === undefined) break;
      this.#now = Math.max(this.#now, next.at);
      if (next.every === undefined) this.#timers.delete(next.id);
      else next.at += next.every;
      next.fn();
    }
    this.#now = end;
    await settle();
  }

  /** Set the time without firing timers (for tests that drive `maintain()` by hand). */
  set(epochMs: number): void {
    this.#now = epochMs;
  }

  #add(fn: () => void, ms: number, every: number | undefined): ClockTimer {
    const pending: Pending = {
      id: ++this.#seq,
      at: this.#now + Math.max(0, ms),
      every,
      fn,
      ref: true,
    };
    this.#timers.set(pending.id, pending);
    return new Timer(pending);
  }
}

/** Let every queued promise callback run (a few macrotask turns). */
export async function settle(): Promise<void> {
  for (let i = 0; i < 5; i++) await new Promise<void>((resolve) => setImmediate(resolve));
}
