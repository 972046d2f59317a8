import { strictOptions } from '../internal/strict-keys.js';
import { agentAddCommands } from './build.js';
import { type NftLayoutName, skeletonCommands } from './layout.js';
import type { NftPlan, TableFamily } from './plan.js';
import { type IsolationPolicy, normalizePolicy } from './policy.js';
import { renderPlan } from './render.js';
import {
  DEFAULT_FAMILY,
  DEFAULT_TABLE,
  validateAgentId,
  validateFamily,
  validateLayout,
  validateTableName,
} from './validate.js';

/**
 * Options of {@link renderIsolationPlan} and {@link buildIsolationPlan}. Strict: an unknown
 * key is an `InvalidInputError`.
 *
 * @example
 * ```ts
 * import { type PlanOptions, renderIsolationPlan } from 'scaler-primitives/nftables';
 *
 * const opts: PlanOptions = { family: 'ip', table: 'kici', layout: 'rules', includeTable: true };
 * renderIsolationPlan('ci-42', { iifname: 'tap-ci-42' }, opts);
 * ```
 */
export interface PlanOptions {
  /** Table name. @default 'scaler_primitives' */
  table?: string;
  /**
   * Table family: `inet` (IPv4 and IPv6) or `ip` (IPv4 only: IPv6 rules, maps and the ICMPv6
   * rule are left out; an IPv6 `saddr` agent is refused). @default 'inet'
   */
  family?: TableFamily;
  /** Layout. @default 'vmap' */
  layout?: NftLayoutName;
  /** Prepend the commands that create the table skeleton. @default false */
  includeTable?: boolean;
}

/**
 * The transaction that installs an agent's rules, as typed commands. Pure: runs nothing.
 *
 * @throws {InvalidInputError} for an invalid agent id, policy, table name or family, and for
 *   an IPv6 `saddr` agent in a table of family `ip`.
 * @example
 * ```ts
 * import { buildIsolationPlan } from 'scaler-primitives/nftables';
 *
 * const plan = buildIsolationPlan('ci-42', { saddr: '172.30.0.5' }, { family: 'ip' });
 * plan.family; // 'ip'
 * plan.commands[0]; // { op: 'create chain', chain: 'agent-ci-42-fwd' }
 * ```
 */
export function buildIsolationPlan(
  agentId: string,
  policy: IsolationPolicy,
  options?: PlanOptions,
): NftPlan {
  const opts = strictOptions<PlanOptions>(
    options,
    ['table', 'family', 'layout', 'includeTable'],
    'plan options',
  );
  if (opts.includeTable !== undefined && typeof opts.includeTable !== 'boolean') {
    throw new TypeError(
      `Expected \`includeTable\` to be a boolean, got \`${typeof opts.includeTable}\``,
    );
  }
  const id = validateAgentId(agentId);
  const table = validateTableName(opts.table ?? DEFAULT_TABLE);
  const family = validateFamily(opts.family ?? DEFAULT_FAMILY);
  const layout = validateLayout(opts.layout ?? 'vmap');
  const commands = agentAddCommands(id, normalizePolicy(policy), layout, family);
  return {
    family,
    table,
    commands: opts.includeTable ? [...skeletonCommands(family, layout), ...commands] : commands,
  };
}

/**
 * The `nft -f` script that installs an agent's rules. Pure: runs nothing, needs no root.
 *
 * @throws {InvalidInputError} for an invalid agent id, policy, table name or family.
 * @example
 * ```ts
 * import { renderIsolationPlan } from 'scaler-primitives/nftables';
 *
 * console.log(renderIsolationPlan('ci-42', { saddr: '172.30.0.5', denyAll: true }));
 * console.log(renderIsolationPlan('ci-42', { iifname: 'tap-ci-42' }, { family: 'ip' })); // IPv4 only
 * ```
 */
export function renderIsolationPlan(
  agentId: string,
  policy: IsolationPolicy,
  opts?: PlanOptions,
): string {
  return renderPlan(buildIsolationPlan(agentId, policy, opts));
}
