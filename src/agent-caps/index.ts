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
  type CapsValueOptions,
  type DecodeAgentCapsOptions,
  decodeAgentCaps,
  encodeAgentCaps,
  isEmpty,
  MAX_CAPS_FIELD_LENGTH,
  MAX_CAPS_VALUE_BYTES,
  validateAgentCaps,
} from './codec.js';
export { capsFromResources, resourcesFromCaps } from './convert.js';
export {
  DropInSection,
  type DropInSectionName,
  type RenderDropInOptions,
  renderDropIn,
} from './drop-in.js';
export { isValidCpuQuota, isValidMemoryMax } from './grammar.js';
export {
  assertAgentName,
  BUCKET,
  directGetSubject,
  keySubject,
  MAX_AGENT_NAME_LENGTH,
  STREAM,
} from './names.js';
