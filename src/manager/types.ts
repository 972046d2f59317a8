/**
 * The door of the manager's host-facing types, one room a concern: the backend
 * contract, the answers of `requestScale`, one agent's state and events, the
 * answers of `reload` and `reconcile`, and the status snapshot.
 */
export type { AgentRegistration, AgentState, ScalerEvent } from './agent-types.js';
export type {
  AgentResources,
  BackendEventInput,
  ScalerBackend,
  SpawnLease,
  SpawnRequest,
  SpawnResult,
} from './backend-types.js';
export type {
  ReconcileFailure,
  ReconcileResult,
  UntrackedAgent,
  ValidationResult,
} from './fleet-types.js';
export type { CapacityLimit, NoMatchReason, ScaleResult } from './scale-types.js';
export type {
  BackendStatus,
  BackoffStatus,
  LeaseStatus,
  PoolStatus,
  ScalerCounters,
  ScalerStatus,
  Usage,
  WarmPoolHold,
  WarmPoolStatus,
} from './status-types.js';
