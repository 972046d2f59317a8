// The calls that read a table: list the agents in it, sweep the dead ones, verify one.
import { isNftCommandError } from '../errors/nftables.js';
import { liveAgentView } from '../internal/live-ids.js';
import { agentRules, checkPolicyFamily, dispatchFor, expectedVerdicts } from './build.js';
import { removal, replaceAgent } from './exec.js';
import type { NftLayoutName } from './layout.js';
import { agentChainName, policyDigest } from './names.js';
import { type AgentFootprint, agentFootprints, type TableState } from './parse.js';
import { type IsolationPolicy, type NormalizedPolicy, normalizePolicy } from './policy.js';
import {
  apply,
  type Context,
  context,
  type NftOptions,
  readState,
  skeletonRepair,
  VERIFY_OPTION_KEYS,
} from './session.js';
import { validateAgentId } from './validate.js';

function identitiesOf(footprint: AgentFootprint): Array<string | number> {
  if (footprint.elements.length > 0) {
    return [...new Set(footprint.elements.map((e) => e.key.value))];
  }
  const found = new Set<string | number>();
  for (const rule of footprint.rules) {
    const first = rule.expr[0] as { match?: { right?: unknown } } | undefined;
    const right = first?.match?.right;
    if (typeof right === 'string' || typeof right === 'number') found.add(right);
  }
  return [...found];
}

/**
 * Every agent that has rules in the table (the one `table` and `family` name), sorted by id.
 *
 * @example
 * ```ts
 * import { listIsolatedAgents } from 'scaler-primitives/nftables';
 *
 * for (const agent of await listIsolatedAgents({ family: 'ip', table: 'kici' })) {
 *   console.log(agent.agentId, agent.layout, agent.rules);
 * }
 * ```
 */
export async function listIsolatedAgents(opts?: NftOptions): Promise<
  {
    /** The agent id (from rule comments and chain names). */
    agentId: string;
    /** Where its rules live: `vmap` or `rules`. */
    layout: NonNullable<NftOptions['layout']>;
    /** How many rules it owns. */
    rules: number;
    /** Identities dispatching to it (vmap layout: map keys; rules layout: matched values). */
    identities: Array<string | number>;
    /** Policy digests in its rule comments (one, unless an update was interrupted). */
    digests: string[];
  }[]
> {
  const state = await readState(context(opts));
  return [...agentFootprints(state).values()]
    .map((f) => ({
      agentId: f.agentId,
      layout: (f.chains.length > 0 ? 'vmap' : 'rules') as NftLayoutName,
      rules: f.rules.length,
      identities: identitiesOf(f),
      digests: [...f.digests].sort(),
    }))
    .sort((a, b) => (a.agentId < b.agentId ? -1 : a.agentId > b.agentId ? 1 : 0));
}

/**
 * Remove the rules of every agent not in `liveAgentIds` (leftovers of crashed runs), all in
 * one transaction. Ids are compared exactly. `liveAgentIds` is iterated after the table is
 * read (again on each retry), so a live view (such as the one `ScalerManager.reconcile`
 * passes) includes an agent started while the table was being read.
 *
 * @example
 * ```ts
 * import { sweepIsolation } from 'scaler-primitives/nftables';
 *
 * declare const runningAgentIds: Set<string>;
 * const { removedAgents } = await sweepIsolation(runningAgentIds, { table: 'scaler_primitives' });
 * ```
 */
export async function sweepIsolation(
  liveAgentIds: Iterable<string>,
  opts?: NftOptions,
): Promise<{
  /** Agents whose rules were removed. */
  removedAgents: string[];
  /** Rules removed in total. */
  removedRules: number;
}> {
  // Checked before nft runs; read again after the table (an agent that became alive
  // meanwhile, in a live view, keeps its rules), unless it is a one-shot iterator.
  const liveNow = liveAgentView(liveAgentIds);
  const ctx = context(opts);
  for (let attempt = 0; ; attempt++) {
    const footprints = agentFootprints(await readState(ctx));
    const live = liveNow();
    const gone = [...footprints.values()].filter((f) => !live.has(f.agentId));
    try {
      await apply(ctx, gone.flatMap(removal));
      return {
        removedAgents: gone.map((f) => f.agentId).sort(),
        removedRules: gone.reduce((n, f) => n + f.rules.length, 0),
      };
    } catch (error) {
      if (!isNftCommandError(error) || attempt >= 2) throw error;
    }
  }
}

