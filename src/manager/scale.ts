import type { ResourceRequest } from '../resources/types.js';
import { checkId, checkJobResources, checkLabels } from './checks.js';
import type { Rooms } from './rooms.js';
import type { CapacityLimit, ScaleResult } from './scale-types.js';

/**
 * `requestScale`: check the arguments, then decide (inside the telemetry span
 * when telemetry is on).
 * @internal
 */
export async function requestScale(
  rooms: Rooms,
  labels: readonly string[],
  jobId: string,
  excludeLabels: readonly string[],
  resources: ResourceRequest | undefined,
): Promise<ScaleResult> {
  checkLabels('labels', labels);
  checkLabels('excludeLabels', excludeLabels);
  checkId('jobId', jobId);
  checkJobResources(resources);
  const telemetry = rooms.core.telemetry;
  if (telemetry)
    return telemetry.scale(jobId, () =>
      decideScale(rooms, labels, jobId, excludeLabels, resources),
    );
  return decideScale(rooms, labels, jobId, excludeLabels, resources);
}

/**
 * The decision behind `requestScale` (arguments already checked): try every
 * matching scaler in order, and turn the refusals into one answer.
 * @internal
 */
export async function decideScale(
  rooms: Rooms,
  labels: readonly string[],
  jobId: string,
  excludeLabels: readonly string[],
  resources: ResourceRequest | undefined,
): Promise<ScaleResult> {
  const core = rooms.core;
  // Recovered agents count before any new one is decided on.
  if (rooms.recoveryPending) await rooms.recovering!.catch(() => undefined);
  if (core.shuttingDown) return { kind: 'shutting-down' };
  const inFlight = core.book.spawningFor(jobId);
  if (inFlight !== undefined) {
    return { kind: 'already-spawning', backend: inFlight.scaler.name, agentId: inFlight.agentId };
  }
  const { candidates, reasons } = core.scalers.match(labels, excludeLabels);
  if (candidates.length === 0) return { kind: 'no-match', reasons };

  const refusals: CapacityLimit[] = [];
  for (const { scaler, labelSet } of candidates) {
    const resolved = rooms.spawner.resolve(scaler, labelSet, resources);
    const stopped = rooms.refusal(scaler);
    const outcome = stopped ?? (await rooms.spawner.attempt(scaler, labelSet, resolved, jobId));
    if ('kind' in outcome) return outcome;
    refusals.push(outcome);
  }
  const first = candidates[0]!.scaler.name;
  const waiting = refusals.filter((r) => !r.neverFits);
  if (waiting.length === 0) {
    return { kind: 'never-fits', backend: first, limit: refusals[0]!, refusals };
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
      backend: soonest!.scaler,
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
    backend: first,
    limit: waiting[0]!,
    refusals,
  };
  if (retryAfterMs !== undefined) result.retryAfterMs = retryAfterMs;
  return result;
}
