import {
  isNftCommandError,
  NftCommandError,
  NftNotInstalledError,
  NftPermissionError,
} from '../errors.js';
import { strictOptions } from '../internal/strict-keys.js';
import {
  agentAddCommands,
  agentChainName,
  agentRules,
  BASE_CHAINS,
  checkPolicyFamily,
  DISPATCH_COMMENT,
  dispatchFor,
  dispatchMaps,
  expectedVerdicts,
  hookOf,
  type NftLayoutName,
  policyDigest,
  skeletonCommands,
} from './build.js';
import {
  type AgentFootprint,
  agentFootprints,
  MISSING_TABLE,
  parseTableState,
  type TableState,
} from './parse.js';
import type { NftCommand, NftHook, TableFamily } from './plan.js';
import { type IsolationPolicy, type NormalizedPolicy, normalizePolicy } from './policy.js';
import { renderPlan } from './render.js';
import {
  DEFAULT_FAMILY,
  DEFAULT_TABLE,
  validateAgentId,
  validateFamily,
  validateLayout,
  validateNetnsName,
  validateTableName,
} from './validate.js';

/** What a command runner reports for a process that ran (whatever its exit code). */
export interface NftRunResult {
  /** Standard output. */
  stdout: string;
  /** Standard error. */
  stderr: string;
  /** Exit code. */
  exitCode: number;
}

/**
 * Runs one process. Resolves for any exit code; rejects (with `code: 'ENOENT'` when the
 * binary is missing) only when the process could not be started.
 */
export type NftRunner = (
  file: string,
  args: readonly string[],
  options: { input?: string },
) => Promise<NftRunResult>;

/**
 * Options shared by every function that runs `nft`. Strict: an unknown key is an
 * `InvalidInputError`, even with `bestEffort`.
 *
 * @example
 * ```ts
 * const opts: NftOptions = { table: 'agents', family: 'ip', netns: 'ci', requireSudo: true };
 * await ensureTable(opts); // sudo -n ip netns exec ci nft ... on table `ip agents`
 * ```
 */
export interface NftOptions {
  /** Run `sudo -n nft ...` (needs a NOPASSWD sudoers entry for nft). @default false */
  requireSudo?: boolean;
  /** Run nft inside this network namespace (`ip netns exec <netns> nft ...`). */
  netns?: string;
  /** Table name. @default 'scaler_primitives' */
  table?: string;
  /**
   * Table family: `inet` (IPv4 and IPv6 in one table) or `ip` (IPv4 only, like kici's
   * `ip kici`: IPv6 rules are left out and IPv6 traffic is not filtered at all).
   * @default 'inet'
   */
  family?: TableFamily;
  /** Layout for new rules; removal and listing understand both. @default 'vmap' */
  layout?: NftLayoutName;
  /** The nft binary. @default 'nft' */
  nftPath?: string;
  /** Command runner (tests record commands with it). @default execa */
  runner?: NftRunner;
}

const defaultRunner: NftRunner = async (file, args, { input }) => {
  // Loaded here only, so importing the pure builder never loads execa.
  const { execa } = await import('execa');
  const result = await execa(file, args, {
    reject: false,
    stripFinalNewline: false,
    ...(input === undefined ? { stdin: 'ignore' as const } : { input }),
  });
  if (result.exitCode === undefined) {
    throw Object.assign(new Error(result.message), {
      code: (result as { code?: string }).code,
      cause: result.cause,
    });
  }
  return {
    stdout: String(result.stdout),
    stderr: String(result.stderr),
    exitCode: result.exitCode,
  };
};

interface Context {
  table: string;
  family: TableFamily;
  layout: NftLayoutName;
  argv: (args: readonly string[]) => [string, string[]];
  runner: NftRunner;
  sudo: boolean;
}

const NFT_OPTION_KEYS = ['requireSudo', 'netns', 'table', 'family', 'layout', 'nftPath', 'runner'];
const REMOVE_OPTION_KEYS = [...NFT_OPTION_KEYS, 'policy', 'bestEffort', 'onError'];
const VERIFY_OPTION_KEYS = [...NFT_OPTION_KEYS, 'repair'];

function optionType(opts: object, key: string, type: 'boolean' | 'function' | 'string'): void {
  const value = (opts as Record<string, unknown>)[key];
  if (value !== undefined && typeof value !== type) {
    throw new TypeError(`Expected \`${key}\` to be a ${type}, got \`${typeof value}\``);
  }
}

