import { Kvm, type KvWatchEntry } from '@nats-io/kv';
import type { NatsConnection, QueuedIterator } from '@nats-io/transport-node';
import { isCapsValueError } from '../../errors/agent-caps.js';
import type { CapsValueError } from '../../errors/index.js';
import { isStreamNotFound, toNatsRequestError } from '../../internal/nats-errors.js';
import { type AgentCaps, type CapsValueOptions, decodeAgentCaps } from '../codec.js';
import { BUCKET, keySubject } from '../names.js';
import { checkHandle, checkNatsOptions } from './check.js';

/**
 * One change seen by {@link watchAgentCaps}.
 */
export type AgentCapsChange =
  | {
      /** A value (or a removal, which reads as all unset). */
      kind: 'current';
      /** The agent whose caps changed. */
      agent: string;
      /** The caps now in force; all unset after a delete or purge. */
      caps: AgentCaps;
      /** The stream sequence of the change. */
      revision: number;
      /**
       * nats.js's flag: false for the values replayed when the watch starts, except
       * the last of them; true for that one and every change after. Once it is
       * true, the watcher has caught up.
       */
      isUpdate: boolean;
    }
  | {
      /** A stored value that is not valid caps: keep what was applied, and report it. */
      kind: 'invalid';
      /** The agent whose value is invalid. */
      agent: string;
      /** Why the value was refused. */
      error: CapsValueError;
      /** The stream sequence of the change. */
      revision: number;
      /**
       * nats.js's flag: false for the values replayed when the watch starts, except
       * the last of them; true for that one and every change after. Once it is
       * true, the watcher has caught up.
       */
      isUpdate: boolean;
    };

/**
 * An async iterator of caps changes; `stop()` ends it.
 */
export interface AgentCapsWatch extends AsyncIterable<AgentCapsChange> {
  /** Stop watching: the iteration ends after the changes already received. */
  stop(): void;
}

/**
 * Options of {@link watchAgentCaps}.
 */
export type WatchAgentCapsOptions = CapsValueOptions;

// nats.js maps only a MaxAge marker to PURGE; any server-written marker is a removal here.
function markerReason(entry: KvWatchEntry): string | undefined {
  const headers = (entry as unknown as { sm?: { headers?: { get(k: string): string } } }).sm
    ?.headers;
  const reason = headers?.get('Nats-Marker-Reason');
  return reason ? reason : undefined;
}

function toChange(entry: KvWatchEntry, options: CapsValueOptions): AgentCapsChange {
  const base = { agent: entry.key, revision: entry.revision, isUpdate: entry.isUpdate };
  if (entry.operation !== 'PUT' || markerReason(entry) !== undefined) {
    return { kind: 'current', ...base, caps: {} };
  }
  try {
    return { kind: 'current', ...base, caps: decodeAgentCaps(entry.value, options) };
  } catch (error) {
    if (isCapsValueError(error)) return { kind: 'invalid', ...base, error };
    throw error;
  }
}

/**
 * Watch caps as they change: first the value stored for each key when the
 * watch starts, then every change. `isUpdate` turns true with the last
 * replayed value, when the watcher has caught up. For a host that applies
 * caps as they change.
 *
 * A value that is not valid caps arrives as `{ kind: 'invalid' }` rather than
 * ending the iteration, so one bad write cannot stop a host from seeing the
 * next good one.
 *
 * Needs the permissions of a JetStream ordered consumer on `KV_agent-limits`
 * (wider than the direct get {@link readAgentCaps} needs).
 *
 * @param nc - A NATS connection (nats.js v3).
 * @param agent - One agent to watch; every agent when omitted.
 * @param options - `allowMemoryPercent`.
 * @returns An async iterable of {@link AgentCapsChange}; call `stop()` to end it.
 * @throws {@link errors!InvalidInputError} when `agent` is not one valid subject token (or is too
 * long), or `options` has an unknown key.
 * @throws {@link errors!NatsRequestError} when the bucket does not exist yet (retry later) or the
 * watch cannot be set up.
 *
 * @example
 * ```ts
 * import type { NatsConnection } from '@nats-io/transport-node';
 * import { renderDropIn } from 'scaler-primitives/agent-caps';
 * import { watchAgentCaps } from 'scaler-primitives/agent-caps/nats';
 * declare const nc: NatsConnection;
 * declare function apply(dropIn: string): void; // write the drop-in, reload the unit
 * const watch = await watchAgentCaps(nc, 'iris');
 * for await (const change of watch) {
 *   if (change.kind === 'current') apply(renderDropIn(change.caps, { section: 'Scope' }));
 * }
 * ```
 */
export async function watchAgentCaps(
  nc: NatsConnection,
  agent?: string,
  options?: {
    /**
     * Accept a percentage for `memoryMax` (`"50%"` of the host's memory). Refused by
     * default: caps travel between hosts with different amounts of memory.
     * @default false
     */
    allowMemoryPercent?: boolean;
  },
): Promise<AgentCapsWatch> {
  checkHandle(nc, 'nc', ['request', 'subscribe']);
  const opts = checkNatsOptions<WatchAgentCapsOptions>(
    options,
    ['allowMemoryPercent'],
    'watch options',
  );
  const subject = agent === undefined ? `$KV.${BUCKET}.>` : keySubject(agent);
  const what =
    agent === undefined
      ? 'Watching all agent caps'
      : `Watching the caps of agent ${JSON.stringify(agent)}`;
  let iterator: QueuedIterator<KvWatchEntry>;
  try {
    const kv = await new Kvm(nc).open(BUCKET);
    iterator = await kv.watch(agent === undefined ? {} : { key: agent });
  } catch (error) {
    if (isStreamNotFound(error)) {
      throw toNatsRequestError(
        error,
        subject,
        `${what}: the bucket "agent-limits" does not exist yet (retry later)`,
      );
    }
    throw toNatsRequestError(error, subject, what);
  }
  async function* changes(): AsyncGenerator<AgentCapsChange> {
    for await (const entry of iterator) yield toChange(entry, opts);
  }
  const generator = changes();
  return {
    [Symbol.asyncIterator]: () => generator,
    stop: () => iterator.stop(),
  };
}
