// The calls that write an agent's rules: validate, ensure the table, add, remove.
import { isNftCommandError } from '../errors/nftables.js';
import { agentAddCommands, agentRules, dispatchFor } from './build.js';
import { agentChainName } from './names.js';
import { type AgentFootprint, agentFootprints } from './parse.js';
import type { NftCommand, TableFamily } from './plan.js';
import { type IsolationPolicy, type NormalizedPolicy, normalizePolicy } from './policy.js';
import {
  apply,
  type Context,
  context,
  type NftOptions,
  REMOVE_OPTION_KEYS,
  readState,
  run,
  skeletonRepair,
} from './session.js';
import { validateAgentId } from './validate.js';

export function removal(footprint: AgentFootprint): NftCommand[] {
  const commands: NftCommand[] = [];
  for (const element of footprint.elements) {
    commands.push({ op: 'delete element', map: element.map, key: element.key });
  }
  const own = new Set(footprint.chains.map((c) => c.name));
  for (const rule of footprint.rules) {
    if (!own.has(rule.chain))
      commands.push({ op: 'delete rule', chain: rule.chain, handle: rule.handle });
  }
  for (const { name } of footprint.chains) {
    commands.push({ op: 'flush chain', chain: name }, { op: 'delete chain', chain: name });
  }
  return commands;
}

/**
 * Removal without reading the table. `add element` first: it is a no-op when the element
 * jumps to this agent's chain and fails when the identity now belongs to another agent, so
 * another agent's dispatch is never deleted; `delete chain` fails if the chain is gone or
 * still referenced. Any failure aborts the whole transaction.
 */
function blindRemoval(
  agentId: string,
  policy: NormalizedPolicy,
  tableFamily: TableFamily,
): NftCommand[] {
  const commands: NftCommand[] = [];
  for (const { part } of agentRules(policy, tableFamily)) {
    const chain = agentChainName(agentId, part);
    const { map, key } = dispatchFor(policy, part);
    commands.push(
      { op: 'add element', map, key, target: chain },
      { op: 'delete element', map, key },
      { op: 'flush chain', chain },
      { op: 'delete chain', chain },
    );
  }
  return commands;
}

/**
 * Check that nft can be run with the privileges it needs (runs `nft list tables`).
 *
 * @throws {NftNotInstalledError} when nft (or sudo, or ip for `netns`) is missing.
 * @throws {NftPermissionError} when nft lacks CAP_NET_ADMIN; the message names `requireSudo`.
 * @throws {NftCommandError} for any other failure.
 * @example
 * ```ts
 * import { validateNftablesAvailability } from 'scaler-primitives/nftables';
 *
 * await validateNftablesAvailability({ requireSudo: true }); // at start-up: fail early
 * ```
 */
export async function validateNftablesAvailability(opts?: NftOptions): Promise<void> {
  await run(context(opts), ['list', 'tables']);
}

/**
 * Create the table and its base chains and, for the `vmap` layout, the verdict maps of the
 * table's family and the dispatch rules; or add whichever of them is missing. Idempotent;
 * safe to call concurrently.
 *
 * @returns whether anything had to be created.
 * @example
 * ```ts
 * import { ensureTable } from 'scaler-primitives/nftables';
 *
 * await ensureTable(); // table inet scaler_primitives, vmap skeleton
 * await ensureTable({ family: 'ip', table: 'kici', layout: 'rules' }); // chains only
 * ```
 */
export async function ensureTable(opts?: NftOptions): Promise<boolean> {
  const ctx = context(opts);
  for (let attempt = 0; ; attempt++) {
    const commands = skeletonRepair(ctx, await readState(ctx));
    if (commands.length === 0) return false;
    try {
      await apply(ctx, commands);
      return true;
    } catch (error) {
      if (!isNftCommandError(error) || attempt >= 2) throw error;
    }
  }
}

export async function replaceAgent(
  ctx: Context,
  agentId: string,
  policy: NormalizedPolicy,
): Promise<{ replaced: boolean; calls: number }> {
  let calls = 0;
  for (let attempt = 0; ; attempt++) {
    const state = await readState(ctx);
    calls++;
    const footprint = agentFootprints(state).get(agentId);
    const commands: NftCommand[] = [...skeletonRepair(ctx, state)];
    if (footprint) commands.push(...removal(footprint));
    if (ctx.layout === 'vmap') {
      // An identity belongs to the agent that claimed it last: drop stale claims on it.
      const mine = new Set(footprint?.elements.map((e) => `${e.map}\0${e.key.value}`) ?? []);
      for (const { part } of agentRules(policy, ctx.family)) {
        const { map, key } = dispatchFor(policy, part);
        const id = `${map}\0${key.value}`;
        if (mine.has(id)) continue;
        if (state.elements.some((e) => `${e.map}\0${e.key.value}` === id)) {
          commands.push({ op: 'delete element', map, key });
        }
      }
    }
    commands.push(...agentAddCommands(agentId, policy, ctx.layout, ctx.family));
    try {
      await apply(ctx, commands);
      return { replaced: footprint !== undefined, calls: calls + 1 };
    } catch (error) {
      calls++;
      // A concurrent change (a handle that vanished, a table made meanwhile): read again.
      if (!isNftCommandError(error) || attempt >= 2) throw error;
    }
  }
}

