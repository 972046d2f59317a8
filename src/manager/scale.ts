import type { ResourceRequest } from '../resources/types.js';
import { checkId, checkJobResources, checkLabels } from './checks.js';
import type { ManagerParts } from './parts.js';
import type { CapacityLimit, ScaleRequest, ScaleResult } from './types.js';

const SCALE_KEYS = ['jobId', 'labels', 'excludeLabels', 'resources'];

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
