import type { KV } from '@nats-io/kv';
import { liveAgentView } from '../../internal/live-ids.js';
import { isJetStreamRevisionConflict, toNatsRequestError } from '../../internal/nats-errors.js';
import { assertAgentName, BUCKET, keySubject } from '../names.js';
import { checkHandle, checkNatsOptions } from './check.js';

/**
 * Options of {@link sweepAgentCaps}.
 */
export interface SweepAgentCapsOptions {
  /**
   * Purge the removed keys (drop their history, leave a purge marker) instead of
   * leaving delete markers. Hosts read both as unset.
   * @default false
   */
  purge?: boolean;
  /**
   * Only keys this accepts are candidates for removal. Needed when several
   * controllers write one bucket, each knowing only its own agents: pass a test
   * for yours (e.g. `(agent) => agent.startsWith('ci-')`), or a sweep by one
   * removes the caps of the others' agents. Called once per key.
   * @default every key
   */
  owns?: (agent: string) => boolean;
}

/**
 * What {@link sweepAgentCaps} did.
 */
export interface AgentCapsSweepResult {
  /** Agents whose caps key was removed, sorted. */
  removedAgents: string[];
  /**
   * Agents not alive whose key was written again between the listing and the
   * removal (the compare-and-set lost): left in place, for the next sweep. Sorted.
   */
  changedAgents: string[];
}

// A key no writer of ours would make (not one subject token) is not ours to remove.
function isAgentName(key: string): boolean {
  try {
    assertAgentName(key);
    return true;
  } catch {
    return false;
  }
}

/**
 * Remove the caps keys of every agent not in `liveAgentIds`: what a crashed
 * controller left behind (a key nobody deletes stays in the bucket forever).
 * The counterpart of `sweepIsolation` for nftables rules; a `ScalerManager`
 * runs both from `reconcile()` when given them as `sweeps`.
 *
 * Safe beside running writers: the live set is read **after** the keys are
 * listed (so an agent started meanwhile, in a live view such as the one the
 * manager passes, keeps its caps), and each key is removed with a
 * compare-and-set on the revision just read, so a key written again in between
 * is left alone and reported in `changedAgents`. Ids are compared exactly; a
 * key that is not a valid agent name (not written by this library or the Rust
 * crate) is left alone.
 *
 * @param kv - The bucket, from `openCapsBucket` / `openOrCreateCapsBucket`.
 * @param liveAgentIds - The agents alive now (iterated once, after the listing).
 * @param options - `purge`, `owns`.
 * @returns The agents whose keys were removed, and those skipped because they changed.
 * @throws {@link errors!InvalidInputError} for an unknown option.
 * @throws {@link errors!NatsRequestError} when listing, reading or removing fails; keys
 *   removed before the failure stay removed (a sweep can simply run again).
 * @throws `TypeError` when `liveAgentIds` is not an iterable of strings or `owns` not a function.
 *
 * @example
 * ```ts
 * import type { NatsConnection } from '@nats-io/transport-node';
 * import { openCapsBucket, sweepAgentCaps } from 'scaler-primitives/agent-caps/nats';
 * declare const nc: NatsConnection;
 * declare const runningAgentIds: string[];
 * const kv = await openCapsBucket(nc);
 * if (kv) {
 *   const { removedAgents } = await sweepAgentCaps(kv, runningAgentIds, {
 *     owns: (agent) => agent.startsWith('ci-'),
 *   });
 *   console.log(`removed the caps of ${removedAgents.length} dead agents`);
 * }
 * ```
 */
export async function sweepAgentCaps(
  kv: KV,
  liveAgentIds: Iterable<string>,
  options?: {
    /**
     * Purge the removed keys (drop their history, leave a purge marker) instead of
     * leaving delete markers. Hosts read both as unset.
     * @default false
     */
    purge?: boolean;
    /**
     * Only keys this accepts are candidates for removal. Needed when several
     * controllers write one bucket, each knowing only its own agents: pass a test
     * for yours (e.g. `(agent) => agent.startsWith('ci-')`), or a sweep by one
     * removes the caps of the others' agents. Called once per key.
     * @default every key
     */
    owns?: (agent: string) => boolean;
  },
): Promise<{
  /** Agents whose caps key was removed, sorted. */
  removedAgents: string[];
  /**
   * Agents not alive whose key was written again between the listing and the
   * removal (the compare-and-set lost): left in place, for the next sweep. Sorted.
   */
  changedAgents: string[];
}> {
  checkHandle(kv, 'kv', ['keys', 'get', 'delete', 'purge']);
  const opts = checkNatsOptions<SweepAgentCapsOptions>(options, ['purge', 'owns'], 'sweep options');
  if (opts.owns !== undefined && typeof opts.owns !== 'function') {
    throw new TypeError(`Expected \`owns\` to be a function, got \`${typeof opts.owns}\``);
  }
  // Checked before the bucket is read; read again after the listing (an agent that
  // became alive meanwhile, in a live view, keeps its caps), unless it is a one-shot iterator.
  const liveNow = liveAgentView(liveAgentIds);
  const keys: string[] = [];
  try {
    for await (const key of await kv.keys()) keys.push(key);
  } catch (error) {
    throw toNatsRequestError(error, `$KV.${BUCKET}.>`, 'Listing the caps keys');
  }
  const live = liveNow();
  const result: AgentCapsSweepResult = { removedAgents: [], changedAgents: [] };
  for (const agent of keys.sort()) {
    if (live.has(agent) || !isAgentName(agent)) continue;
    if (opts.owns !== undefined && !opts.owns(agent)) continue;
    const what = `Sweeping the caps of agent ${JSON.stringify(agent)}`;
    try {
      const entry = await kv.get(agent);
      // Removed since the listing: nothing left to sweep.
      if (entry === null || entry.operation !== 'PUT') continue;
      const cas = { previousSeq: entry.revision };
      if (opts.purge === true) await kv.purge(agent, cas);
      else await kv.delete(agent, cas);
      result.removedAgents.push(agent);
    } catch (error) {
      if (isJetStreamRevisionConflict(error)) {
        result.changedAgents.push(agent);
        continue;
      }
      throw toNatsRequestError(error, keySubject(agent), what);
    }
  }
  return result;
}
