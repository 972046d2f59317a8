/**
 * Building an agent's isolation plan: what its policy allows as rules per part (forward,
 * input, output), the identity match or verdict-map element that sends the agent's traffic
 * to those rules, the commands that install them in either layout, and the verdicts an
 * installed agent is expected to have.
 */
import { InvalidInputError } from '../errors/index.js';
import { strictOptions } from '../internal/strict-keys.js';
import {
  type AgentPart,
  DISPATCH_MAPS,
  hookOf,
  type NftLayoutName,
  skeletonCommands,
} from './layout.js';
import { agentChainName, agentComment, policyDigest } from './names.js';
import type {
  AddrFamily,
  DispatchKey,
  NftCommand,
  NftElementKey,
  NftExpr,
  NftPlan,
  NftRule,
  TableFamily,
} from './plan.js';
import { type IsolationPolicy, type NormalizedPolicy, normalizePolicy } from './policy.js';
import { renderPlan } from './render.js';
import type { NftOptions } from './session.js';
import {
  type Cidr,
  DEFAULT_FAMILY,
  DEFAULT_TABLE,
  validateAgentId,
  validateFamily,
  validateLayout,
  validateTableName,
} from './validate.js';

/** The address family of a CIDR as nftables names it. */
export function cidrFamily(cidr: Cidr): AddrFamily {
  return cidr.family === 4 ? 'ip' : 'ip6';
}

/**
 * Address families the table filters for this agent: a `saddr` agent's own family; both in
 * an `inet` table, IPv4 only in an `ip` table (its IPv6 rules are left out, since such a
 * table never sees IPv6 packets).
 */
function families(policy: NormalizedPolicy, tableFamily: TableFamily): AddrFamily[] {
  if (policy.identity.kind === 'saddr') return [cidrFamily(policy.identity.value)];
  return tableFamily === 'ip' ? ['ip'] : ['ip', 'ip6'];
}

/**
 * Refuse a policy a table of `tableFamily` cannot enforce: an IPv6 `saddr` agent in an `ip`
 * table would get no rule at all (the table never sees its packets).
 *
 * @throws {InvalidInputError} naming the address and the way out.
 */
export function checkPolicyFamily(policy: NormalizedPolicy, tableFamily: TableFamily): void {
  if (
    tableFamily === 'ip' &&
    policy.identity.kind === 'saddr' &&
    policy.identity.value.family === 6
  ) {
    throw new InvalidInputError(
      'table family',
      policy.identity.value.text,
      `Invalid policy for an \`ip\` table: the agent's source address ${policy.identity.value.text} is IPv6, which a table of family \`ip\` never sees, so the agent would not be isolated at all. Use \`family: 'inet'\` (the default) or an IPv4 address.`,
    );
  }
}

function daddrRules(
  cidrs: readonly Cidr[],
  allowed: readonly AddrFamily[],
  verdict: 'accept' | 'drop',
): Array<Omit<NftRule, 'comment'>> {
  const out: Array<Omit<NftRule, 'comment'>> = [];
  for (const fam of allowed) {
    const addrs = cidrs.filter((c) => cidrFamily(c) === fam).map((c) => c.text);
    if (addrs.length > 0) out.push({ exprs: [{ type: 'daddr', family: fam, addrs }], verdict });
  }
  return out;
}

const ESTABLISHED: Omit<NftRule, 'comment'> = {
  exprs: [{ type: 'ctState', states: ['established', 'related'] }],
  verdict: 'accept',
};

/** Rules for traffic the agent sends past the host (forward hook) or, for `skuid`, out of it. */
function outboundRules(
  policy: NormalizedPolicy,
  tableFamily: TableFamily,
): Array<Omit<NftRule, 'comment'>> {
  const fams = families(policy, tableFamily);
  const rules = [
    ESTABLISHED,
    ...daddrRules(policy.gateway, fams, 'accept'),
    ...daddrRules(policy.metadata, fams, 'drop'),
    ...daddrRules(policy.allowlist, fams, 'accept'),
    ...daddrRules(policy.blocked, fams, 'drop'),
  ];
  if (policy.denyAll) {
    // A process on the host keeps its own loopback (local test servers, sockets).
    if (policy.identity.kind === 'skuid') {
      rules.push({ exprs: [{ type: 'oifname', name: 'lo' }], verdict: 'accept' });
    }
    rules.push({ exprs: [], verdict: 'drop' });
  }
  return rules;
}

/** Rules for traffic the agent addresses to the host itself (input hook). */
function hostRules(
  policy: NormalizedPolicy,
  tableFamily: TableFamily,
): Array<Omit<NftRule, 'comment'>> {
  const rules: Array<Omit<NftRule, 'comment'>> = [ESTABLISHED];
  if (families(policy, tableFamily).includes('ip6')) {
    rules.push({
      exprs: [
        {
          type: 'icmpv6Type',
          types: ['nd-neighbor-solicit', 'nd-neighbor-advert', 'nd-router-solicit'],
        },
      ],
      verdict: 'accept',
    });
  }
  for (const protocol of ['tcp', 'udp'] as const) {
    const ports = policy.hostAccess[protocol];
    if (ports.length > 0) {
      rules.push({ exprs: [{ type: 'dport', protocol, ports }], verdict: 'accept' });
    }
  }
  rules.push({ exprs: [], verdict: 'drop' });
  return rules;
}

