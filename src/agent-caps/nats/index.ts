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
export { openCapsBucket, openOrCreateCapsBucket } from './bucket.js';
export { type AgentCapsRead, readAgentCaps } from './read.js';
export { sweepAgentCaps } from './sweep.js';
export { type AgentCapsChange, type AgentCapsWatch, watchAgentCaps } from './watch.js';
export { deleteAgentCaps, writeAgentCaps } from './write.js';
