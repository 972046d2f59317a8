import type { ResourceRequest } from '../resources/types.js';
import type { AgentResources } from './backend.js';
import type { CapacityLimit } from './capacity.js';
import { checkId, checkJobResources, checkLabels } from './checks.js';
import type { ManagerParts } from './parts.js';

/**
 * A job waiting for an agent: what {@link ScalerManager.requestScale} takes
 * (the fields of a {@link ClaimRequest} but `runId`).
 */
export interface ScaleRequest {
  /** The job; one spawn per job is in flight at a time. At most 253 characters. */
  jobId: string;
  /**
   * The labels the job asks for; an automatic label such as
   * `scaler-primitives:scaler:<name>` pins a scaler. At most 64, each at most 253 characters.
   */
  labels: readonly string[];
  /** Label sets holding any of these are not used. */
  excludeLabels?: readonly string[];
  /**
   * The job's own resource declaration (highest layer of defaults):
   * `{ requests?: { cpus?, memory? }, limits?: { cpus?, memory? } }`.
   */
  resources?: ResourceRequest;
}

const SCALE_KEYS = ['jobId', 'labels', 'excludeLabels', 'resources'];

/** Why a scaler did not match a job. @internal */
export type NoMatchReason = Extract<ScaleResult, { kind: 'no-match' }>['reasons'][number];

/**
 * The answer to `requestScale`, discriminated by `kind`:
 *
 * - `spawned`: capacity was reserved and the backend is starting `agentId`;
 * - `already-spawning`: a spawn for this job is in flight (nothing new reserved);
 * - `no-match`: no scaler has a label set for this job (`reasons` per scaler);
 * - `at-capacity`: a limit is full now; retry when an agent goes away;
 * - `never-fits`: the request exceeds a cap even when empty at every scaler that matches; fail the job;
 * - `spawn-failed`: the pool reservation or the backend's `spawn` failed; everything was rolled back;
 * - `backing-off`: every matching scaler that could fit is in spawn-failure backoff (`retryAfterMs`);
 * - `shutting-down`: `shutdownAll()` was called.
 */
export type ScaleResult =
  | {
      /** Capacity reserved, the backend is spawning. */
      kind: 'spawned';
      /** The scaler chosen. */
      scaler: string;
      /** The new agent's id. */
      agentId: string;
      /** The matched label set, automatic labels included. */
      labels: string[];
      /** The resolved requests and limits. */
      resources: AgentResources;
    }
  | {
      /** A spawn for this job is already in flight. */
      kind: 'already-spawning';
      /** The scaler of that spawn. */
      scaler: string;
      /** The agent being spawned. */
      agentId: string;
    }
  | {
      /** No scaler can run this job. */
      kind: 'no-match';
      /** Why, per scaler (in config order). */
      reasons: {
        /** The scaler. */
        scaler: string;
        /**
         * - `labels`: no label set holds every job label (`missing`: the fewest labels any set lacks);
         * - `mandatory`: the job does not name every mandatory label (`missing`: those it lacks);
         * - `exclude`: every label set that fits holds an excluded label (`excluded`: which);
         * - `retired`: the scaler was removed by `reload` and takes no new work.
         */
        reason: 'labels' | 'mandatory' | 'exclude' | 'retired';
        /** Labels the job needs that are absent, or mandatory labels the job does not name. */
        missing?: string[];
        /** Excluded labels found in the label sets that would otherwise fit. */
        excluded?: string[];
      }[];
    }
  | {
      /** Every matching scaler is full now. */
      kind: 'at-capacity';
      /** The first scaler that matched. */
      scaler: string;
      /** The first limit that refused (at the first matching scaler). */
      limit: CapacityLimit;
      /** The refusal of every matching scaler, in the order they were tried. */
      refusals: CapacityLimit[];
      /** The soonest a pacing or backoff refusal lifts, when one of them refused. */
      retryAfterMs?: number;
    }
  | {
      /** Every matching scaler that could fit is backing off after spawn failures. */
      kind: 'backing-off';
      /** The first scaler backing off. */
      scaler: string;
      /** The soonest any of them closes its backoff, in milliseconds. */
      retryAfterMs: number;
      /** The last spawn failure of that scaler. */
      lastError: unknown;
      /** The refusal of every matching scaler. */
      refusals: CapacityLimit[];
    }
  | {
      /** `shutdownAll()` was called: nothing new is spawned. */
      kind: 'shutting-down';
    }
  | {
      /** The request can never fit at any matching scaler under the current config. */
      kind: 'never-fits';
      /** The first scaler that matched. */
      scaler: string;
      /** The cap it exceeds at that scaler. */
      limit: CapacityLimit;
      /** The refusal of every matching scaler. */
      refusals: CapacityLimit[];
    }
  | {
      /** Reserving in the machine pool or spawning failed; every reservation was released. */
      kind: 'spawn-failed';
      /** The scaler chosen. */
      scaler: string;
      /** The agent id that was to be used. */
      agentId: string;
      /**
       * `reserve`: the pool ledger threw; `spawn`: the backend rejected;
       * `state`: the `stateStore` failed to record the agent (nothing was spawned).
       */
      stage: 'reserve' | 'spawn' | 'state';
      /** What was thrown. */
      error: unknown;
    };

