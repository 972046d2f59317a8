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
export { DuplicateReservationError, isDuplicateReservationError } from '../errors.js';
export { CapTracker } from './cap-tracker.js';
export type {
  CapDimension,
  CapGranted,
  CapRefusal,
  CapReservation,
  CapReserveResult,
  CapSnapshot,
  CapTrackerOptions,
  ScopeSnapshot,
  ScopeUsage,
} from './types.js';
