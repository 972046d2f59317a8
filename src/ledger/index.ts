/**
 * A cross-process ledger of CPU and memory reservations against named machine
 * pools: the pool document format, the rules shared by every backend, and
 * `MachineLedger`, the file-backed ledger shared with the kici orchestrator.
 *
 * @packageDocumentation
 */

export { type Clock, type ClockTimer, systemClock } from '../clock.js';
export type {
  OtelAttributes,
  OtelContext,
  OtelCounter,
  OtelHistogram,
  OtelInstrumentOptions,
  OtelMeter,
  OtelMeterProvider,
  OtelObservable,
  OtelObservableCallback,
  OtelObservableResult,
  OtelSpan,
  OtelSpanOptions,
  OtelSpanStatus,
  OtelTracer,
  OtelTracerProvider,
  TelemetryOptions,
} from '../internal/telemetry/index.js';
export {
  checkAdopt,
  checkAgentId,
  checkReserve,
  checkReserveOptions,
  MAX_ID_LENGTH,
  registeredCap,
} from './checks.js';
export {
  DEFAULT_LEDGER_DIR,
  fallbackLedgerDir,
  findLedgerDir,
  LEDGER_DIR_ENV,
  resolveLedgerDir,
} from './dir.js';
export {
  addRow,
  assertCap,
  capsEqual,
  checkFit,
  type DocumentSource,
  emptyDocument,
  keepRows,
  LEDGER_VERSION,
  type LeaseState,
  type LivenessFacts,
  normalizeCap,
  type ProcessState,
  parseDocument,
  partitionRows,
  type RemoveResult,
  type RowMatch,
  type RowPartition,
  type RowVerdict,
  removeRows,
  rowVerdict,
  StaleReason,
  type StaleRow,
  serializeDocument,
  sumRows,
  validateDocument,
  validatePoolName,
} from './document.js';
export type { LedgerFs } from './fs.js';
export type { OpAnswer } from './group-commit.js';
export {
  MachineLedger,
  type MachineLedgerOptions,
  type PoolSnapshot,
} from './machine-ledger.js';
export { applyBatch, type BatchOutcome, type LedgerOp, releaseOp } from './ops.js';
export { DEFAULT_MAX_FILE_BYTES } from './safe-fs.js';
export type { LedgerTelemetryOptions } from './telemetry.js';
export {
  type AdoptGranted,
  type AdoptHeldBy,
  type AdoptRequest,
  type AdoptResult,
  type LeaseEvent,
  type LeaseHealth,
  type LeaseInfo,
  type LeaseLocation,
  type LedgerDocument,
  MAX_ADOPT,
  type PoolLedger,
  type RegisterPoolOptions,
  type ReleaseOptions,
  type ReservationRow,
  type ReserveOptions,
  type ReserveRefusal,
  type ReserveResult,
} from './types.js';
