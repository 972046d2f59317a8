/**
 * Cap math: per-scaler, per-orchestrator and per-pool caps on summed requests,
 * reserved in every scope or none, released idempotently, counted in integer
 * millicores and bytes so that sums never drift.
 *
 * Pure and in-memory; for a pool shared by several processes see
 * `scaler-primitives/ledger`.
 *
 * @packageDocumentation
 */
export { CapTracker } from './cap-tracker.js';
export type {
  CapDimension,
  CapRefusal,
  CapReservation,
  CapReserveResult,
  CapSnapshot,
  ScopeUsage,
} from './types.js';
