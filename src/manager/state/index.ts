/**
 * The manager's state stores: the interface, the stores that need no outside
 * system (memory, file), the schema, and restart recovery's options and result.
 * The NATS store is in `scaler-primitives/manager/nats`.
 */
export { MAX_CHANGES_PER_COMMIT } from './check.js';
export { FileStateStore, type FileStateStoreOptions } from './file.js';
export { MemoryStateStore } from './memory.js';
export type {
  RecoveryOptions,
  RecoveryResult,
  UnrecordedAgentPolicy,
} from './recovery.js';
export {
  agentStateRecordSchema,
  parseStored,
  type StateDocument,
  stateDocumentSchema,
} from './schema.js';
export {
  type AgentStateRecord,
  STATE_RECORD_VERSION,
  type StateChange,
  type StateStore,
  type StoredAgentState,
} from './types.js';
