/**
 * `ScalerManager`: the facade a CI orchestrator wires to its own dispatcher and
 * backends. It decides whether a waiting job may get a new agent, where, and with
 * what resources; reserves that capacity in every scope it must (scaler and
 * orchestrator caps, then a machine pool shared with other processes through a
 * ledger) or in none; and keeps its books straight through spawn failures,
 * agents that never register, vanished agents and config reloads.
 *
 * Also exported: the config schema (`scalerConfigSchema`, `parseScalerConfig`,
 * `validateScalerConfig`) and the label-matching rules.
 *
 * @packageDocumentation
 */
export { type Clock, type ClockTimer, systemClock } from '../clock.js';
export type { ConfigIssue } from '../errors/input.js';
export { StateStoreProblem, type StateStoreProblemName } from '../errors/state-store.js';
export { ConfigError, StateStoreError } from '../errors.js';
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
  type ConfigValidation,
  DEFAULT_AUTO_LABEL_PREFIX,
  formatConfigPath,
  type LabelSetConfig,
  type LabelSetInput,
  type LimitRangeInput,
  parseScalerConfig,
  type ResourceDefaults,
  type ResourceDefaultsInput,
  type ScalerConfig,
  type ScalerConfigInput,
  type ScalerEntryConfig,
  type ScalerEntryInput,
  type SpawnBackoffConfig,
  type SpawnBackoffInput,
  scalerConfigSchema,
  validateScalerConfig,
  type WarmPoolConfig,
  type WarmPoolInput,
  type WarmPoolSchedule,
  type WarmPoolScheduleInput,
} from './config.js';
export type { ClaimMismatch, ClaimRequest, ClaimResult } from './dispatch.js';
export type { AgentFilter, AgentSnapshot } from './inventory.js';
export { automaticLabels, labelSetMatches, passesMandatoryGate } from './labels.js';
export type { LeaseLostPolicy } from './leases.js';
export { ScalerManager } from './manager.js';
export type { ScalerManagerOptions } from './options.js';
export type { ReservationLostPolicy } from './reservations.js';
export type { BackendEntry } from './scalers.js';
export {
  type AgentStateRecord,
  FileStateStore,
  type FileStateStoreOptions,
  MAX_CHANGES_PER_COMMIT,
  MemoryStateStore,
  type RecoveredPoolRow,
  type RecoveryOptions,
  type RecoveryResult,
  STATE_RECORD_VERSION,
  type StateChange,
  type StateStore,
  type StoredAgentState,
  type UnrecordedAgent,
  type UnrecordedAgentPolicy,
} from './state/index.js';
export type { ReconcileSweep, SweepOutcome } from './sweeps.js';
export type { ShutdownOptions } from './teardown.js';
export type { ManagerTelemetryOptions } from './telemetry.js';
export type {
  AgentRegistration,
  AgentResources,
  AgentState,
  BackendEventInput,
  BackendStatus,
  BackoffStatus,
  CapacityLimit,
  LeaseStatus,
  NoMatchReason,
  PoolStatus,
  ReconcileFailure,
  ReconcileResult,
  ScaleResult,
  ScalerBackend,
  ScalerCounters,
  ScalerEvent,
  ScalerStatus,
  SpawnLease,
  SpawnRequest,
  SpawnResult,
  UntrackedAgent,
  Usage,
  ValidationResult,
  WarmPoolHold,
  WarmPoolStatus,
} from './types.js';