function context(
  input: NftOptions | undefined,
  keys: readonly string[] = NFT_OPTION_KEYS,
): Context {
  const opts = strictOptions<NftOptions>(input, keys, 'nftables options');
  optionType(opts, 'requireSudo', 'boolean');
  optionType(opts, 'runner', 'function');
  optionType(opts, 'nftPath', 'string');
  for (const key of ['bestEffort', 'repair']) optionType(opts, key, 'boolean');
  optionType(opts, 'onError', 'function');
  if (
    opts.nftPath !== undefined &&
    (opts.nftPath.length === 0 || opts.nftPath.length > 4096 || opts.nftPath.includes('\0'))
  ) {
    throw new TypeError(
      `Expected \`nftPath\` to be a path of 1-4096 characters without NUL, got ${opts.nftPath.length} characters`,
    );
  }
  const table = validateTableName(opts.table ?? DEFAULT_TABLE);
  const family = validateFamily(opts.family ?? DEFAULT_FAMILY);
  const layout = validateLayout(opts.layout ?? 'vmap');
  const netns = opts.netns === undefined ? undefined : validateNetnsName(opts.netns);
  const nft = opts.nftPath ?? 'nft';
  const argv = (args: readonly string[]): [string, string[]] => {
    let full = [nft, ...args];
    if (netns !== undefined) full = ['ip', 'netns', 'exec', netns, ...full];
    if (opts.requireSudo) full = ['sudo', '-n', ...full];
    return [full[0]!, full.slice(1)];
  };
  return {
    table,
    family,
    layout,
    argv,
    runner: opts.runner ?? defaultRunner,
    sudo: !!opts.requireSudo,
  };
}

const PERMISSION =
  /operation not permitted|permission denied|a password is required|not allowed to execute|no tty present/i;

async function run(ctx: Context, args: readonly string[], input?: string): Promise<string> {
  const [file, argv] = ctx.argv(args);
  const command = [file, ...argv].join(' ');
  let result: NftRunResult;
  try {
    result = await ctx.runner(file, argv, input === undefined ? {} : { input });
  } catch (error) {
    if ((error as { code?: unknown })?.code === 'ENOENT') {
      throw new NftNotInstalledError(
        `\`${file}\` was not found on PATH while running \`${command}\`; install nftables (Debian/Ubuntu: apt-get install nftables)${ctx.sudo ? ' and sudo' : ''}.`,
        { command },
        { cause: error },
      );
    }
    throw new NftCommandError(
      `Could not start \`${command}\`: ${String(error)}`,
      { command },
      {
        cause: error,
      },
    );
  }
  if (result.exitCode === 0) return result.stdout;
  const stderr = result.stderr.trim();
  if (/exec of "[^"]*" failed: No such file or directory/.test(stderr)) {
    throw new NftNotInstalledError(
      `nft was not found while running \`${command}\`; install nftables (Debian/Ubuntu: apt-get install nftables).`,
      { command },
    );
  }
  if (PERMISSION.test(stderr)) {
    throw new NftPermissionError(
      `\`${command}\` was refused (${stderr.split('\n')[0]}): nft needs CAP_NET_ADMIN. Run as root, grant the capability, or pass \`requireSudo: true\` with a NOPASSWD sudoers entry for nft.`,
      { command, stderr },
    );
  }
  throw new NftCommandError(
    `\`${command}\` exited with code ${result.exitCode}: ${stderr || '(no output)'}`,
    { command, stderr },
  );
}

async function apply(ctx: Context, commands: readonly NftCommand[]): Promise<void> {
  if (commands.length === 0) return;
  await run(ctx, ['-f', '-'], renderPlan({ family: ctx.family, table: ctx.table, commands }));
}

async function readState(ctx: Context): Promise<TableState> {
  try {
    return parseTableState(
      await run(ctx, ['-j', 'list', 'table', ctx.family, ctx.table]),
      ctx.table,
      ctx.family,
    );
  } catch (error) {
    if (isNftCommandError(error) && /No such file or directory/.test(error.stderr ?? '')) {
      return MISSING_TABLE;
    }
    throw error;
  }
}

/**
 * Commands that bring a table's skeleton up to date: base chains, and for the `vmap` layout
 * the maps of the table's family and the dispatch rules.
 */
function skeletonRepair(ctx: Context, state: TableState): NftCommand[] {
  if (!state.exists) {
    // `create table` fails if a concurrent caller made it first; we then re-read and repair.
    const [, ...rest] = skeletonCommands(ctx.family, ctx.layout);
    return [{ op: 'create table' }, ...rest];
  }
  const commands: NftCommand[] = [];
  for (const hook of Object.values(BASE_CHAINS) as NftHook[]) {
    if (!state.chains.has(hook)) commands.push({ op: 'add chain', chain: hook, hook });
  }
  if (ctx.layout === 'rules') return commands;
  const maps = dispatchMaps(ctx.family);
  for (const { map, key } of maps) {
    if (!state.maps.has(map)) commands.push({ op: 'add map', map, key });
  }
  // Dispatch rules go to the top of their base chain; insert in reverse to keep their order.
  for (const { map, key, part } of [...maps].reverse()) {
    const chain = hookOf(part);
    if (!state.rules.some((r) => r.chain === chain && r.vmap === map)) {
      commands.push({
        op: 'insert rule',
        chain,
        rule: { exprs: [{ type: 'vmap', key, map }], comment: DISPATCH_COMMENT },
      });
    }
  }
  return commands;
}

