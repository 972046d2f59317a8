/**
 * `scaler-primitives/ledger`: a cross-process ledger of CPU and memory
 * reservations against named machine pools. `MachineLedger` keeps it in files
 * shared with the kici orchestrator; `PoolLedger` is the contract every ledger
 * (file, NATS, memory) keeps.
 *
 * @packageDocumentation
 */

export type { OtelMeterProvider, OtelTracerProvider } from '../internal/telemetry/api.js';
export { StaleReason, type StaleRow } from './document/verdict.js';
export { DEFAULT_LEDGER_DIR, LEDGER_DIR_ENV } from './file/dir.js';
export {
  MachineLedger,
  type MachineLedgerOptions,
  type PoolSnapshot,
} from './file/machine-ledger.js';
export type { LedgerFs } from './fs.js';
export type { LedgerTelemetryOptions } from './telemetry.js';
export type {
  AdoptGranted,
  AdoptHeldBy,
  AdoptRequest,
  AdoptResult,
  LeaseEvent,
  LeaseHealth,
  LeaseInfo,
  LeaseLocation,
  LedgerDocument,
  PoolLedger,
  RegisterPoolOptions,
  ReleaseOptions,
  ReservationRow,
  ReserveOptions,
  ReserveRefusal,
  ReserveResult,
} from './types.js';
