/**
 * The agent side of a controller's lease: an agent process watches the lease
 * its controller's ledger keeps (a lease file, or a NATS heartbeat key) and
 * stops before the deadline after which peers may reuse its capacity.
 * Dependency-free: Node builtins only, no NATS client (a NATS lease is read
 * through a function the agent passes).
 *
 * @packageDocumentation
 */

export { type HeartbeatBucket, natsHeartbeatReader } from './heartbeat.js';
export { type FenceLease, leaseEnv, readLeaseEnv } from './lease.js';
export {
  type FenceExpiry,
  type LeaseFence,
  stopAgentProcess,
  type WatchLeaseOptions,
  watchLease,
  watchLeaseFromEnv,
} from './watch.js';
