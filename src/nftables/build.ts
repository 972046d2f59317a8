import { createHash } from 'node:crypto';
import { InvalidInputError } from '../errors.js';
import type {
  AddrFamily,
  DispatchKey,
  NftCommand,
  NftElementKey,
  NftExpr,
  NftHook,
  NftRule,
  TableFamily,
} from './plan.js';
import type { NormalizedPolicy } from './policy.js';
import { type Cidr, validateAgentId } from './validate.js';

/**
 * Where an agent's rules live: see docs/nftables.md for both layouts.
 *
 * @example
 * ```ts
 * import { addIsolationRules, NftLayout } from 'scaler-primitives/nftables';
 *
 * // kici's layout: the agent's rules go into the shared base chains.
 * await addIsolationRules('ci-42', { iifname: 'tap-ci-42' }, { layout: NftLayout.rules });
 * ```
 */
export const NftLayout = {
  /** One chain per agent, reached through verdict maps keyed by the agent's identity. */
  vmap: 'vmap',
  /** The seed's layout: the agent's rules appended to the shared base chains. */
  rules: 'rules',
} as const;

/**
 * `'vmap' | 'rules'`.
 *
 * @example
 * ```ts
 * import { listIsolatedAgents, type NftLayoutName } from 'scaler-primitives/nftables';
 *
 * const layout: NftLayoutName = 'rules';
 * const agents = await listIsolatedAgents({ family: 'ip', table: 'kici', layout });
 * ```
 */
export type NftLayoutName = (typeof NftLayout)[keyof typeof NftLayout];

/** Base chains of the table: name -> hook. */
export const BASE_CHAINS: Readonly<Record<NftHook, NftHook>> = {
  forward: 'forward',
  input: 'input',
  output: 'output',
};

/**
 * Which part of the path a set of agent rules guards.
 *
 * @example
 * ```ts
 * import { type AgentPart, agentChainName } from 'scaler-primitives/nftables';
 *
 * const parts: AgentPart[] = ['fwd', 'in', 'out'];
 * parts.map((part) => agentChainName('ci-42', part)); // ['agent-ci-42-fwd', 'agent-ci-42-in', ...]
 * ```
 */
export type AgentPart = 'fwd' | 'in' | 'out';

const PART_HOOK: Readonly<Record<AgentPart, NftHook>> = {
  fwd: 'forward',
  in: 'input',
  out: 'output',
};

/**
 * One verdict map of the `vmap` layout.
 *
 * @example
 * ```ts
 * import { DISPATCH_MAPS, type DispatchMap } from 'scaler-primitives/nftables';
 *
 * const byInterface: DispatchMap[] = DISPATCH_MAPS.filter((m) => m.key === 'iifname');
 * byInterface.map((m) => m.map); // ['fwd_iif', 'in_iif']
 * ```
 */
export interface DispatchMap {
  /** The map's name. */
  readonly map: string;
  /** What it is keyed by. */
  readonly key: DispatchKey;
  /** Which of an agent's chains its elements jump to (forward, input or output). */
  readonly part: AgentPart;
}

/**
 * Verdict maps of the `vmap` layout, with their key and the base chain that consults them.
 *
 * @example
 * ```ts
 * import { DISPATCH_MAPS } from 'scaler-primitives/nftables';
 *
 * for (const { map, key, part } of DISPATCH_MAPS) console.log(`${map}: ${key} -> agent chain ${part}`);
 * // fwd_iif: iifname -> agent chain fwd ... out_uid: meta skuid -> agent chain out
 * ```
 */
export const DISPATCH_MAPS: ReadonlyArray<DispatchMap> = [
  { map: 'fwd_iif', key: 'iifname', part: 'fwd' },
  { map: 'fwd_v4', key: 'ip saddr', part: 'fwd' },
  { map: 'fwd_v6', key: 'ip6 saddr', part: 'fwd' },
  { map: 'in_iif', key: 'iifname', part: 'in' },
  { map: 'in_v4', key: 'ip saddr', part: 'in' },
  { map: 'in_v6', key: 'ip6 saddr', part: 'in' },
  { map: 'out_uid', key: 'meta skuid', part: 'out' },
];

/**
 * The verdict maps a table of `family` holds (vmap layout): all of {@link DISPATCH_MAPS} in
 * an `inet` table, those without an `ip6 saddr` key in an `ip` table.
 */
export function dispatchMaps(family: TableFamily): ReadonlyArray<DispatchMap> {
  return family === 'ip' ? DISPATCH_MAPS.filter((m) => m.key !== 'ip6 saddr') : DISPATCH_MAPS;
}

/** The base chain that consults an agent part's chain or holds its rules. */
export function hookOf(part: AgentPart): NftHook {
  return PART_HOOK[part];
}

/** Comment carried by the dispatch rules the table skeleton puts in the base chains. */
export const DISPATCH_COMMENT = 'dispatch';