function removal(footprint: AgentFootprint): NftCommand[] {
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

/** What {@link addIsolationRules} did. */
export interface AddResult {
  /** Rules the agent now owns. */
  rules: number;
  /** `nft` processes it ran. */
  nftCalls: number;
  /** Whether rules of an earlier application were replaced. */
  replaced: boolean;
}

async function replaceAgent(
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
 * await addIsolationRules('ci-42', { iifname: 'tap-ci-42', hostAccess: [8080] });
 * ```
 */
export async function addIsolationRules(
  agentId: string,
  policy: IsolationPolicy,
  opts?: NftOptions,
): Promise<AddResult> {
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

/** Options of {@link removeIsolationRules}. */
export interface RemoveOptions extends NftOptions {
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
 * await removeIsolationRules('ci-42', { policy, bestEffort: true, onError: log.warn });
 * ```
 */
export async function removeIsolationRules(agentId: string, opts?: RemoveOptions): Promise<number> {
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

/** One agent found in the table. */
export interface IsolatedAgent {
  /** The agent id (from rule comments and chain names). */
  agentId: string;
  /** Where its rules live. */
  layout: NftLayoutName;
  /** How many rules it owns. */
  rules: number;
  /** Identities dispatching to it (vmap layout: map keys; rules layout: matched values). */
  identities: Array<string | number>;
  /** Policy digests in its rule comments (one, unless an update was interrupted). */
  digests: string[];
}

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
 * for (const agent of await listIsolatedAgents({ family: 'ip', table: 'kici' })) {
 *   console.log(agent.agentId, agent.layout, agent.rules);
 * }
 * ```
 */
export async function listIsolatedAgents(opts?: NftOptions): Promise<IsolatedAgent[]> {
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

/** What {@link sweepIsolation} removed. */
export interface SweepResult {
  /** Agents whose rules were removed. */
  removedAgents: string[];
  /** Rules removed in total. */
  removedRules: number;
}

function liveIds(liveAgentIds: Iterable<string>): Set<string> {
  const live = new Set<string>();
  for (const id of liveAgentIds) {
    if (typeof id !== 'string') {
      throw new TypeError(`Expected every live agent id to be a string, got \`${typeof id}\``);
    }
    live.add(id);
  }
  return live;
}

/**
 * Remove the rules of every agent not in `liveAgentIds` (leftovers of crashed runs), all in
 * one transaction. Ids are compared exactly. `liveAgentIds` is iterated after the table is
 * read (again on each retry), so a live view (such as the one `ScalerManager.reconcile`
 * passes) includes an agent started while the table was being read.
 *
 * @example
 * ```ts
 * const { removedAgents } = await sweepIsolation(runningAgentIds, { table: 'scaler_primitives' });
 * ```
 */
export async function sweepIsolation(
  liveAgentIds: Iterable<string>,
  opts?: NftOptions,
): Promise<SweepResult> {
  if (
    typeof liveAgentIds !== 'object' ||
    liveAgentIds === null ||
    typeof (liveAgentIds as { [Symbol.iterator]?: unknown })[Symbol.iterator] !== 'function'
  ) {
    throw new TypeError('Expected `liveAgentIds` to be an iterable of agent ids');
  }
  // Checked before nft runs; read again after the table (an agent that became alive
  // meanwhile, in a live view, keeps its rules), unless it is a one-shot iterator.
  const first = liveIds(liveAgentIds);
  const oneShot = (liveAgentIds[Symbol.iterator]() as unknown) === liveAgentIds;
  const ctx = context(opts);
  for (let attempt = 0; ; attempt++) {
    const footprints = agentFootprints(await readState(ctx));
    const live = oneShot ? first : liveIds(liveAgentIds);
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

/** Options of {@link verifyIsolation}. */
export interface VerifyOptions extends NftOptions {
  /** Re-apply the policy when something is missing or different. @default false */
  repair?: boolean;
}

/** What {@link verifyIsolation} found. */
export interface VerifyResult {
  /** True when the agent's rules were in place as the policy says (before any repair). */
  ok: boolean;
  /** One sentence per problem found. */
  problems: string[];
  /** True when `repair` re-applied the policy. */
  repaired: boolean;
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
 * const { ok, problems } = await verifyIsolation('ci-42', policy, { repair: true });
 * if (!ok) log.warn(`re-applied isolation of ci-42: ${problems.join('; ')}`);
 * ```
 */
export async function verifyIsolation(
  agentId: string,
  policy: IsolationPolicy,
  opts?: VerifyOptions,
): Promise<VerifyResult> {
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
