import { DuplicateReservationError } from '../errors.js';
import { capToMillicores, coresToMillicores, MAX_CPU_CORES } from '../resources/quantity.js';
import type { ResourceAmount, ResourceCap } from '../resources/types.js';

/** The two dimensions a cap can refuse on. */
export type CapDimension = 'cpu' | 'memory';

/** Why {@link CapTracker.tryReserve} refused: the first scope and dimension that did not fit. */
export interface CapRefusal {
  /** Always `false`. */
  ok: false;
  /** The scope whose cap refused. */
  scope: string;
  /** The dimension that did not fit. */
  dimension: CapDimension;
  /** What was asked for in that dimension (cores or bytes). */
  requested: number;
  /** What the scope already holds (cores or bytes). */
  used: number;
  /** The scope's cap (cores or bytes). */
  max: number;
  /** True when the request exceeds the cap even with the scope empty: waiting will not help. */
  neverFits: boolean;
}

/** The outcome of {@link CapTracker.tryReserve}. */
export type CapReserveResult = CapGranted | CapRefusal;

/** A granted reservation. */
export interface CapGranted {
  /** Always `true`. */
  ok: true;
}

/** What {@link CapTracker.release} released. */
export interface CapReservation {
  /** The reservation id. */
  id: string;
  /** The scopes it was held in. */
  scopes: readonly string[];
  /** CPU held, in cores. */
  cpus: number;
  /** Memory held, in bytes. */
  memBytes: number;
}

/** Usage of one scope. */
export interface ScopeUsage {
  /** Summed CPU of live reservations, in cores. */
  cpus: number;
  /** Summed memory of live reservations, in bytes. */
  memBytes: number;
  /** How many live reservations hold this scope. */
  reservations: number;
}

/** A point-in-time copy of the tracker's state. */
export interface CapSnapshot {
  /** Every scope with a cap or with live reservations. */
  scopes: Record<string, ScopeSnapshot>;
  /** Every live reservation. */
  reservations: CapReservation[];
}

/** One scope in a {@link CapSnapshot}. */
export interface ScopeSnapshot {
  /** The scope's cap, if it has one. */
  cap: ResourceCap | undefined;
  /** The scope's usage. */
  usage: ScopeUsage;
}

/** Options of the {@link CapTracker} constructor. */
export interface CapTrackerOptions {
  /** Initial caps by scope name. */
  caps?: Record<string, ResourceCap | undefined>;
}

interface Scope {
  // Integer millicores and bytes: sums of integers never drift.
  milli: number;
  bytes: number;
  count: number;
  maxMilli: number | undefined;
  maxBytes: number | undefined;
  cap: ResourceCap | undefined;
}

const OK: CapGranted = Object.freeze({ ok: true as const });

interface Held {
  scopes: Scope[];
  names: string[];
  milli: number;
  bytes: number;
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
 * const caps = new CapTracker({ caps: { global: { maxCpu: 8 }, 'scaler:small': { maxCpu: 2 } } });
 * caps.tryReserve('agent-1', ['global', 'scaler:small'], { cpus: 1.5, memBytes: 0 }); // { ok: true }
 * caps.tryReserve('agent-2', ['global', 'scaler:small'], { cpus: 1, memBytes: 0 });
 * // { ok: false, scope: 'scaler:small', dimension: 'cpu', requested: 1, used: 1.5, max: 2, neverFits: false }
 * caps.release('agent-1');
 * ```
 */
export class CapTracker {
  readonly #scopes = new Map<string, Scope>();
  readonly #held = new Map<string, Held>();

  /**
   * @param options - Initial caps by scope.
   */
  constructor(options: CapTrackerOptions = {}) {
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
    const state = this.#scope(scope);
    state.maxMilli = maxMilli;
    state.maxBytes = maxBytes;
    state.cap = cap === undefined ? undefined : { ...cap };
    this.#forgetIfIdle(scope, state);
  }

  /**
   * The cap of a scope, if it has one.
   *
   * @param scope - The scope name.
   */
  getCap(scope: string): ResourceCap | undefined {
    const cap = this.#scopes.get(scope)?.cap;
    return cap === undefined ? undefined : { ...cap };
  }

  /**
   * Reserve `requests` under `id` in every scope of `scopes`, or in none.
   *
   * @param id - A unique reservation id (e.g. the agent id).
   * @param scopes - The scopes to count it in; duplicates count once.
   * @param requests - CPU in cores and memory in whole bytes.
   * @returns `{ ok: true }`, or the first refusal (scope order, CPU before memory).
   * @throws {@link DuplicateReservationError} when `id` is already held: a second
   *   reservation under one id would be counted twice and released once.
   * @throws TypeError for invalid arguments.
   */
  tryReserve(id: string, scopes: readonly string[], requests: ResourceAmount): CapReserveResult {
    checkId(id);
    const { milli, bytes } = checkAmount(requests);
    if (!Array.isArray(scopes)) {
      throw new TypeError(
        `Expected \`scopes\` to be an array of strings, got \`${typeof scopes}\``,
      );
    }
    if (this.#held.has(id)) {
      throw new DuplicateReservationError(
        id,
        `Reservation "${id}" is already held; release it before reserving it again.`,
      );
    }
    const states: Scope[] = [];
    const names: string[] = [];
    for (const name of scopes) {
      checkScope(name);
      if (names.includes(name)) continue;
      const state = this.#scopes.get(name) ?? this.#scope(name);
      const refusal = check(name, state, milli, bytes);
      if (refusal) {
        for (const [i, n] of names.entries()) this.#forgetIfIdle(n, states[i]!);
        this.#forgetIfIdle(name, state);
        return refusal;
      }
      states.push(state);
      names.push(name);
    }
    for (const state of states) {
      state.milli += milli;
      state.bytes += bytes;
      state.count++;
    }
    this.#held.set(id, { scopes: states, names, milli, bytes });
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
    const held = this.#held.get(id);
    if (held === undefined) return undefined;
    this.#held.delete(id);
    for (const [i, state] of held.scopes.entries()) {
      state.milli -= held.milli;
      state.bytes -= held.bytes;
      state.count--;
      this.#forgetIfIdle(held.names[i]!, state);
    }
    return { id, scopes: held.names, cpus: held.milli / 1000, memBytes: held.bytes };
  }

  /**
   * True when `id` is held.
   *
   * @param id - The reservation id.
   */
  has(id: string): boolean {
    return this.#held.has(id);
  }

  /**
   * Current usage of a scope (zero for a scope never used).
   *
   * @param scope - The scope name.
   */
  usage(scope: string): ScopeUsage {
    const state = this.#scopes.get(scope);
    if (state === undefined) return { cpus: 0, memBytes: 0, reservations: 0 };
    return { cpus: state.milli / 1000, memBytes: state.bytes, reservations: state.count };
  }

  /**
   * True when `requests` exceed a cap of one of `scopes` even with that scope
   * empty, so the caller can fail fast instead of waiting forever.
   *
   * @param scopes - The scopes the request would be counted in.
   * @param requests - CPU in cores and memory in whole bytes.
   */
  neverFits(scopes: readonly string[], requests: ResourceAmount): boolean {
    const { milli, bytes } = checkAmount(requests);
    for (const name of scopes) {
      const state = this.#scopes.get(name);
      if (state === undefined) continue;
      if (state.maxMilli !== undefined && milli > state.maxMilli) return true;
      if (state.maxBytes !== undefined && bytes > state.maxBytes) return true;
    }
    return false;
  }

  /** A copy of every scope (with its cap and usage) and every live reservation. */
  snapshot(): CapSnapshot {
    const scopes: CapSnapshot['scopes'] = {};
    for (const [name, state] of this.#scopes) {
      scopes[name] = {
        cap: state.cap === undefined ? undefined : { ...state.cap },
        usage: { cpus: state.milli / 1000, memBytes: state.bytes, reservations: state.count },
      };
    }
    const reservations = [...this.#held].map(([id, held]) => ({
      id,
      scopes: [...held.names],
      cpus: held.milli / 1000,
      memBytes: held.bytes,
    }));
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