/**
 * Name of the per-agent chain for one part (vmap layout), e.g. `agent-ci-7-fwd`.
 *
 * @throws {InvalidInputError} for an invalid agent id or a part other than `fwd`, `in`, `out`.
 *
 * @example
 * ```ts
 * import { agentChainName } from 'scaler-primitives/nftables';
 *
 * agentChainName('ci-42', 'fwd'); // 'agent-ci-42-fwd', the chain `nft list chain inet scaler_primitives ...` shows
 * ```
 */
export function agentChainName(agentId: string, part: AgentPart): string {
  if (part !== 'fwd' && part !== 'in' && part !== 'out') {
    throw new InvalidInputError(
      'agent chain part',
      part,
      `Invalid agent chain part ${JSON.stringify(String(part).slice(0, 40))}: expected \`fwd\`, \`in\` or \`out\`.`,
    );
  }
  return `agent-${validateAgentId(agentId)}-${part}`;
}

const AGENT_CHAIN = /^agent-([A-Za-z0-9][A-Za-z0-9_.-]{0,63})-(fwd|in|out)$/;

/** The agent id and part of a per-agent chain name, or undefined for any other chain. */
export function parseAgentChainName(
  name: string,
): { agentId: string; part: AgentPart } | undefined {
  const match = AGENT_CHAIN.exec(name);
  return match ? { agentId: match[1]!, part: match[2] as AgentPart } : undefined;
}

/** Comment every rule of an agent carries: `agent=<id> policy=<digest>`. */
export function agentComment(agentId: string, digest: string): string {
  return `agent=${agentId} policy=${digest}`;
}

const COMMENT = /^agent=([A-Za-z0-9][A-Za-z0-9_.-]{0,63})(?: policy=([0-9a-f]{12}))?$/;

/** Parse a rule comment; undefined when it is not one of ours. Compares nothing by substring. */
export function parseAgentComment(
  comment: string | undefined,
): { agentId: string; digest: string | undefined } | undefined {
  if (comment === undefined) return undefined;
  const match = COMMENT.exec(comment);
  return match ? { agentId: match[1]!, digest: match[2] } : undefined;
}

/**
 * A short stable digest of a normalized policy, layout and (for a table that is not `inet`)
 * family, stored in every rule comment.
 */
export function policyDigest(
  policy: NormalizedPolicy,
  layout: NftLayoutName,
  tableFamily: TableFamily,
): string {
  // `inet` digests stay what they were before tables had a family.
  const input =
    tableFamily === 'inet' ? { layout, policy } : { family: tableFamily, layout, policy };
  return createHash('sha256').update(JSON.stringify(input)).digest('hex').slice(0, 12);
}

/**
 * The commands that create the table and its base chains and, for the `vmap` layout, the
 * verdict maps of the table's family and the dispatch rules. The `rules` layout needs no
 * map: its skeleton is the table and the base chains, as the seed's.
 */
export function skeletonCommands(
  tableFamily: TableFamily = 'inet',
  layout: NftLayoutName = 'vmap',
): NftCommand[] {
  const commands: NftCommand[] = [{ op: 'add table' }];
  for (const hook of Object.values(BASE_CHAINS))
    commands.push({ op: 'add chain', chain: hook, hook });
  if (layout === 'rules') return commands;
  const maps = dispatchMaps(tableFamily);
  for (const { map, key } of maps) commands.push({ op: 'add map', map, key });
  for (const { map, key, part } of maps) {
    commands.push({
      op: 'add rule',
      chain: PART_HOOK[part],
      rule: { exprs: [{ type: 'vmap', key, map }], comment: DISPATCH_COMMENT },
    });
  }
  return commands;
}

function family(cidr: Cidr): AddrFamily {
  return cidr.family === 4 ? 'ip' : 'ip6';
}

/**
 * Address families the table filters for this agent: a `saddr` agent's own family; both in
 * an `inet` table, IPv4 only in an `ip` table (its IPv6 rules are left out, since such a
 * table never sees IPv6 packets).
 */
function families(policy: NormalizedPolicy, tableFamily: TableFamily): AddrFamily[] {
  if (policy.identity.kind === 'saddr') return [family(policy.identity.value)];
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
    const addrs = cidrs.filter((c) => family(c) === fam).map((c) => c.text);
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
      return { type: 'saddr', family: family(id.value), addrs: [id.value.text] };
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

/** How many rules an agent owns once applied (what `removeIsolationRules` would count). */
export function agentRuleCount(policy: NormalizedPolicy, tableFamily: TableFamily): number {
  return agentRules(policy, tableFamily).reduce((sum, part) => sum + part.rules.length, 0);
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
          chain: PART_HOOK[part],
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
    const chain = layout === 'rules' ? PART_HOOK[part] : agentChainName(agentId, part);
    out.set(
      chain,
      rules.map((r) => r.verdict),
    );
  }
  return out;
}
