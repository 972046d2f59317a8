import { InvalidInputError } from '../errors.js';

/** The JetStream KV bucket that holds one caps value per agent, keyed by agent name. */
export const BUCKET = 'agent-limits';

/** The stream backing {@link BUCKET} (KV buckets are streams named `KV_<bucket>`). */
export const STREAM = `KV_${BUCKET}`;

// One subject token that is also a valid KV key: the KV key charset (nats.js and
// async-nats agree on `[-/_=.a-zA-Z0-9]`) minus the `.` that would split it into
// several tokens. Wildcards and whitespace are outside the charset.
const AGENT_NAME = /^[-/=\w]+$/;

/**
 * Check that `agent` is usable as one subject token and one KV key, and return it.
 *
 * A name such as `a.*` or `>` would widen the subject a read, a watch or a
 * permission grant covers, so it is refused rather than escaped.
 *
 * @param agent - The agent name.
 * @returns The same name.
 * @throws {@link errors!InvalidInputError} when the name is empty or contains a
 * character outside `A-Z a-z 0-9 _ - / =` (this excludes `.`, `*`, `>` and whitespace).
 *
 * @example
 * ```ts
 * assertAgentName('iris'); // 'iris'
 * assertAgentName('a.*');  // throws InvalidInputError
 * ```
 */
export function assertAgentName(agent: string): string {
  if (typeof agent !== 'string') {
    throw new TypeError(`Expected \`agent\` to be a string, got \`${typeof agent}\``);
  }
  if (!AGENT_NAME.test(agent)) {
    throw new InvalidInputError(
      'agent name',
      agent,
      `Invalid agent name ${JSON.stringify(agent)}: expected one NATS subject token and KV key, ` +
        'made of letters, digits, "_", "-", "/" or "=" (no ".", "*", ">", whitespace, not empty).',
    );
  }
  return agent;
}

/**
 * The subject `agent`'s caps are stored under: `$KV.agent-limits.<agent>`.
 *
 * @param agent - The agent name.
 * @throws {@link errors!InvalidInputError} when the name is not one valid subject token (see {@link assertAgentName}).
 *
 * @example
 * ```ts
 * keySubject('iris'); // '$KV.agent-limits.iris'
 * ```
 */
export function keySubject(agent: string): string {
  return `$KV.${BUCKET}.${assertAgentName(agent)}`;
}

/**
 * The request subject that reads `agent`'s current caps with one JetStream
 * direct get: `$JS.API.DIRECT.GET.KV_agent-limits.$KV.agent-limits.<agent>`.
 *
 * This is the subject a hive's read-only grant must allow.
 *
 * @param agent - The agent name.
 * @throws {@link errors!InvalidInputError} when the name is not one valid subject token (see {@link assertAgentName}).
 *
 * @example
 * ```ts
 * directGetSubject('iris');
 * // '$JS.API.DIRECT.GET.KV_agent-limits.$KV.agent-limits.iris'
 * ```
 */
export function directGetSubject(agent: string): string {
  return `$JS.API.DIRECT.GET.${STREAM}.${keySubject(agent)}`;
}
