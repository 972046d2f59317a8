/**
 * scaler-primitives: the facade. `ScalerManager` and what a host wires to it
 * (backends, config, the pool ledger, the state store, the clock, events), and
 * the error base with its codes. Every module has its own subpath with the rest
 * of its surface (`scaler-primitives/manager`, `/ledger`, `/resources`,
 * `/errors` for every error class, `/nftables`, `/agent-caps`, `/fence`, ...).
 *
 * @packageDocumentation
 */

export { type Clock, type ClockTimer, systemClock } from './clock.js';
export { ErrorCode, isScalerError, ScalerError } from './errors/index.js';
export { MachineLedger, type MachineLedgerOptions, type PoolLedger } from './ledger/index.js';
export {
  type AgentRegistration,
  type AgentResources,
  type AgentSnapshot,
  type BackendEntry,
  type ClaimRequest,
  type ClaimResult,
  FileStateStore,
  MemoryStateStore,
  parseScalerConfig,
  SCALER_EVENT_KINDS,
  type ScaleRequest,
  type ScaleResult,
  type ScalerBackend,
  type ScalerConfig,
  type ScalerConfigInput,
  type ScalerEvent,
  type ScalerEventData,
  ScalerManager,
  type ScalerManagerOptions,
  type ScalerStatus,
  type SpawnRequest,
  type SpawnResult,
  type StateStore,
  validateScalerConfig,
} from './manager/index.js';