/**
 * The agent's rules per part, without identity match or comment.
 *
 * @throws {InvalidInputError} for a policy the table's family cannot enforce.
 */
export function agentRules(
  policy: NormalizedPolicy,
  tableFamily: TableFamily,
): Array<{ part: AgentPart; rules: Array<Omit<NftRule, 'comment'>> }> {
  checkPolicyFamily(policy, tableFamily);
  if (policy.identity.kind === 'skuid') {
    return [{ part: 'out', rules: outboundRules(policy, tableFamily) }];
  }
  return [
    { part: 'fwd', rules: outboundRules(policy, tableFamily) },
    { part: 'in', rules: hostRules(policy, tableFamily) },
  ];
}

function identityExpr(policy: NormalizedPolicy): NftExpr {
  const id = policy.identity;
  switch (id.kind) {
    case 'iifname':
      return { type: 'iifname', name: id.value };
    case 'saddr':
      return { type: 'saddr', family: cidrFamily(id.value), addrs: [id.value.text] };
    case 'skuid':
      return { type: 'skuid', uid: id.value };
  }
}

/** The element key and map for an agent's identity in one part (vmap layout). */
export function dispatchFor(
  policy: NormalizedPolicy,
  part: AgentPart,
): { map: string; key: NftElementKey } {
  const id = policy.identity;
  const wanted: DispatchKey =
    id.kind === 'iifname'
      ? 'iifname'
      : id.kind === 'skuid'
        ? 'meta skuid'
        : id.value.family === 4
          ? 'ip saddr'
          : 'ip6 saddr';
  const entry = DISPATCH_MAPS.find((m) => m.part === part && m.key === wanted)!;
  const key: NftElementKey =
    id.kind === 'iifname'
      ? { kind: 'ifname', value: id.value }
      : id.kind === 'skuid'
        ? { kind: 'uid', value: id.value }
        : { kind: 'addr', value: id.value.text };
  return { map: entry.map, key };
}

/**
 * Commands that install an agent's rules into a table that has its skeleton and holds
 * nothing of this agent yet. In the vmap layout they start with `create chain`, which
 * fails if the agent's chain exists, so applying them twice can never duplicate rules.
 */
export function agentAddCommands(
  agentId: string,
  policy: NormalizedPolicy,
  layout: NftLayoutName,
  tableFamily: TableFamily,
): NftCommand[] {
  const comment = agentComment(agentId, policyDigest(policy, layout, tableFamily));
  const commands: NftCommand[] = [];
  for (const { part, rules } of agentRules(policy, tableFamily)) {
    if (layout === 'rules') {
      const match = identityExpr(policy);
      for (const rule of rules) {
        commands.push({
          op: 'add rule',
          chain: hookOf(part),
          rule: { ...rule, exprs: [match, ...rule.exprs], comment },
        });
      }
      continue;
    }
    const chain = agentChainName(agentId, part);
    commands.push({ op: 'create chain', chain });
    for (const rule of rules) commands.push({ op: 'add rule', chain, rule: { ...rule, comment } });
    commands.push({ op: 'add element', ...dispatchFor(policy, part), target: chain });
  }
  return commands;
}

/** Expected shape of an agent's rules: per chain, the verdict of each rule in order. */
export function expectedVerdicts(
  agentId: string,
  policy: NormalizedPolicy,
  layout: NftLayoutName,
  tableFamily: TableFamily,
): Map<string, Array<'accept' | 'drop' | undefined>> {
  const out = new Map<string, Array<'accept' | 'drop' | undefined>>();
  for (const { part, rules } of agentRules(policy, tableFamily)) {
    const chain = layout === 'rules' ? hookOf(part) : agentChainName(agentId, part);
    out.set(
      chain,
      rules.map((r) => r.verdict),
    );
  }
  return out;
}

/**
 * Options of {@link renderIsolationPlan} and {@link buildIsolationPlan}. Strict: an unknown
 * key is an `InvalidInputError`.
 */
export interface PlanOptions {
  /** Table name. @default 'scaler_primitives' */
  table?: string;
  /**
   * Table family: `inet` (IPv4 and IPv6) or `ip` (IPv4 only: IPv6 rules, maps and the ICMPv6
   * rule are left out; an IPv6 `saddr` agent is refused). @default 'inet'
   */
  family?: NftOptions['family'];
  /** Layout: `vmap` or `rules` (as {@link NftOptions.layout}). @default 'vmap' */
  layout?: NftOptions['layout'];
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
