/**
 * The lease-health rule every ledger keeps (file, NATS, memory), in one place:
 * a lease is renewed every third of its window; it is `held` until two thirds
 * of the window pass without a confirmed renewal, `at-risk` from then, and
 * `lost` at the deadline (`confirmedAt + leaseMs`). A gap of more than half a
 * window between confirmations breaks the streak an instance judges peers
 * from. {@link LeaseEvents} announces the transitions, each once and in order.
 *
 * How a renewal is made and confirmed (a file's mtime, a compare-and-set on a
 * NATS key, a call on a memory store) and when the timers fire stay with each
 * ledger; the thresholds and the events are these.
 */
import type { LeaseEvent, LeaseHealth, LeaseInfo } from './types.js';

/** The health of a lease `leaseMs` long whose last renewal was confirmed at `confirmedAt`, at `now`. */
export function healthAt(
  confirmedAt: number,
  leaseMs: number,
  now: number,
): Exclude<LeaseHealth, 'none'> {
  if (now < atRiskAt(confirmedAt, leaseMs)) return 'held';
  return now < deadlineOf(confirmedAt, leaseMs) ? 'at-risk' : 'lost';
}

/** The renewal period: a third of the window. */
export function renewEveryMs(leaseMs: number): number {
  return leaseMs / 3;
}

/** Whether a renewal confirmed `ageMs` ago is too old to write under (older than a third of the window). */
export function renewDue(ageMs: number, leaseMs: number): boolean {
  return ageMs > renewEveryMs(leaseMs);
}

/** The instant a lease confirmed at `confirmedAt` becomes `at-risk`: two thirds of the window later. */
export function atRiskAt(confirmedAt: number, leaseMs: number): number {
  return confirmedAt + (2 * leaseMs) / 3;
}

/** The deadline of a lease confirmed at `confirmedAt`: it is `lost` from then. */
export function deadlineOf(confirmedAt: number, leaseMs: number): number {
  return confirmedAt + leaseMs;
}

/** Whether a gap of `gapMs` between confirmations breaks the healthy streak (more than half the window). */
export function breaksStreak(gapMs: number, leaseMs: number): boolean {
  return gapMs > leaseMs / 2;
}

/**
 * The lease events of one instance: its listeners, the health the events last
 * announced, and the rule that each transition (`lease-at-risk`, then
 * `lease-lost`) is announced once and in order, and `lease-renewed` once when
 * a renewal is confirmed after either.
 */
export class LeaseEvents {
  readonly #listeners = new Set<(event: LeaseEvent) => void>();
  readonly #info: (health: Exclude<LeaseHealth, 'none'>) => LeaseInfo;
  readonly #counted: ((type: LeaseEvent['type']) => void) | undefined;
  #reported: Exclude<LeaseHealth, 'none'> = 'held';

  /**
   * @param info - The lease as of now, put in each event (given the health the event announces).
   * @param counted - Called with each event's type (telemetry).
   */
  constructor(
    info: (health: Exclude<LeaseHealth, 'none'>) => LeaseInfo,
    counted?: (type: LeaseEvent['type']) => void,
  ) {
    this.#info = info;
    this.#counted = counted;
  }

  /** The health the events last announced (`held` before any). */
  get reported(): Exclude<LeaseHealth, 'none'> {
    return this.#reported;
  }

  /**
   * Call `listener` on each event. Listener errors are caught.
   *
   * @returns The function that removes the listener.
   * @throws TypeError when `listener` is not a function.
   */
  listen(listener: (event: LeaseEvent) => void): () => void {
    if (typeof listener !== 'function') {
      throw new TypeError(`Expected \`listener\` to be a function, got \`${typeof listener}\``);
    }
    // A wrapper per registration: the same function added twice is called twice.
    const entry = (event: LeaseEvent) => listener(event);
    this.#listeners.add(entry);
    return () => {
      this.#listeners.delete(entry);
    };
  }

  /** Remove every listener. */
  clear(): void {
    this.#listeners.clear();
  }

  /** Announce each transition up to `health` not announced yet, in order. */
  report(health: LeaseHealth, error?: unknown): void {
    if (health === 'held' || health === 'none') return;
    if (this.#reported === 'held') {
      this.#reported = 'at-risk';
      this.#emit('lease-at-risk', 'at-risk', error);
    }
    if (health === 'lost' && this.#reported === 'at-risk') {
      this.#reported = 'lost';
      this.#emit('lease-lost', 'lost', error);
    }
  }

  /** The lease is lost at once, whatever its deadline says (fenced, taken over). */
  lost(error?: unknown): void {
    if (this.#reported === 'lost') return;
    this.#reported = 'lost';
    this.#emit('lease-lost', 'lost', error);
  }

  /** A renewal was confirmed: `lease-renewed` when the events had said `at-risk` or `lost`. */
  renewed(error?: unknown): void {
    if (this.#reported === 'held') return;
    this.#reported = 'held';
    this.#emit('lease-renewed', 'held', error);
  }

  #emit(type: LeaseEvent['type'], health: Exclude<LeaseHealth, 'none'>, error: unknown): void {
    this.#counted?.(type);
    const event: LeaseEvent = { type, lease: this.#info(health) };
    if (error !== undefined) event.error = error;
    for (const listener of [...this.#listeners]) {
      try {
        listener(event);
      } catch {
        // A listener's failure is its own; the lease goes on.
      }
    }
  }
}
