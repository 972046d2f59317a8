/**
 * Network isolation for build agents with nftables.
 *
 * A policy (the agent's identity plus what it may reach) is validated, turned into typed
 * plan objects, rendered once into an `nft` script and applied in one `nft -f -`
 * transaction. Every rule carries a comment naming its agent; every lookup compares agent
 * ids, interface names and addresses exactly. See docs/nftables.md for the chain layouts
 * and the threat model.
 *
 * Importing this module does not load execa; the functions that run `nft` load it on first
 * use unless you pass your own `runner`.
 *
 * @packageDocumentation
 */

export {
  type AddResult,
  addIsolationRules,
  ensureTable,
  type RemoveOptions,
  removeIsolationRules,
  validateNftablesAvailability,
} from './exec.js';
export {
  type IsolatedAgent,
  listIsolatedAgents,
  type SweepResult,
  sweepIsolation,
  type VerifyOptions,
  type VerifyResult,
  verifyIsolation,
} from './inspect.js';
export {
  buildIsolationPlan,
  type PlanOptions,
  renderIsolationPlan,
} from './build.js';
export {
  type AgentPart,
  DISPATCH_MAPS,
  type DispatchMap,
  NftLayout,
  type NftLayoutName,
} from './layout.js';
export { agentChainName } from './names.js';
export { parseRuleHandles, parseRuleHandlesJson } from './parse.js';
export type {
  AddrFamily,
  DispatchKey,
  Icmpv6Type,
  NftCommand,
  NftElementKey,
  NftExpr,
  NftHook,
  NftPlan,
  NftRule,
  TableFamily,
} from './plan.js';
export {
  type AgentIdentity,
  DEFAULT_BLOCKED_RANGES,
  DEFAULT_METADATA_ADDRESSES,
  type HostPort,
  type IfnameIdentity,
  type IsolationPolicy,
  type IsolationRules,
  type SaddrIdentity,
  type SkuidIdentity,
} from './policy.js';
export { renderPlan } from './render.js';
export type { NftOptions, NftRunner, NftRunResult } from './session.js';
export {
  type Cidr,
  DEFAULT_TABLE,
  parseAddress,
  parseCidr,
  validateAgentId,
  validateInterfaceName,
} from './validate.js';
