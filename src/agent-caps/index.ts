/**
 * Per-agent CPU and memory caps, as systemd `CPUQuota=` and `MemoryMax=`
 * values, in the wire format of the `agent-limits` JetStream KV bucket
 * (byte-compatible with the Rust `swarm-queue-client` crate).
 *
 * Pure: no I/O and no NATS import. The NATS JetStream adapter lives in
 * `scaler-primitives/agent-caps/nats`.
 *
 * @packageDocumentation
 */
export {
  type AgentCaps,
  decodeAgentCaps,
  encodeAgentCaps,
  isEmpty,
  validateAgentCaps,
} from './codec.js';
export { capsFromResources, resourcesFromCaps } from './convert.js';
export { renderDropIn } from './drop-in.js';
export { assertAgentName, BUCKET, directGetSubject, keySubject, STREAM } from './names.js';
