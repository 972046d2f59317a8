/**
 * What an agent's policy allows, as rules per part (forward, input, output) without
 * identity match or comment: the same for both layouts and checked against the
 * table's family.
 */
import { InvalidInputError } from '../errors.js';
import type { AgentPart } from './layout.js';
import type { AddrFamily, NftRule, TableFamily } from './plan.js';
import type { NormalizedPolicy } from './policy.js';
import type { Cidr } from './validate.js';

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
