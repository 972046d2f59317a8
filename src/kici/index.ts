/**
 * A migration kit for codebases built on the kici orchestrator's scaler
 * (`@kici-dev/orchestrator` `src/scaler/`): the same names and call shapes, backed by
 * this library's modules, so such a codebase can switch one import at a time while it
 * shares a host (ledger directory, pool files, lock) with kici processes that have not
 * switched yet. Translation only: every decision is made by the core modules.
 * See docs/migrating-from-kici.md.
 *
 * @packageDocumentation
 */

export { type KiciScalerConfig, parseKiciScalerConfig, toScalerConfig } from './config.js';
export { KICI_LEDGER_DIR, kiciLedgerDirFromEnv, resolveKiciLedgerDir } from './ledger-dir.js';
export { MachineLedger } from './machine-ledger.js';
export {
  addIsolationRules,
  ensureKiciTable,
  KICI_NFT_TABLE,
  type KiciNetworkPolicy,
  type KiciNftOptions,
  kiciAgentId,
  type NftMatchMode,
  parseRuleHandles,
  removeIsolationRules,
  validateNftablesAvailability,
} from './nftables.js';
export { parseKiciMemory } from './resources.js';
