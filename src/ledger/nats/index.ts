/**
 * `scaler-primitives/ledger/nats`: the pool ledger for pools shared by many
 * hosts, on NATS JetStream KV. The same `PoolLedger` contract and pool document
 * as `MachineLedger`, every change a compare-and-set on the pool's key.
 *
 * Needs the optional peer dependencies `@nats-io/jetstream` and `@nats-io/kv`
 * (and `@nats-io/transport-node` when the ledger opens its own connection).
 *
 * @packageDocumentation
 */

export { NatsPoolLedger } from './nats-pool-ledger.js';
export { MIN_SAFE_NATS_SERVER_VERSION } from './server-version.js';
export type { NatsPoolLedgerOptions, NatsPoolSnapshot } from './types.js';
