import { DuplicateReservationError } from '../errors/index.js';
import type { ResourceAmount, ResourceCap } from '../resources/types.js';
import {
  capBytes,
  capCount,
  capCpu,
  capExtended,
  capProvides,
  check,
  checkAmount,
  checkId,
  checkScope,
  copyCap,
  type ExtEntries,
  extMax,
  type Held,
  reservationOf,
  type Scope,
  usageOf,
} from './scope.js';
import type { CapReservation, CapReserveResult, CapSnapshot, ScopeUsage } from './types.js';

const OK: CapReserveResult = Object.freeze({ ok: true as const });
/** How many recent reservations the small map holds before they move to the large one. */
const YOUNG_MAX = 256;

/** Whether `name` is among the first `count` entries of `names`. */
function includes(names: readonly string[], count: number, name: string): boolean {
  for (let i = 0; i < count; i++) if (names[i] === name) return true;
  return false;
}

// A class rather than an object literal: V8 moves allocation of a literal
// whose objects survived (10,000 reservations held) straight to the old
// generation, and then every short-lived reservation is garbage there.
class HeldReservation implements Held {
  constructor(
    readonly scopes: Scope[],
    readonly names: string[],
    readonly milli: number,
    readonly bytes: number,
    readonly ext: ExtEntries,
  ) {}
}

/**
 * In-memory usage accounting for named scopes (`global`, `scaler:linux-small`,
 * `pool:host-a`, ...), each with an optional cap on summed requests.
 *
 * - {@link CapTracker.tryReserve} reserves in every scope or in none.
 * - {@link CapTracker.release} is idempotent.
 * - CPU is counted in integer millicores and memory in integer bytes, so usage
 *   always equals the exact sum of live reservations, and releasing everything
 *   returns exactly zero.
 * - Cost per call depends on the number of scopes named, not on how much is held.
 *
 * Not thread-safe across processes: for a pool shared by several processes use
 * the ledger (`scaler-primitives/ledger`).
 *
 * @example
 * ```ts
 * import { CapTracker } from 'scaler-primitives/caps';
 *
 * const caps = new CapTracker({ caps: { global: { maxCpu: 8 }, 'scaler:small': { maxCpu: 2 } } });
 * caps.tryReserve('agent-1', ['global', 'scaler:small'], { cpus: 1.5, memBytes: 0 }); // { ok: true }
 * caps.tryReserve('agent-2', ['global', 'scaler:small'], { cpus: 1, memBytes: 0 });
 * // { ok: false, scope: 'scaler:small', dimension: 'cpu', requested: 1, used: 1.5, max: 2, neverFits: false }
 * caps.release('agent-1');
 * ```
 */
export class CapTracker {
  readonly #scopes = new Map<string, Scope>();
  // Live reservations in two maps: the recent ones in a small map, where most
  // come and go, moved into the large one in blocks of YOUNG_MAX. A large map
  // that every short reservation passes through fills with deleted entries
  // and reallocates its table again and again. Snapshot order: old, then young.
  #young = new Map<string, Held>();
  readonly #old = new Map<string, Held>();

  /**
   * @param options - `caps`: initial caps by scope name.
   */
  constructor(options: { caps?: Record<string, ResourceCap | undefined> } = {}) {
    for (const [scope, cap] of Object.entries(options.caps ?? {})) this.setCap(scope, cap);
  }

  /**
   * Set (or with `undefined`, remove) the cap of a scope. Lowering a cap below the
   * current usage keeps the existing reservations and refuses new ones until usage
   * falls below it.
   *
   * @param scope - The scope name.
   * @param cap - The new cap; an absent field means no cap in that dimension.
   * @throws TypeError for a non-string scope or a cap with negative or non-finite values.
   */
  setCap(scope: string, cap: ResourceCap | undefined): void {
    checkScope(scope);
    const maxMilli = cap?.maxCpu === undefined ? undefined : capCpu(cap.maxCpu);
    const maxBytes = cap?.maxMemoryBytes === undefined ? undefined : capBytes(cap.maxMemoryBytes);
    const maxAgents =
      cap?.maxAgents === undefined ? undefined : capCount('maxAgents', cap.maxAgents);
    const maxExt = cap === undefined ? undefined : capExtended(cap);
    const provides = cap === undefined ? undefined : capProvides(cap);
    const state = this.#scope(scope);
    state.maxMilli = maxMilli;
    state.maxBytes = maxBytes;
    state.maxAgents = maxAgents;
    state.maxExt = maxExt;
    state.provides = provides;
    state.cap = cap === undefined ? undefined : copyCap(cap);
    this.#forgetIfIdle(scope, state);
  }

  /**
   * The cap of a scope, if it has one.
   *
   * @param scope - The scope name.
   */
  getCap(scope: string): ResourceCap | undefined {
    const cap = this.#scopes.get(scope)?.cap;
    return cap === undefined ? undefined : copyCap(cap);
  }

