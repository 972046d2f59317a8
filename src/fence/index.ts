/**
 * The agent side of a controller's leases: an agent process watches every
 * lease its controller's ledgers keep for it (lease files, NATS heartbeat
 * keys) and stops before the first deadline after which peers may reuse its
 * capacity. Dependency-free: Node builtins only, no NATS client (a NATS lease
 * is read through a function the agent passes, or by
 * `scaler-primitives/fence/nats`, which opens a connection itself).
 *
 * @packageDocumentation
 */

export { type WatchLeaseFromEnvOptions, watchLeaseFromEnv } from './from-env.js';
export { type HeartbeatBucket, natsHeartbeatReader } from './heartbeat.js';
export { type FenceLease, leaseEnv, readLeaseEnv, readLeasesEnv } from './lease.js';
export {
  type FenceExpiry,
  type FenceStopReason,
  type LeaseFence,
  stopAgentProcess,
  type WatchLeaseOptions,
  watchLease,
} from './watch.js';