function compare(
  ctx: Context,
  state: TableState,
  agentId: string,
  policy: NormalizedPolicy,
): string[] {
  const { layout, family } = ctx;
  if (!state.exists) return ['the table does not exist (flushed by a firewall reload?)'];
  const problems: string[] = [];
  const footprint = agentFootprints(state).get(agentId);
  if (!footprint) return [`no rules for agent ${agentId}`];
  const digest = policyDigest(policy, layout, family);
  const expected = expectedVerdicts(agentId, policy, layout, family);
  for (const [chain, verdicts] of expected) {
    const actual = footprint.rules.filter((r) => r.chain === chain);
    if (actual.length !== verdicts.length || actual.some((r, i) => r.verdict !== verdicts[i])) {
      problems.push(
        `chain ${chain}: expected ${verdicts.length} rules, found ${actual.length} (or in another order)`,
      );
    }
  }
  const expectedChains = new Set(expected.keys());
  const stray = footprint.rules.filter((r) => !expectedChains.has(r.chain));
  if (stray.length > 0) problems.push(`${stray.length} rules in chains this policy does not use`);
  if (footprint.rules.some((r) => !r.comment?.endsWith(`policy=${digest}`))) {
    problems.push('rules were made from a different policy');
  }
  for (const { part } of agentRules(policy, family)) {
    const chain = layout === 'vmap' ? agentChainName(agentId, part) : undefined;
    if (chain === undefined) continue;
    const { map, key } = dispatchFor(policy, part);
    if (
      !state.elements.some((e) => e.map === map && e.key.value === key.value && e.target === chain)
    ) {
      problems.push(`map ${map} does not send ${key.value} to ${chain}`);
    }
    if (!state.rules.some((r) => r.vmap === map)) problems.push(`no dispatch rule consults ${map}`);
  }
  if (layout === 'rules' && skeletonRepair(ctx, state).some((c) => c.op === 'add chain')) {
    problems.push('a base chain is missing');
  }
  return problems;
}

/**
 * Check that an agent's rules are in place as `policy` says (detects rules wiped by a
 * firewall reload or `nft flush ruleset`), and with `repair: true` re-apply them.
 *
 * It compares per chain the number, order and verdict of the agent's rules, the policy
 * digest in their comments and (vmap) the map element; it does not re-parse every match.
 * Give the `table`, `family` and `layout` the agent was isolated with.
 *
 * @example
 * ```ts
 * import { type IsolationPolicy, verifyIsolation } from 'scaler-primitives/nftables';
 *
 * declare const policy: IsolationPolicy; // the policy ci-42 was isolated with
 * const { ok, problems } = await verifyIsolation('ci-42', policy, { repair: true });
 * if (!ok) console.warn(`re-applied isolation of ci-42: ${problems.join('; ')}`);
 * ```
 */
export async function verifyIsolation(
  agentId: string,
  policy: IsolationPolicy,
  opts?: NftOptions & {
    /** Re-apply the policy when something is missing or different. @default false */
    repair?: boolean;
  },
): Promise<{
  /** True when the agent's rules were in place as the policy says (before any repair). */
  ok: boolean;
  /** One sentence per problem found. */
  problems: string[];
  /** True when `repair` re-applied the policy. */
  repaired: boolean;
}> {
  const id = validateAgentId(agentId);
  const normalized = normalizePolicy(policy);
  const ctx = context(opts, VERIFY_OPTION_KEYS);
  checkPolicyFamily(normalized, ctx.family);
  const problems = compare(ctx, await readState(ctx), id, normalized);
  if (problems.length === 0 || !opts?.repair)
    return { ok: problems.length === 0, problems, repaired: false };
  await replaceAgent(ctx, id, normalized);
  return { ok: false, problems, repaired: true };
}

/** One agent found in the table. */
export type IsolatedAgent = Awaited<ReturnType<typeof listIsolatedAgents>>[number];
/** What {@link sweepIsolation} removed. */
export type SweepResult = Awaited<ReturnType<typeof sweepIsolation>>;
/** Options of {@link verifyIsolation}. */
export type VerifyOptions = NonNullable<Parameters<typeof verifyIsolation>[2]>;
/** What {@link verifyIsolation} found. */
export type VerifyResult = Awaited<ReturnType<typeof verifyIsolation>>;
