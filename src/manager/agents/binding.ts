import { coresToMillicores } from '../../resources/quantity.js';
import type { ResourceLimits } from '../../resources/types.js';
import type { AgentResources } from '../backend.js';
import type { FleetCore } from '../core.js';
import type { AgentRecord } from './agents.js';

/**
 * Which agent a job is bound to, when more than one could claim it. The rules
 * (docs/manager.md, "Writing a controller"):
 *
 * - a job runs on one agent: when the dispatcher gives a job to an agent while
 *   another agent is still spawning for that job, the spawning one loses the
 *   job (`job-taken` event) and is bound to nothing;
 * - an agent that lost its job registers bound to the oldest job still waiting
 *   on a spawn in flight that it can run (same scaler, same label set, its
 *   resources at least those resolved for that job), which that job's own
 *   spawning agent then loses in turn; when no such job waits it registers idle.
 * @internal
 */

/** `taker` got `jobId`: an agent still spawning for that job loses it. */
export function releaseSpawnBinding(core: FleetCore, jobId: string, taker: AgentRecord): void {
  const spawning = core.book.spawningFor(jobId);
  if (spawning === undefined || spawning === taker) return;
  core.book.unbindSpawn(spawning);
  spawning.jobId = undefined;
  core.book.touch(spawning);
  core.emitFor(
    spawning,
    'job-taken',
    `Job ${jobId} went to ${taker.agentId}; ${spawning.agentId}, still spawning for it, will take the next waiting job that fits or be idle`,
    { jobId, by: taker.agentId },
  );
}

/**
 * `record` registers having lost the job it was spawned for: bind it to the
 * oldest job waiting on another spawn that it can run. Returns that job, or
 * undefined (it registers idle).
 */
export function rebindOnRegistration(core: FleetCore, record: AgentRecord): string | undefined {
  let best: AgentRecord | undefined;
  for (const id of record.scaler.agents) {
    const other = core.book.get(id);
    if (other === undefined || other === record || other.state !== 'spawning') continue;
    if (other.jobId === undefined || core.book.spawningFor(other.jobId) !== other) continue;
    if (!sameLabels(other.labels, record.labels)) continue;
    if (!fitsWithin(other.resources, record.resources)) continue;
    if (best === undefined || other.spawnedAt < best.spawnedAt) best = other;
  }
  if (best === undefined) return undefined;
  const jobId = best.jobId!;
  core.book.unbindSpawn(best);
  best.jobId = undefined;
  core.book.touch(best);
  core.emitFor(
    best,
    'job-taken',
    `Job ${jobId} went to ${record.agentId}, which registered first; ${best.agentId} will take the next waiting job that fits or be idle`,
    { jobId, by: record.agentId },
  );
  record.jobId = jobId;
  return jobId;
}

function sameLabels(a: readonly string[], b: readonly string[]): boolean {
  if (a === b) return true;
  if (a.length !== b.length) return false;
  const set = new Set(b);
  return a.every((label) => set.has(label));
}

/**
 * True when `need` is at most `have` in every dimension: every request, and
 * every limit both sides declare (a limit that is 0 or absent is not declared).
 * @internal
 */
export function fitsWithin(need: AgentResources, have: AgentResources): boolean {
  return (
    amountWithin(need.requests, have.requests, false) &&
    amountWithin(need.limits, have.limits, true)
  );
}

function amountWithin(need: ResourceLimits, have: ResourceLimits, limits: boolean): boolean {
  const declared = (a: number | undefined, b: number | undefined) =>
    !limits || (a !== undefined && a > 0 && b !== undefined && b > 0);
  if (
    declared(need.cpus, have.cpus) &&
    coresToMillicores(need.cpus ?? 0) > coresToMillicores(have.cpus ?? 0)
  ) {
    return false;
  }
  if (declared(need.memBytes, have.memBytes) && (need.memBytes ?? 0) > (have.memBytes ?? 0)) {
    return false;
  }
  for (const [name, count] of Object.entries(need.extended ?? {})) {
    if (limits && !declared(count, have.extended?.[name])) continue;
    if (count > (have.extended?.[name] ?? 0)) return false;
  }
  return true;
}