  /**
   * Reserve `requests` under `id` in every scope of `scopes`, or in none.
   *
   * @param id - A unique reservation id (e.g. the agent id).
   * @param scopes - The scopes to count it in; duplicates count once.
   * @param requests - CPU in cores, memory in whole bytes, extended resources in whole counts.
   * @returns `{ ok: true }`, or the first refusal (scope order; CPU, memory,
   *   agents, then extended resources in the request's order).
   * @throws `DuplicateReservationError` when `id` is already held: a second
   *   reservation under one id would be counted twice and released once.
   * @throws TypeError for invalid arguments.
   */
  tryReserve(id: string, scopes: readonly string[], requests: ResourceAmount): CapReserveResult {
    checkId(id);
    const { milli, bytes, ext } = checkAmount(requests);
    if (!Array.isArray(scopes)) {
      throw new TypeError(
        `Expected \`scopes\` to be an array of strings, got \`${typeof scopes}\``,
      );
    }
    if (this.#young.has(id) || this.#old.has(id)) {
      throw new DuplicateReservationError(
        id,
        `Reservation "${id}" is already held; release it before reserving it again.`,
      );
    }
    // Exact-size arrays (trimmed below when a scope repeats): one small
    // allocation each instead of a growing backing store.
    const states: Scope[] = new Array(scopes.length);
    const names: string[] = new Array(scopes.length);
    let count = 0;
    for (const name of scopes) {
      checkScope(name);
      if (includes(names, count, name)) continue;
      const state = this.#scopes.get(name) ?? this.#scope(name);
      const refusal = check(name, state, milli, bytes, ext);
      if (refusal) {
        for (let i = 0; i < count; i++) this.#forgetIfIdle(names[i]!, states[i]!);
        this.#forgetIfIdle(name, state);
        return refusal;
      }
      states[count] = state;
      names[count] = name;
      count++;
    }
    if (count < scopes.length) {
      states.length = count;
      names.length = count;
    }
    for (const state of states) {
      state.milli += milli;
      state.bytes += bytes;
      state.count++;
      if (ext !== undefined) {
        state.ext ??= new Map();
        for (const [name, n] of ext) state.ext.set(name, (state.ext.get(name) ?? 0) + n);
      }
    }
    if (this.#young.size >= YOUNG_MAX) {
      for (const [key, value] of this.#young) this.#old.set(key, value);
      this.#young = new Map();
    }
    this.#young.set(id, new HeldReservation(states, names, milli, bytes, ext));
    return OK;
  }

  /**
   * Release the reservation held under `id`. Idempotent: releasing an id that is
   * not held does nothing.
   *
   * @param id - The reservation id.
   * @returns What was released, or `undefined` when nothing was held under `id`.
   */
  release(id: string): CapReservation | undefined {
    let held = this.#young.get(id);
    if (held !== undefined) {
      this.#young.delete(id);
    } else {
      held = this.#old.get(id);
      if (held === undefined) return undefined;
      this.#old.delete(id);
    }
    for (const [i, state] of held.scopes.entries()) {
      state.milli -= held.milli;
      state.bytes -= held.bytes;
      state.count--;
      if (held.ext !== undefined && state.ext !== undefined) {
        for (const [name, n] of held.ext) {
          const left = (state.ext.get(name) ?? 0) - n;
          if (left === 0) state.ext.delete(name);
          else state.ext.set(name, left);
        }
        if (state.ext.size === 0) state.ext = undefined;
      }
      this.#forgetIfIdle(held.names[i]!, state);
    }
    return reservationOf(id, held, true);
  }

  /**
   * True when `id` is held.
   *
   * @param id - The reservation id.
   */
  has(id: string): boolean {
    return this.#young.has(id) || this.#old.has(id);
  }

  /**
   * Current usage of a scope (zero for a scope never used).
   *
   * @param scope - The scope name.
   */
  usage(scope: string): ScopeUsage {
    const state = this.#scopes.get(scope);
    if (state === undefined) return { cpus: 0, memBytes: 0, reservations: 0 };
    return usageOf(state);
  }

  /**
   * True when `requests` exceed a cap of one of `scopes` even with that scope
   * empty, so the caller can fail fast instead of waiting forever.
   *
   * @param scopes - The scopes the request would be counted in.
   * @param requests - CPU in cores, memory in whole bytes, extended resources in whole counts.
   */
  neverFits(scopes: readonly string[], requests: ResourceAmount): boolean {
    const { milli, bytes, ext } = checkAmount(requests);
    for (const name of scopes) {
      const state = this.#scopes.get(name);
      if (state === undefined) continue;
      if (state.maxMilli !== undefined && milli > state.maxMilli) return true;
      if (state.maxBytes !== undefined && bytes > state.maxBytes) return true;
      if (state.maxAgents !== undefined && state.maxAgents < 1) return true;
      if (ext !== undefined && state.cap !== undefined) {
        for (const [resource, n] of ext) {
          const max = extMax(state, resource);
          if (max !== undefined && n > max) return true;
        }
      }
    }
    return false;
  }

  /** A copy of every scope (with its cap and usage) and every live reservation. */
  snapshot(): CapSnapshot {
    const scopes: CapSnapshot['scopes'] = {};
    for (const [name, state] of this.#scopes) {
      scopes[name] = {
        cap: state.cap === undefined ? undefined : copyCap(state.cap),
        usage: usageOf(state),
      };
    }
    const reservations = [...this.#old, ...this.#young].map(([id, held]) =>
      reservationOf(id, held),
    );
    return { scopes, reservations };
  }

  #scope(name: string): Scope {
    let state = this.#scopes.get(name);
    if (state === undefined) {
      state = {
        milli: 0,
        bytes: 0,
        count: 0,
        maxMilli: undefined,
        maxBytes: undefined,
        maxAgents: undefined,
        ext: undefined,
        maxExt: undefined,
        provides: undefined,
        cap: undefined,
      };
      this.#scopes.set(name, state);
    }
    return state;
  }

  // Scopes without a cap and without reservations are dropped, so scope names
  // that come and go (one per agent, say) do not accumulate.
  #forgetIfIdle(name: string, state: Scope): void {
    if (state.count === 0 && state.cap === undefined) this.#scopes.delete(name);
  }
}