/**
 * `requestScale`: check the request, then decide (inside the telemetry span
 * when telemetry is on).
 * @internal
 */
export async function requestScale(
  parts: ManagerParts,
  request: ScaleRequest,
): Promise<ScaleResult> {
  if (typeof request !== 'object' || request === null || Array.isArray(request)) {
    throw new TypeError(
      `Expected \`request\` to be an object { jobId, labels, excludeLabels?, resources? }, got \`${Array.isArray(request) ? 'array' : String(request)}\``,
    );
  }
  for (const key of Object.keys(request)) {
    if (!SCALE_KEYS.includes(key)) {
      throw new TypeError(
        `Unknown requestScale field \`${key.slice(0, 64)}\`; expected ${SCALE_KEYS.join(', ')}`,
      );
    }
  }
  const { labels, jobId, resources } = request;
  const excludeLabels = request.excludeLabels ?? [];
  checkLabels('labels', labels);
  checkLabels('excludeLabels', excludeLabels);
  checkId('jobId', jobId);
  checkJobResources(resources);
  const telemetry = parts.core.telemetry;
  if (telemetry)
    return telemetry.scale(jobId, () =>
      decideScale(parts, labels, jobId, excludeLabels, resources),
    );
  return decideScale(parts, labels, jobId, excludeLabels, resources);
}

/**
 * The decision behind `requestScale` (arguments already checked): try every
 * matching scaler in order, and turn the refusals into one answer.
 * @internal
 */
export async function decideScale(
  parts: ManagerParts,
  labels: readonly string[],
  jobId: string,
  excludeLabels: readonly string[],
  resources: ResourceRequest | undefined,
): Promise<ScaleResult> {
  const core = parts.core;
  // Recovered agents count before any new one is decided on.
  if (parts.recoveryPending) await parts.recovering!.catch(() => undefined);
  if (core.shuttingDown) return { kind: 'shutting-down' };
  const inFlight = core.book.spawningFor(jobId);
  if (inFlight !== undefined) {
    return { kind: 'already-spawning', scaler: inFlight.scaler.name, agentId: inFlight.agentId };
  }
  const { candidates, reasons } = core.scalers.match(labels, excludeLabels);
  if (candidates.length === 0) return { kind: 'no-match', reasons };

  const refusals: CapacityLimit[] = [];
  for (const { scaler, labelSet } of candidates) {
    const resolved = parts.spawner.resolve(scaler, labelSet, resources);
    const stopped = parts.refusal(scaler, labelSet.pools);
    const outcome = stopped ?? (await parts.spawner.attempt(scaler, labelSet, resolved, jobId));
    if ('kind' in outcome) return outcome;
    refusals.push(outcome);
  }
  const first = candidates[0]!.scaler.name;
  const waiting = refusals.filter((r) => !r.neverFits);
  if (waiting.length === 0) {
    return { kind: 'never-fits', scaler: first, limit: refusals[0]!, refusals };
  }
  // A plain loop: this runs for every refused job, every time it is asked for again.
  let retryAfterMs: number | undefined;
  for (const r of waiting) {
    if ('retryAfterMs' in r && (retryAfterMs === undefined || r.retryAfterMs < retryAfterMs)) {
      retryAfterMs = r.retryAfterMs;
    }
  }
  if (waiting.every((r) => r.limit === 'backing-off')) {
    const soonest = waiting.find((r) => 'retryAfterMs' in r && r.retryAfterMs === retryAfterMs);
    return {
      kind: 'backing-off',
      scaler: soonest!.scaler,
      retryAfterMs: retryAfterMs!,
      lastError: soonest!.limit === 'backing-off' ? soonest!.lastError : undefined,
      refusals,
    };
  }
  const now = core.now();
  for (const refusal of waiting) {
    if (refusal.limit === 'global-max-agents' || refusal.limit === 'global-cap') {
      core.globalDemandAt = now;
    }
    const state = core.scalers.get(refusal.scaler);
    if (state) state.lastDemandAt = now;
  }
  const result: ScaleResult = {
    kind: 'at-capacity',
    scaler: first,
    limit: waiting[0]!,
    refusals,
  };
  if (retryAfterMs !== undefined) result.retryAfterMs = retryAfterMs;
  return result;
}
