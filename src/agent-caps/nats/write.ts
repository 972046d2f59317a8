import type { KV } from '@nats-io/kv';
import { RevisionConflictError } from '../../errors/index.js';
import { isJetStreamRevisionConflict, toNatsRequestError } from '../../internal/nats-errors.js';
import { type AgentCaps, type CapsValueOptions, encodeAgentCaps } from '../codec.js';
import { assertAgentName, keySubject } from '../names.js';
import { checkHandle, checkNatsOptions } from './check.js';

/**
 * Options of {@link writeAgentCaps}.
 */
export interface WriteAgentCapsOptions extends CapsValueOptions {
  /**
   * Write only if the key's current revision is this one (compare-and-set):
   * `0` means "only if the key has no value" (never written, deleted or
   * purged). Unset writes unconditionally.
   */
  expectRevision?: number;
}

/**
 * Options of {@link deleteAgentCaps}.
 */
export interface DeleteAgentCapsOptions {
  /**
   * Purge (drop the key's history and leave a purge marker) instead of
   * leaving a delete marker. Hosts read both as unset.
   * @default false
   */
  purge?: boolean;
}

function writeError(error: unknown, agent: string, what: string): Error {
  if (isJetStreamRevisionConflict(error)) {
    return new RevisionConflictError(
      agent,
      `${what} lost a compare-and-set: another writer changed the caps of agent ${JSON.stringify(agent)} first. Read them again and retry.`,
      { cause: error },
    );
  }
  return toNatsRequestError(error, keySubject(agent), what);
}

/**
 * Write `agent`'s caps into the bucket. The value is checked against the
 * systemd grammar and encoded first, so an invalid value is never written.
 *
 * @param kv - The bucket, from {@link openOrCreateCapsBucket}.
 * @param agent - The agent name (one subject token).
 * @param caps - The caps; `{}` writes "all unset".
 * @param options - `expectRevision` for a compare-and-set; `allowMemoryPercent`.
 * @returns The revision (stream sequence) of the new value.
 * @throws {@link errors!InvalidInputError} when `agent` is not one valid subject token (or is too
 * long), or `caps` or `options` has an unknown key; nothing is written.
 * @throws {@link errors!CapsValueError} when a value is not valid systemd syntax (nothing is written).
 * @throws {@link errors!RevisionConflictError} when `expectRevision` is stale (JetStream codes 10071, 10164).
 * @throws {@link errors!NatsRequestError} for a timeout or any other failure.
 *
 * @example
 * ```ts
 * import type { KV } from '@nats-io/kv';
 * import { writeAgentCaps } from 'scaler-primitives/agent-caps/nats';
 * declare const kv: KV;
 * const revision = await writeAgentCaps(kv, 'iris', { cpuQuota: '400%' });
 * await writeAgentCaps(kv, 'iris', { cpuQuota: '200%' }, { expectRevision: revision });
 * ```
 */
export async function writeAgentCaps(
  kv: KV,
  agent: string,
  caps: AgentCaps,
  options?: {
    /**
     * Accept a percentage for `memoryMax` (`"50%"` of the host's memory). Refused by
     * default: caps travel between hosts with different amounts of memory.
     * @default false
     */
    allowMemoryPercent?: boolean;
    /**
     * Write only if the key's current revision is this one (compare-and-set):
     * `0` means "only if the key has no value" (never written, deleted or
     * purged). Unset writes unconditionally.
     */
    expectRevision?: number;
  },
): Promise<number> {
  checkHandle(kv, 'kv', ['put', 'create', 'update']);
  const opts = checkNatsOptions<WriteAgentCapsOptions>(
    options,
    ['expectRevision', 'allowMemoryPercent'],
    'write options',
  );
  assertAgentName(agent);
  const bytes = encodeAgentCaps(
    caps,
    opts.allowMemoryPercent === undefined ? {} : { allowMemoryPercent: opts.allowMemoryPercent },
  );
  const { expectRevision } = opts;
  if (
    expectRevision !== undefined &&
    (!Number.isSafeInteger(expectRevision) || expectRevision < 0)
  ) {
    throw new TypeError(
      `Expected \`expectRevision\` to be a whole number >= 0, got \`${String(expectRevision)}\``,
    );
  }
  const what = `Writing the caps of agent ${JSON.stringify(agent)}`;
  try {
    if (expectRevision === undefined) return await kv.put(agent, bytes);
    if (expectRevision === 0) return await kv.create(agent, bytes);
    return await kv.update(agent, bytes, expectRevision);
  } catch (error) {
    throw writeError(error, agent, what);
  }
}

/**
 * Remove `agent`'s caps: hosts then read all unset (the agent runs on its
 * host's own settings).
 *
 * @param kv - The bucket, from {@link openOrCreateCapsBucket}.
 * @param agent - The agent name (one subject token).
 * @param options - `purge` to drop the history as well.
 * @throws {@link errors!InvalidInputError} when `agent` is not one valid subject token (or is too
 * long), or `options` has an unknown key.
 * @throws {@link errors!NatsRequestError} for a timeout or any other failure.
 *
 * @example
 * ```ts
 * import type { KV } from '@nats-io/kv';
 * import { deleteAgentCaps } from 'scaler-primitives/agent-caps/nats';
 * declare const kv: KV;
 * await deleteAgentCaps(kv, 'iris');
 * ```
 */
export async function deleteAgentCaps(
  kv: KV,
  agent: string,
  options?: {
    /**
     * Purge (drop the key's history and leave a purge marker) instead of
     * leaving a delete marker. Hosts read both as unset.
     * @default false
     */
    purge?: boolean;
  },
): Promise<void> {
  checkHandle(kv, 'kv', ['delete', 'purge']);
  const opts = checkNatsOptions<DeleteAgentCapsOptions>(options, ['purge'], 'delete options');
  assertAgentName(agent);
  const what = `${opts.purge ? 'Purging' : 'Deleting'} the caps of agent ${JSON.stringify(agent)}`;
  try {
    if (opts.purge) await kv.purge(agent);
    else await kv.delete(agent);
  } catch (error) {
    throw writeError(error, agent, what);
  }
}
