/**
 * An agent's rules as commands: the identity match or the verdict-map element that
 * sends the agent's traffic to its rules, the commands that install them in either
 * layout, and the verdicts an installed agent is expected to have.
 */
import { agentRules, cidrFamily } from './agent-rules.js';
import { type AgentPart, DISPATCH_MAPS, hookOf, type NftLayoutName } from './layout.js';
import { agentChainName, agentComment, policyDigest } from './names.js';
import type { DispatchKey, NftCommand, NftElementKey, NftExpr, TableFamily } from './plan.js';
import type { NormalizedPolicy } from './policy.js';

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
