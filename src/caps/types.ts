/**
 * What the cap tracker answers and takes: refusals and grants, reservations,
 * usage and snapshots.
 */
import type { CapDimension } from '../resources/cap-fields.js';
import type { ResourceCap } from '../resources/types.js';

export type { CapDimension };

/** Why {@link CapTracker.tryReserve} refused: the first scope and dimension that did not fit. */
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

/** The outcome of {@link CapTracker.tryReserve}: granted (`{ ok: true }`) or refused. */
export type CapReserveResult =
  | {
      /** Granted: held in every scope named. */
      ok: true;
    }
  | CapRefusal;

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
  /** Extended resources held, by name (absent when none). */
  extended?: Record<string, number>;
}

/** Usage of one scope. */
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

/** A point-in-time copy of the tracker's state. */
export interface CapSnapshot {
  /** Every scope with a cap or with live reservations: its cap, if it has one, and its usage. */
  scopes: Record<
    string,
    {
      /** The scope's cap, if it has one. */
      cap: ResourceCap | undefined;
      /** The scope's usage. */
      usage: ScopeUsage;
    }
  >;
  /** Every live reservation. */
  reservations: CapReservation[];
}
