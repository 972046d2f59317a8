/**
 * The manager's state stores: the interface, the stores that need no outside
 * system (memory, file), and restart recovery's options and result.
 * The NATS store is in `scaler-primitives/manager/nats`.
 */
export { MAX_CHANGES_PER_COMMIT } from './check.js';
export { FileStateStore, type FileStateStoreOptions } from './file.js';
export { MemoryStateStore } from './memory.js';
export type {
  RecoveredPoolRow,
  RecoveryOptions,
  RecoveryResult,
  UnrecordedAgent,
  UnrecordedAgentPolicy,
} from './recovery.js';
export {
  type AgentStateRecord,
  STATE_RECORD_VERSION,
  type StateChange,
  type StateStore,
  type StoredAgentState,
} from './types.js';
