/**
 * `ScalerManager`: the facade a CI orchestrator wires to its own dispatcher and
 * backends. It decides whether a waiting job may get a new agent, where, and with
 * what resources; reserves that capacity in every scope it must (scaler and
 * orchestrator caps, then a machine pool shared with other processes through a
 * ledger) or in none; and keeps its books straight through spawn failures,
 * agents that never register, vanished agents and config reloads.
 *
 * Also exported: the config schema (`scalerConfigSchema`, `parseScalerConfig`,
 * `validateScalerConfig`) and the state stores a restarted host recovers from.
 *
 * @packageDocumentation
 */
export { ConfigError, StateStoreError } from '../errors/index.js';
export type { ClaimRequest, ClaimResult } from './agents/dispatch.js';
export type { AgentFilter, AgentSnapshot } from './agents/inventory.js';
export type { AgentRegistration } from './agents/lifecycle.js';
export type {
  AgentResources,
  ScalerBackend,
  SpawnLease,
  SpawnRequest,
  SpawnResult,
} from './backend.js';
export {
  type ConfigValidation,
  formatConfigPath,
  parseScalerConfig,
  validateScalerConfig,
} from './config/check.js';
export {
  type ScalerConfig,
  type ScalerConfigInput,
  type ScalerEntryInput,
  scalerConfigSchema,
} from './config/config.js';
export { SCALER_EVENT_KINDS, type ScalerEvent, type ScalerEventData } from './events.js';
export { ScalerManager } from './manager.js';
export type { ScalerManagerOptions } from './options.js';
export type { BackendEntry } from './spawning/scalers.js';
export { FileStateStore, type FileStateStoreOptions } from './state/file.js';
export { MemoryStateStore } from './state/memory.js';
export type { RecoveryResult } from './state/recovery.js';
export type { AgentStateRecord, StateChange, StateStore } from './state/types.js';
export type {
  AgentState,
  CapacityLimit,
  ReconcileResult,
  ReconcileSweep,
  ScaleRequest,
  ScaleResult,
  ScalerEntryStatus,
  ScalerStatus,
  ShutdownResult,
  UnconfirmedAgent,
  WarmPoolHold,
} from './types.js';
