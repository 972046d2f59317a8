import type { AgentRecord } from '../agents/agents.js';
import { isWarmCapacity } from '../agents/inventory.js';
import type { AgentResources } from '../backend.js';
import { Schedules } from '../config/schedules.js';
import type { FleetCore } from '../core.js';
import type { CapacityLimit, ScalerEntryStatus, WarmPoolHold } from '../types.js';
import type { ScalerState } from './scalers.js';
import type { Spawner } from './spawner.js';

/**
 * The warm pool: how many idle agents a scaler keeps ready now, which idle
 * agents that target keeps, and replenishing up to it.
 * @internal
 */
export class WarmPool {
  readonly #core: FleetCore;
  readonly #spawner: Spawner;
  readonly #mayStart: (scaler: ScalerState, pools: readonly string[]) => CapacityLimit | undefined;
  readonly #schedules = new Schedules();
  /** Why each scaler's pool is held now, if it is. */
  readonly #holds = new Map<string, WarmPoolHold>();

  constructor(
    core: FleetCore,
    spawner: Spawner,
    mayStart: (scaler: ScalerState, pools: readonly string[]) => CapacityLimit | undefined,
  ) {
    this.#core = core;
    this.#spawner = spawner;
    this.#mayStart = mayStart;
  }

  /** The number of idle agents to keep ready now (0 without a warm pool). */
  target(scaler: ScalerState, now: number): number {
    const warm = scaler.config.warmPool;
    if (warm === undefined || scaler.retiring) return 0;
    return this.#schedules.evaluate(warm, now).size;
  }

  /** Add the warm pool's facts to a scaler's status. */
  describe(scaler: ScalerState, entry: ScalerEntryStatus, now: number): void {
    const warm = scaler.config.warmPool;
    if (warm === undefined) return;
    const answer = this.#schedules.evaluate(warm, now);
    entry.warmPool = {
      size: scaler.retiring ? 0 : answer.size,
      baseSize: warm.size,
      idleTimeoutSeconds: scaler.config.idleTimeoutSeconds ?? warm.idleTimeoutSeconds,
    };
    if (answer.active !== undefined) entry.warmPool.activeSchedule = answer.active;
    if (answer.nextChangeAt !== undefined) entry.warmPool.nextChangeAt = answer.nextChangeAt;
    const held = this.#holds.get(scaler.name);
    if (held !== undefined && !scaler.retiring) {
      entry.warmPool.held = { ...held };
      if (held.limit !== undefined) entry.warmPool.held.limit = { ...held.limit };
    }
  }

  /** Idle agents of `scaler` that are ready to take a job (not destroying). */
  idleAgents(scaler: ScalerState): AgentRecord[] {
    const idle: AgentRecord[] = [];
    for (const id of scaler.agents) {
      const record = this.#core.book.get(id);
      if (record?.state === 'idle') idle.push(record);
    }
    return idle;
  }

