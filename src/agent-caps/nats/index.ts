/**
 * The NATS JetStream KV adapter for per-agent caps: the `agent-limits`
 * bucket, written by a controller and read by the hosts running the agents.
 * Uses nats.js v3 (`@nats-io/transport-node`, `@nats-io/jetstream`,
 * `@nats-io/kv`), which are optional peer dependencies of this package.
 *
 * The codec (names, encode/decode, systemd grammar, drop-ins) is in
 * `scaler-primitives/agent-caps`.
 *
 * @packageDocumentation
 */
export { type CapsBucketOptions, openCapsBucket, openOrCreateCapsBucket } from './bucket.js';
export { type AgentCapsRead, type ReadAgentCapsOptions, readAgentCaps } from './read.js';
export {
  type AgentCapsSweepResult,
  type SweepAgentCapsOptions,
  sweepAgentCaps,
} from './sweep.js';
export {
  type AgentCapsChange,
  type AgentCapsWatch,
  type WatchAgentCapsOptions,
  watchAgentCaps,
} from './watch.js';
export {
  type DeleteAgentCapsOptions,
  deleteAgentCaps,
  type WriteAgentCapsOptions,
  writeAgentCaps,
} from './write.js';