/**
 * Isolate an agent: install its rules in one `nft -f -` transaction. Applying again for the
 * same agent replaces its rules (never duplicates them); the table is created if missing.
 *
 * In the `vmap` layout a first application is one nft process; a re-application (or one
 * that finds the table missing) reads the table first and replaces in one transaction.
 *
 * @throws {InvalidInputError} for an invalid agent id or policy, before nft runs.
 * @throws {NftNotInstalledError} / {NftPermissionError} / {NftCommandError} from nft.
 * @example
 * ```ts
 * import { addIsolationRules } from 'scaler-primitives/nftables';
 *
 * await addIsolationRules('ci-42', { iifname: 'tap-ci-42', hostAccess: [8080] });
 * ```
 */
export async function addIsolationRules(
  agentId: string,
  policy: IsolationPolicy,
  opts?: NftOptions,
): Promise<{
  /** Rules the agent now owns. */
  rules: number;
  /** `nft` processes it ran. */
  nftCalls: number;
  /** Whether rules of an earlier application were replaced. */
  replaced: boolean;
}> {
  const id = validateAgentId(agentId);
  const normalized = normalizePolicy(policy);
  const ctx = context(opts);
  const rules = agentRules(normalized, ctx.family).reduce((n, p) => n + p.rules.length, 0);
  if (ctx.layout === 'vmap') {
    try {
      await apply(ctx, agentAddCommands(id, normalized, 'vmap', ctx.family));
      return { rules, nftCalls: 1, replaced: false };
    } catch (error) {
      if (!isNftCommandError(error)) throw error;
      // The agent's chain exists, the identity is claimed, or the table is missing.
    }
    const { replaced, calls } = await replaceAgent(ctx, id, normalized);
    return { rules, nftCalls: calls + 1, replaced };
  }
  const { replaced, calls } = await replaceAgent(ctx, id, normalized);
  return { rules, nftCalls: calls, replaced };
}

/**
 * Remove every rule, chain and map element of one agent (either layout) in one transaction.
 * Other agents are untouched, including ones whose id or identity starts the same way.
 *
 * Give the `table`, `family` and `layout` the agent was isolated with.
 *
 * @returns how many rules were removed (0 when the agent had none).
 * @throws {InvalidInputError} / nft errors, unless `bestEffort` is set.
 * @example
 * ```ts
 * import { type IsolationPolicy, removeIsolationRules } from 'scaler-primitives/nftables';
 *
 * declare const policy: IsolationPolicy; // the policy ci-42 was isolated with
 * await removeIsolationRules('ci-42', { policy, bestEffort: true, onError: console.warn });
 * ```
 */
export async function removeIsolationRules(
  agentId: string,
  opts?: NftOptions & {
    /**
     * The policy the agent was isolated with. In the `vmap` layout this allows a teardown in
     * one nft process without reading the table (the return value is then the number of rules
     * that policy installs). If the table does not hold what the policy says, it falls back to
     * reading the table.
     */
    policy?: IsolationPolicy;
    /** Never throw: report failures to `onError` and return 0. @default false */
    bestEffort?: boolean;
    /** Called with the error a best-effort removal swallowed. */
    onError?: (error: unknown) => void;
  },
): Promise<number> {
  // Bad options are a programmer's mistake: refused even with `bestEffort`.
  const checkedOpts = context(opts, REMOVE_OPTION_KEYS);
  try {
    const id = validateAgentId(agentId);
    const ctx = checkedOpts;
    if (opts?.policy !== undefined && ctx.layout === 'vmap') {
      const policy = normalizePolicy(opts.policy);
      try {
        await apply(ctx, blindRemoval(id, policy, ctx.family));
        return agentRules(policy, ctx.family).reduce((n, p) => n + p.rules.length, 0);
      } catch (error) {
        if (!isNftCommandError(error)) throw error;
        // Not as the policy says (already gone, identity re-claimed): read and remove.
      }
    }
    for (let attempt = 0; ; attempt++) {
      const footprint = agentFootprints(await readState(ctx)).get(id);
      if (!footprint) return 0;
      try {
        await apply(ctx, removal(footprint));
        return footprint.rules.length;
      } catch (error) {
        if (!isNftCommandError(error) || attempt >= 2) throw error;
      }
    }
  } catch (error) {
    if (!opts?.bestEffort) throw error;
    opts.onError?.(error);
    return 0;
  }
}

/** What {@link addIsolationRules} did. */
export type AddResult = Awaited<ReturnType<typeof addIsolationRules>>;
/** Options of {@link removeIsolationRules}. */
export type RemoveOptions = NonNullable<Parameters<typeof removeIsolationRules>[1]>;