function check(name: string, state: Scope, milli: number, bytes: number): CapRefusal | undefined {
  if (state.maxMilli !== undefined && state.milli + milli > state.maxMilli) {
    return {
      ok: false,
      scope: name,
      dimension: 'cpu',
      requested: milli / 1000,
      used: state.milli / 1000,
      max: state.maxMilli / 1000,
      neverFits: milli > state.maxMilli,
    };
  }
  if (state.maxBytes !== undefined && state.bytes + bytes > state.maxBytes) {
    return {
      ok: false,
      scope: name,
      dimension: 'memory',
      requested: bytes,
      used: state.bytes,
      max: state.maxBytes,
      neverFits: bytes > state.maxBytes,
    };
  }
  return undefined;
}

function checkId(id: string): void {
  if (typeof id !== 'string' || id.length === 0) {
    throw new TypeError(`Expected \`id\` to be a non-empty string, got \`${String(id)}\``);
  }
}

function checkScope(scope: string): void {
  if (typeof scope !== 'string' || scope.length === 0) {
    throw new TypeError(`Expected a scope to be a non-empty string, got \`${String(scope)}\``);
  }
}

function checkAmount(requests: ResourceAmount): { milli: number; bytes: number } {
  if (typeof requests !== 'object' || requests === null) {
    throw new TypeError(
      `Expected \`requests\` to be { cpus, memBytes }, got \`${String(requests)}\``,
    );
  }
  const { cpus, memBytes } = requests;
  if (typeof cpus !== 'number' || !Number.isFinite(cpus) || cpus < 0 || cpus > MAX_CPU_CORES) {
    throw new TypeError(`Expected \`cpus\` to be a finite number >= 0, got \`${String(cpus)}\``);
  }
  if (typeof memBytes !== 'number' || !Number.isSafeInteger(memBytes) || memBytes < 0) {
    throw new TypeError(
      `Expected \`memBytes\` to be a safe integer >= 0, got \`${String(memBytes)}\``,
    );
  }
  return { milli: coresToMillicores(cpus), bytes: memBytes };
}

function capCpu(maxCpu: number): number {
  if (typeof maxCpu !== 'number' || !Number.isFinite(maxCpu) || maxCpu < 0) {
    throw new TypeError(
      `Expected \`maxCpu\` to be a finite number >= 0, got \`${String(maxCpu)}\``,
    );
  }
  // A cap rounds down: it never admits more than written.
  return capToMillicores(maxCpu);
}

function capBytes(maxMemoryBytes: number): number {
  if (
    typeof maxMemoryBytes !== 'number' ||
    !Number.isSafeInteger(maxMemoryBytes) ||
    maxMemoryBytes < 0
  ) {
    throw new TypeError(
      `Expected \`maxMemoryBytes\` to be a safe integer >= 0, got \`${String(maxMemoryBytes)}\``,
    );
  }
  return maxMemoryBytes;
}
