import { strictOptions } from '../internal/strict-keys.js';
import { agentAddCommands, type NftLayoutName, skeletonCommands } from './build.js';
import type { NftPlan } from './plan.js';
import { type IsolationPolicy, normalizePolicy } from './policy.js';
import { renderPlan } from './render.js';
import { DEFAULT_TABLE, validateAgentId, validateLayout, validateTableName } from './validate.js';

/** Options of {@link renderIsolationPlan} and {@link buildIsolationPlan}. */
export interface PlanOptions {
  /** Table name. @default 'scaler_primitives' */
  table?: string;
  /** Layout. @default 'vmap' */
  layout?: NftLayoutName;
  /** Prepend the commands that create the table skeleton. @default false */
  includeTable?: boolean;
}

/**
 * The transaction that installs an agent's rules, as typed commands. Pure: runs nothing.
 *
 * @throws {InvalidInputError} for an invalid agent id, policy or table name.
 */
export function buildIsolationPlan(
  agentId: string,
  policy: IsolationPolicy,
  options?: PlanOptions,
): NftPlan {
  const opts = strictOptions<PlanOptions>(
    options,
    ['table', 'layout', 'includeTable'],
    'plan options',
  );
  if (opts.includeTable !== undefined && typeof opts.includeTable !== 'boolean') {
    throw new TypeError(
      `Expected \`includeTable\` to be a boolean, got \`${typeof opts.includeTable}\``,
    );
  }
  const id = validateAgentId(agentId);
  const table = validateTableName(opts.table ?? DEFAULT_TABLE);
  const layout = validateLayout(opts.layout ?? 'vmap');
  const commands = agentAddCommands(id, normalizePolicy(policy), layout);
  return {
    family: 'inet',
    table,
    commands: opts.includeTable ? [...skeletonCommands(), ...commands] : commands,
  };
}

/**
 * The `nft -f` script that installs an agent's rules. Pure: runs nothing, needs no root.
 *
 * @throws {InvalidInputError} for an invalid agent id, policy or table name.
 * @example
 * ```ts
 * console.log(renderIsolationPlan('ci-42', { saddr: '172.30.0.5', denyAll: true }));
 * ```
 */
export function renderIsolationPlan(
  agentId: string,
  policy: IsolationPolicy,
  opts?: PlanOptions,
): string {
  return renderPlan(buildIsolationPlan(agentId, policy, opts));
}
