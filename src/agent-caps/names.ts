import { InvalidInputError } from '../errors/index.js';
import { showValue } from '../internal/strict-keys.js';

/**
 * The JetStream KV bucket that holds one caps value per agent, keyed by agent name.
 */
export const BUCKET = 'agent-limits';

/**
 * The stream backing {@link BUCKET} (KV buckets are streams named `KV_<bucket>`).
 */
export const STREAM = `KV_${BUCKET}`;

// One subject token that is also a valid KV key: the KV key charset (nats.js and
// async-nats agree on `[-/_=.a-zA-Z0-9]`) minus the `.` that would split it into
// several tokens. Wildcards and whitespace are outside the charset.
const AGENT_NAME = /^[-/=\w]+$/;

/**
 * The longest agent name accepted: 256 characters (the charset is ASCII, so also
 * 256 bytes). Checked before anything is sent: a subject longer than the server's
 * control line (4096 bytes by default) makes nats-server close the whole
 * connection, for every other user of it.
 */
export const MAX_AGENT_NAME_LENGTH = 256;

/**
 * Check that `agent` is usable as one subject token and one KV key, and return it.
 *
 * A name such as `a.*` or `>` would widen the subject a read, a watch or a
 * permission grant covers, so it is refused rather than escaped.
 *
 * @param agent - The agent name.
 * @returns The same name.
 * @throws {@link errors!InvalidInputError} when the name is empty, longer than
 * 256 characters, or contains a character outside
 * `A-Z a-z 0-9 _ - / =` (this excludes `.`, `*`, `>` and whitespace).
 *
 * @example
 * ```ts
 * import { assertAgentName } from 'scaler-primitives/agent-caps';
 *
 * assertAgentName('iris'); // 'iris'
 * assertAgentName('a.*');  // throws InvalidInputError
 * ```
 */
export function assertAgentName(agent: string): string {
  if (typeof agent !== 'string') {
    throw new TypeError(`Expected \`agent\` to be a string, got \`${typeof agent}\``);
  }
  if (agent.length > MAX_AGENT_NAME_LENGTH) {
    throw new InvalidInputError(
      'agent name',
      `${agent.length} characters`,
      `Invalid agent name ${showValue(agent)}: at most ${MAX_AGENT_NAME_LENGTH} characters are accepted.`,
    );
  }
  if (!AGENT_NAME.test(agent)) {
    throw new InvalidInputError(
      'agent name',
      agent,
      `Invalid agent name ${showValue(agent)}: expected one NATS subject token and KV key, ` +
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
 * import { keySubject } from 'scaler-primitives/agent-caps';
 *
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
 * import { directGetSubject } from 'scaler-primitives/agent-caps';
 *
 * directGetSubject('iris');
 * // '$JS.API.DIRECT.GET.KV_agent-limits.$KV.agent-limits.iris'
 * ```
 */
export function directGetSubject(agent: string): string {
  return `$JS.API.DIRECT.GET.${STREAM}.${keySubject(agent)}`;
}
