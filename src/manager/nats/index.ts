/**
 * `scaler-primitives/manager/nats`: `NatsStateStore`, the manager's state store
 * on NATS JetStream KV (for managers whose host may move between replicas).
 * Loads `@nats-io/*` (optional peer dependencies); the `manager` subpath does not.
 *
 * @packageDocumentation
 */
export { DEFAULT_STATE_BUCKET, NatsStateStore, type NatsStateStoreOptions } from './store.js';
