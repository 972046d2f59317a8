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

export { buildIsolationPlan, type PlanOptions, renderIsolationPlan } from './build.js';
export {
  addIsolationRules,
  ensureTable,
  removeIsolationRules,
  validateNftablesAvailability,
} from './exec.js';
export { listIsolatedAgents, sweepIsolation, verifyIsolation } from './inspect.js';
export { parseRuleHandles, parseRuleHandlesJson } from './parse.js';
export type { NftCommand, NftExpr, NftPlan, NftRule } from './plan.js';
export {
  DEFAULT_BLOCKED_RANGES,
  DEFAULT_METADATA_ADDRESSES,
  type IsolationPolicy,
} from './policy.js';
export { renderPlan } from './render.js';
export type { NftOptions, NftRunner } from './session.js';
export { validateAgentId, validateInterfaceName } from './validate.js';
