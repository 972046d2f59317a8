/**
 * What the cap tracker answers and takes: refusals and grants, reservations,
 * usage and snapshots, and the constructor's options.
 */
import type { ExtendedResourceName } from '../resources/names.js';
import type { ResourceCap } from '../resources/types.js';

/**
 * The dimensions a cap can refuse on: CPU, memory, the number of reservations
 * (`agents`), or an extended resource by name (`nvidia.com/gpu`).
 *
 * @example
 * ```ts
 * import type { CapDimension, CapTracker } from 'scaler-primitives/caps';
 *
 * declare const caps: CapTracker;
 * const result = caps.tryReserve('agent-1', ['global'], { cpus: 1, memBytes: 0 });
 * if (!result.ok) {
 *   const dimension: CapDimension = result.dimension; // 'cpu' | 'memory' | 'agents' | 'nvidia.com/gpu' ...
 *   console.log(`${result.scope} is full on ${dimension}`);
 * }
 * ```
 */
export type CapDimension = 'cpu' | 'memory' | 'agents' | ExtendedResourceName;

/**
 * Why {@link CapTracker.tryReserve} refused: the first scope and dimension that did not fit.
 *
 * @example
 * ```ts
 * import type { CapRefusal, CapTracker } from 'scaler-primitives/caps';
 *
 * declare const caps: CapTracker;
 * const result = caps.tryReserve('agent-9', ['global', 'scaler:small'], { cpus: 4, memBytes: 0 });
 * if (!result.ok) {
 *   const refusal: CapRefusal = result;
 *   if (refusal.neverFits) console.log(`${refusal.scope} can never hold ${refusal.requested} (max ${refusal.max})`);
 *   else console.log(`wait: ${refusal.used} of ${refusal.max} used in ${refusal.scope}`);
 * }
 * ```
 */
export interface CapRefusal {
  /** Always `false`. */
  ok: false;
  /** The scope whose cap refused. */
  scope: string;
  /** The dimension that did not fit. */
  dimension: CapDimension;
  /** What was asked for in that dimension (cores, bytes, agents or a count). */
  requested: number;
  /** What the scope already holds (cores, bytes, agents or a count). */
  used: number;
  /**
   * The scope's cap (cores, bytes, agents or a count). For an extended resource
   * that a capped scope neither caps nor `provides`, 0: the scope has none of it.
   */
  max: number;
  /** True when the request exceeds the cap even with the scope empty: waiting will not help. */
  neverFits: boolean;
}

/**
 * The outcome of {@link CapTracker.tryReserve}.
 *
 * @example
 * ```ts
 * import type { CapReserveResult, CapTracker } from 'scaler-primitives/caps';
 *
 * declare const caps: CapTracker;
 * const result: CapReserveResult = caps.tryReserve('agent-1', ['global'], { cpus: 1, memBytes: 2 ** 30 });
 * console.log(result.ok ? 'reserved' : `refused by ${result.scope} on ${result.dimension}`);
 * ```
 */
export type CapReserveResult = CapGranted | CapRefusal;

/**
 * A granted reservation.
 *
 * @example
 * ```ts
 * import type { CapGranted, CapRefusal, CapTracker } from 'scaler-primitives/caps';
 *
 * declare const caps: CapTracker;
 * const granted: CapGranted | CapRefusal = caps.tryReserve('agent-1', ['global'], { cpus: 1, memBytes: 0 });
 * if (granted.ok) console.log('reserved in every scope named');
 * ```
 */
export interface CapGranted {
  /** Always `true`. */
  ok: true;
}

/**
 * What {@link CapTracker.release} released.
 *
 * @example
 * ```ts
 * import type { CapReservation, CapTracker } from 'scaler-primitives/caps';
 *
 * declare const caps: CapTracker;
 * const released: CapReservation | undefined = caps.release('agent-1');
 * if (released) console.log(`freed ${released.cpus} cores in ${released.scopes.join(', ')}`);
 * ```
 */
export interface CapReservation {
  /** The reservation id. */
  id: string;
  /** The scopes it was held in. */
  scopes: readonly string[];
  /** CPU held, in cores. */
  cpus: number;
  /** Memory held, in bytes. */
  memBytes: number;
  /** Extended resources held, by name (absent when none). */
  extended?: Record<string, number>;
}

/**
 * Usage of one scope.
 *
 * @example
 * ```ts
 * import type { CapTracker, ScopeUsage } from 'scaler-primitives/caps';
 *
 * declare const caps: CapTracker;
 * const usage: ScopeUsage = caps.usage('global');
 * console.log(`${usage.reservations} agents hold ${usage.cpus} cores and ${usage.memBytes} bytes`);
 * ```
 */
export interface ScopeUsage {
  /** Summed CPU of live reservations, in cores. */
  cpus: number;
  /** Summed memory of live reservations, in bytes. */
  memBytes: number;
  /** How many live reservations hold this scope. */
  reservations: number;
  /** Summed extended resources of live reservations, by name (absent when none). */
  extended?: Record<string, number>;
}

/**
 * A point-in-time copy of the tracker's state.
 *
 * @example
 * ```ts
 * import type { CapSnapshot, CapTracker } from 'scaler-primitives/caps';
 *
 * declare const caps: CapTracker;
 * const snapshot: CapSnapshot = caps.snapshot();
 * for (const r of snapshot.reservations) console.log(r.id, r.scopes, r.cpus, r.memBytes);
 * ```
 */
export interface CapSnapshot {
  /** Every scope with a cap or with live reservations. */
  scopes: Record<string, ScopeSnapshot>;
  /** Every live reservation. */
  reservations: CapReservation[];
}

/**
 * One scope in a {@link CapSnapshot}.
 *
 * @example
 * ```ts
 * import type { CapTracker, ScopeSnapshot } from 'scaler-primitives/caps';
 *
 * declare const caps: CapTracker;
 * const global: ScopeSnapshot | undefined = caps.snapshot().scopes.global;
 * console.log(global?.cap?.maxCpu, global?.usage.cpus);
 * ```
 */
export interface ScopeSnapshot {
  /** The scope's cap, if it has one. */
  cap: ResourceCap | undefined;
  /** The scope's usage. */
  usage: ScopeUsage;
}

/**
 * Options of the {@link CapTracker} constructor.
 *
 * @example
 * ```ts
 * import { CapTracker, type CapTrackerOptions } from 'scaler-primitives/caps';
 *
 * const options: CapTrackerOptions = {
 *   caps: { global: { maxCpu: 16, maxMemoryBytes: 64 * 2 ** 30 }, 'scaler:small': { maxAgents: 4 } },
 * };
 * const caps = new CapTracker(options);
 * ```
 */
export interface CapTrackerOptions {
  /** Initial caps by scope name. */
  caps?: Record<string, ResourceCap | undefined>;
}
