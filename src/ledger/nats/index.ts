/**
 * The pool ledger for pools shared by many hosts, on NATS JetStream KV: the same
 * `PoolLedger` contract and pool document as the file-backed `MachineLedger`,
 * with every change a compare-and-set on the pool's key and liveness judged by
 * heartbeat keys and the server's timestamps.
 *
 * Needs the optional peer dependencies `@nats-io/jetstream` and `@nats-io/kv`
 * (and `@nats-io/transport-node` when the ledger opens its own connection).
 *
 * @packageDocumentation
 */

export { LEASE_KEY_PREFIX, leaseKey, POOL_KEY_PREFIX, poolKey } from './keys.js';
export { NatsPoolLedger } from './nats-pool-ledger.js';
export { MIN_SAFE_NATS_SERVER_VERSION } from './server-version.js';
export type { NatsPoolLedgerOptions, NatsPoolSnapshot } from './types.js';
