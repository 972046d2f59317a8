/**
 * The names and comments the library gives what it owns in a table: per-agent chain
 * names, rule comments (`agent=<id> policy=<digest>`) and the policy digest, each with
 * its parser. Nothing is ever matched by substring.
 */
import { createHash } from 'node:crypto';
import { InvalidInputError } from '../errors/index.js';
import type { AgentPart, NftLayoutName } from './layout.js';
import type { TableFamily } from './plan.js';
import type { NormalizedPolicy } from './policy.js';
import { validateAgentId } from './validate.js';

/**
 * Name of the per-agent chain for one part (vmap layout), e.g. `agent-ci-7-fwd`.
 *
 * @throws {InvalidInputError} for an invalid agent id or a part other than `fwd`, `in`, `out`.
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
