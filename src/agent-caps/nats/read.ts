import type { Msg, MsgHdrs, NatsConnection } from '@nats-io/transport-node';
import { ErrorCode, NatsRequestError } from '../../errors/index.js';
import { isNoResponders, toNatsRequestError } from '../../internal/nats-errors.js';
import { type AgentCaps, type DecodeAgentCapsOptions, decodeAgentCaps } from '../codec.js';
import { directGetSubject } from '../names.js';
import { checkHandle, checkNatsOptions } from './check.js';

/**
 * What reading one agent's caps found.
 */
export type AgentCapsRead =
  | {
      /** The bucket answered. */
      kind: 'current';
      /** The caps; all unset for a missing, deleted or purged key. */
      caps: AgentCaps;
      /**
       * The stream sequence of the value read, or 0 when the key has none.
       * Informational: a direct get may be served by a lagging replica, so do
       * not use it as the base of a compare-and-set.
       */
      revision: number;
    }
  | {
      /**
       * Nothing answered for the bucket's stream: no caps were ever written, or
       * JetStream is not serving the stream right now. Not the same as unset
       * caps: the second case says nothing about the agent.
       */
      kind: 'no-bucket';
    };

/**
 * Options of {@link readAgentCaps}.
 */
export interface ReadAgentCapsOptions extends DecodeAgentCapsOptions {
  /**
   * How long to wait for the reply, in milliseconds.
   * @default 2000
   */
  timeout?: number;
}

const TIMEOUT_HINT =
  'Several causes look like a timeout: a request the server refuses for permissions (the ' +
  'reply inbox may not be subscribed, or a client that does not report the refusal), a ' +
  'stream without allow_direct, and on nats-server before 2.10.26 a bucket that does not ' +
  'exist. Check that this connection may publish to the subject above and subscribe to its ' +
  'inbox, and that stream KV_agent-limits exists with allow_direct: true.';

// KV delete and purge leave an empty marker with this header; a server that
// expires a key (subject delete markers, 2.11+) marks it with Nats-Marker-Reason.
function isRemoved(headers: MsgHdrs | undefined): boolean {
  if (headers === undefined) return false;
  const operation = headers.get('KV-Operation');
  return operation === 'DEL' || operation === 'PURGE' || headers.has('Nats-Marker-Reason');
}

/**
 * Read `agent`'s current caps with one JetStream direct get of the last
 * message on its key subject (the only request a host needs a grant for).
 *
 * A missing key, a delete or purge marker, or a server-written marker
 * (`Nats-Marker-Reason`) reads as all unset: `{ kind: 'current', caps: {} }`.
 * No responders reads as `{ kind: 'no-bucket' }`.
 *
 * @param nc - A NATS connection (nats.js v3).
 * @param agent - The agent name (one subject token).
 * @param options - `timeout` (default 2000 ms), `raw`, `allowMemoryPercent`.
 * @throws {@link errors!InvalidInputError} when `agent` is not one valid subject token (or is
 * longer than `MAX_AGENT_NAME_LENGTH` (256)), or `options` has an unknown key; nothing is sent.
 * @throws `TypeError` when `nc` is not a connection or `timeout` is not 1 ms to one hour.
 * @throws {@link errors!CapsValueError} when the stored value is not valid caps (unless `raw`).
 * @throws {@link errors!NatsRequestError} with code `ERR_NATS_TIMEOUT` on a timeout (whose
 * message explains that a refused permission or a stream without `allow_direct` looks the
 * same), or `ERR_NATS_REQUEST` for any other failure or an unexpected status.
 *
 * @example
 * ```ts
 * import { writeFileSync } from 'node:fs';
 * import type { NatsConnection } from '@nats-io/transport-node';
 * import { renderDropIn } from 'scaler-primitives/agent-caps';
 * import { readAgentCaps } from 'scaler-primitives/agent-caps/nats';
 * declare const nc: NatsConnection;
 * const read = await readAgentCaps(nc, 'iris');
 * const path = '/run/systemd/system/ci-agent-iris.scope.d/50-caps.conf';
 * if (read.kind === 'current') writeFileSync(path, renderDropIn(read.caps, { section: 'Scope' }));
 * ```
 */
export async function readAgentCaps(
  nc: NatsConnection,
  agent: string,
  options?: {
    /**
     * Accept a percentage for `memoryMax` (`"50%"` of the host's memory). Refused by
     * default: caps travel between hosts with different amounts of memory.
     * @default false
     */
    allowMemoryPercent?: boolean;
    /**
     * Return the values as stored, without the systemd grammar check (the JSON shape is
     * still checked). For inspection tools only: never hand raw values to systemd.
     * @default false
     */
    raw?: boolean;
    /**
     * How long to wait for the reply, in milliseconds.
     * @default 2000
     */
    timeout?: number;
  },
): Promise<AgentCapsRead> {
  // Everything is checked before anything is sent: an over-long subject would make
  // the server close this connection for every other user of it.
  checkHandle(nc, 'nc', ['request']);
  const opts = checkNatsOptions<ReadAgentCapsOptions>(
    options,
    ['timeout', 'raw', 'allowMemoryPercent'],
    'read options',
  );
  const subject = directGetSubject(agent);
  const what = `Reading the caps of agent ${JSON.stringify(agent)}`;
  let reply: Msg;
  try {
    reply = await nc.request(subject, new Uint8Array(0), { timeout: opts.timeout ?? 2000 });
  } catch (error) {
    if (isNoResponders(error)) return { kind: 'no-bucket' };
    throw toNatsRequestError(error, subject, what, TIMEOUT_HINT);
  }
  const status = reply.headers?.code ?? 0;
  if (status === 404) return { kind: 'current', caps: {}, revision: 0 };
  if (status !== 0) {
    const description = reply.headers?.description ? ` ${reply.headers.description}` : '';
    throw new NatsRequestError(
      ErrorCode.NATS_REQUEST,
      subject,
      `${what} failed (${subject}): the server answered with status ${status}${description}.`,
    );
  }
  const revision = Number(reply.headers?.get('Nats-Sequence') ?? 0) || 0;
  if (isRemoved(reply.headers)) return { kind: 'current', caps: {}, revision };
  const { timeout: _timeout, ...decodeOptions } = opts;
  return { kind: 'current', caps: decodeAgentCaps(reply.data, decodeOptions), revision };
}
