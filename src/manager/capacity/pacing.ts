import type { FleetCore } from '../core.js';
import type { ScalerState } from '../spawning/scalers.js';
import type { BackoffStatus, CapacityLimit } from '../types.js';

const MINUTE_MS = 60_000;
/** When only a concurrency slot is missing, ask again after this long. */
const CONCURRENT_RETRY_MS = 1000;

interface PaceState {
  /** Start times of spawns within the last minute, oldest first. */
  starts: number[];
  failures: number;
  lastError: unknown;
  /** Epoch ms until which the backoff is open (0: closed). */
  until: number;
  opened: boolean;
}

/**
 * Spawn pacing and failure backoff, per scaler: `maxConcurrentSpawns`,
 * `maxSpawnsPerMinute`, and an exponential backoff with full jitter that
 * consecutive spawn failures (or agents that never register) open and a
 * registered agent closes. While half-open (the backoff expired, failures
 * not yet reset) one probe spawn at a time goes through. One scaler's state
 * never refuses another's requests.
 * @internal
 */
export class Pacing {
  readonly #core: FleetCore;
  readonly #state = new Map<string, PaceState>();

  constructor(core: FleetCore) {
    this.#core = core;
  }

  #of(scaler: ScalerState): PaceState {
    let state = this.#state.get(scaler.name);
    if (state === undefined) {
      state = { starts: [], failures: 0, lastError: undefined, until: 0, opened: false };
      this.#state.set(scaler.name, state);
    }
    return state;
  }

  /** The pacing or backoff rule that refuses a spawn at `scaler` now, if any. */
  check(scaler: ScalerState): CapacityLimit | undefined {
    const now = this.#core.now();
    const state = this.#of(scaler);
    const backoff = scaler.config.spawnBackoff ?? DEFAULT_BACKOFF;
    if (state.failures >= backoff.failureThreshold) {
      if (now < state.until) {
        return this.#backingOff(scaler, state, state.until - now);
      }
      // Half-open: one probe at a time.
      if (this.#spawning(scaler) > 0) {
        return this.#backingOff(scaler, state, Math.min(backoff.initialMs, backoff.maxMs));
      }
    }
    const concurrent = scaler.config.maxConcurrentSpawns;
    if (concurrent !== undefined) {
      const used = this.#spawning(scaler);
      if (used >= concurrent) {
        return {
          limit: 'spawn-rate',
          scaler: scaler.name,
          window: 'concurrent',
          used,
          max: concurrent,
          retryAfterMs: CONCURRENT_RETRY_MS,
          neverFits: false,
        };
      }
    }
    const perMinute = scaler.config.maxSpawnsPerMinute;
    if (perMinute !== undefined) {
      while (state.starts.length > 0 && state.starts[0]! <= now - MINUTE_MS) state.starts.shift();
      if (state.starts.length >= perMinute) {
        return {
          limit: 'spawn-rate',
          scaler: scaler.name,
          window: 'minute',
          used: state.starts.length,
          max: perMinute,
          retryAfterMs: Math.max(1, state.starts[0]! + MINUTE_MS - now),
          neverFits: false,
        };
      }
    }
    return undefined;
  }

  /** A spawn of `scaler` started (its capacity was reserved). */
  started(scaler: ScalerState): void {
    if (scaler.config.maxSpawnsPerMinute === undefined) return;
    this.#of(scaler).starts.push(this.#core.now());
  }

  /** A spawn of `scaler` failed, or its agent never registered. */
  failed(scaler: ScalerState, error: unknown): void {
    const state = this.#of(scaler);
    const backoff = scaler.config.spawnBackoff ?? DEFAULT_BACKOFF;
    state.failures++;
    state.lastError = error;
    if (state.failures < backoff.failureThreshold) return;
    const exponent = Math.min(30, state.failures - backoff.failureThreshold);
    const bound = Math.min(backoff.maxMs, backoff.initialMs * 2 ** exponent);
    const delay = Math.floor(this.#core.options.random() * bound);
    state.until = this.#core.now() + delay;
    state.opened = true;
    this.#core.emitGeneral(
      scaler.name,
      'backoff-opened',
      `${scaler.name} failed ${state.failures} spawn(s) in a row; new spawns wait ${delay} ms`,
      { failures: state.failures, retryAfterMs: delay, error },
    );
  }

  /** An agent of `scaler` registered: the backoff resets. */
  succeeded(scaler: ScalerState): void {
    const state = this.#state.get(scaler.name);
    if (state === undefined || state.failures === 0) return;
    const wasOpen = state.opened;
    state.failures = 0;
    state.until = 0;
    state.opened = false;
    state.lastError = undefined;
    if (wasOpen) {
      this.#core.emitGeneral(scaler.name, 'backoff-closed', `${scaler.name} spawns again`, {});
    }
  }

  /** The backoff part of the scaler's status, when failures were counted. */
  status(scaler: ScalerState): BackoffStatus | undefined {
    const state = this.#state.get(scaler.name);
    if (state === undefined || state.failures === 0) return undefined;
    const open = state.opened && this.#core.now() < state.until;
    const status: BackoffStatus = { failures: state.failures, open, lastError: state.lastError };
    if (open) status.until = state.until;
    return status;
  }

  /** A retired scaler forgets its pacing. */
  forget(name: string): void {
    this.#state.delete(name);
  }

  #spawning(scaler: ScalerState): number {
    let n = 0;
    for (const id of scaler.agents) {
      if (this.#core.book.get(id)?.state === 'spawning') n++;
    }
    return n;
  }

  #backingOff(scaler: ScalerState, state: PaceState, retryAfterMs: number): CapacityLimit {
    return {
      limit: 'backing-off',
      scaler: scaler.name,
      failures: state.failures,
      retryAfterMs: Math.max(1, retryAfterMs),
      lastError: state.lastError,
      neverFits: false,
    };
  }
}

const DEFAULT_BACKOFF = { failureThreshold: 3, initialMs: 1000, maxMs: 300_000 };
