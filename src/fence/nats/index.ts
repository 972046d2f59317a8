/**
 * The agent side of a controller's leases, NATS leases included: one call
 * reads every lease in the agent's environment, opens the NATS connection
 * and the KV buckets the NATS leases need, and fences the agent at the first
 * lease that lapses. Uses nats.js v3 (`@nats-io/transport-node`,
 * `@nats-io/kv`), optional peer dependencies of this package; an agent with
 * file leases only can import `scaler-primitives/fence`, which has no
 * dependencies.
 *
 * @packageDocumentation
 */
export {
  type NatsLeaseFence,
  type WatchLeasesFromEnvOptions,
  watchLeasesFromEnv,
} from './watch.js';