  /** Spawn warm agents up to the target, unless real demand came first; say why when it holds back. */
  async replenish(now: number): Promise<void> {
    const core = this.#core;
    for (const scaler of core.scalers.order) {
      const warm = scaler.config.warmPool;
      if (warm === undefined || scaler.retiring) {
        this.#holds.delete(scaler.name);
        continue;
      }
      const answer = this.#schedules.evaluate(warm, now);
      const target = answer.size;
      // Only agents that can take a job count: idle ones and spawns no job was given.
      let ready = 0;
      for (const id of scaler.agents) if (isWarmCapacity(core.book.get(id)!)) ready++;
      if (ready >= target) {
        if (answer.active !== undefined && target < warm.size && ready < warm.size) {
          const hold: Hold = {
            reason: 'schedule',
            message: `Schedule ${answer.active} of ${scaler.name} sets the warm pool to ${target} (size ${warm.size})`,
          };
          if (answer.nextChangeAt !== undefined) hold.until = answer.nextChangeAt;
          this.#hold(scaler, now, ready, warm.size, hold);
        } else this.#resume(scaler);
        continue;
      }
      const held = (hold: Hold) => this.#hold(scaler, now, ready, target, hold);
      if (scaler.jobSpawnsInFlight > 0) {
        held({
          reason: 'job-spawns',
          message: `${scaler.jobSpawnsInFlight} spawn(s) for waiting jobs are in flight at ${scaler.name}`,
        });
        continue;
      }
      const demandUntil =
        Math.max(scaler.lastDemandAt, core.globalDemandAt) + core.options.demandHoldMs;
      if (now < demandUntil) {
        const where = scaler.lastDemandAt >= core.globalDemandAt ? scaler.name : 'the orchestrator';
        held({
          reason: 'demand',
          message: `A job was refused for capacity at ${where}; waiting jobs get freed capacity first`,
          until: demandUntil,
        });
        continue;
      }
      const labelSet = scaler.labelSets[warm.labelSet] ?? scaler.labelSets[0]!;
      let resources: AgentResources;
      try {
        resources = this.#spawner.resolve(scaler, labelSet, undefined);
      } catch (error) {
        core.emitGeneral(
          scaler.name,
          'warm-pool-failed',
          `The warm pool of ${scaler.name} cannot resolve its label set's resources`,
          { error },
        );
        held({ reason: 'resources', message: `The warm label set's resources do not resolve` });
        continue;
      }
      let stopped: Hold | undefined;
      for (let missing = target - ready; missing > 0 && stopped === undefined; missing--) {
        if (core.shuttingDown) return;
        const refusal = this.#mayStart(scaler, labelSet.pools);
        const outcome =
          refusal ?? (await this.#spawner.attempt(scaler, labelSet, resources, undefined));
        if (!('kind' in outcome)) {
          stopped = { reason: 'capacity', message: describeLimit(outcome), limit: outcome };
          if ('retryAfterMs' in outcome) stopped.until = now + outcome.retryAfterMs;
        } else if (outcome.kind !== 'spawned') {
          stopped = { reason: 'spawn-failed', message: `A warm spawn of ${scaler.name} failed` };
        } else ready++;
      }
      if (stopped !== undefined) this.#hold(scaler, now, ready, target, stopped);
      else this.#resume(scaler);
    }
  }

  /** Record a hold; emit `warm-pool-held` when it begins or its reason (or limit) changes. */
  #hold(scaler: ScalerState, now: number, ready: number, target: number, hold: Hold): void {
    const previous = this.#holds.get(scaler.name);
    const same =
      previous !== undefined &&
      previous.reason === hold.reason &&
      previous.limit?.limit === hold.limit?.limit;
    const next: WarmPoolHold = {
      ...hold,
      ready,
      target,
      since: same ? previous.since : now,
    };
    this.#holds.set(scaler.name, next);
    if (same) return;
    this.#core.emitGeneral(
      scaler.name,
      'warm-pool-held',
      `Warm pool of ${scaler.name} held at ${ready}/${target}: ${hold.message}${hold.until === undefined ? '' : ` (until ${new Date(hold.until).toISOString()})`}`,
      { ...next },
    );
  }

  #resume(scaler: ScalerState): void {
    const previous = this.#holds.get(scaler.name);
    if (previous === undefined) return;
    this.#holds.delete(scaler.name);
    this.#core.emitGeneral(
      scaler.name,
      'warm-pool-resumed',
      `Warm pool of ${scaler.name} is no longer held (${previous.reason})`,
      { reason: previous.reason },
    );
  }
}

type Hold = Pick<WarmPoolHold, 'reason' | 'message' | 'until' | 'limit'>;

function describeLimit(limit: CapacityLimit): string {
  switch (limit.limit) {
    case 'global-max-agents':
    case 'scaler-max-agents':
      return `${limit.limit} is full (${limit.used}/${limit.max})`;
    case 'global-cap':
    case 'scaler-cap':
    case 'pool-cap':
      return `${limit.limit}${limit.pool === undefined ? '' : ` "${limit.pool}"`} ${limit.dimension} is full (${limit.used} used + ${limit.requested} asked > ${limit.max})`;
    case 'spawn-rate':
      return `spawn pacing (${limit.window}: ${limit.used}/${limit.max})`;
    case 'backing-off':
      return `spawn failure backoff (${limit.failures} consecutive failures)`;
    case 'reservation-lost':
      return `spawning is stopped in pool "${limit.pool}" after a lost reservation`;
    case 'lease-at-risk':
      return `spawning is stopped in pool "${limit.pool}" while the ledger lease is ${limit.health}`;
    default:
      return limit.message;
  }
}
