import type { AgentRecord } from './agents.js';
import type { FleetCore } from './core.js';
import { isWarmCapacity } from './inventory.js';
import type { ScalerState } from './scalers.js';
import { Schedules } from './schedules.js';
import type { Spawner } from './spawner.js';
import type { AgentResources, BackendStatus } from './types.js';

/**
 * The warm pool: how many idle agents a scaler keeps ready now, which idle
 * agents that target keeps, and replenishing up to it.
 * @internal
 */
export class WarmPool {
  readonly #core: FleetCore;
  readonly #spawner: Spawner;
  readonly #mayStart: (scaler: ScalerState) => boolean;
  readonly #schedules = new Schedules();

  constructor(core: FleetCore, spawner: Spawner, mayStart: (scaler: ScalerState) => boolean) {
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
  describe(scaler: ScalerState, entry: BackendStatus, now: number): void {
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

  /** Spawn warm agents up to the target, unless real demand came first. */
  async replenish(now: number): Promise<void> {
    const core = this.#core;
    for (const scaler of core.scalers.order) {
      const warm = scaler.config.warmPool;
      const target = this.target(scaler, now);
      if (warm === undefined || target === 0) continue;
      if (scaler.jobSpawnsInFlight > 0) continue;
      if (now - scaler.lastDemandAt < core.options.demandHoldMs) continue;
      if (now - core.globalDemandAt < core.options.demandHoldMs) continue;
      // Only agents that can take a job count: idle ones and spawns no job was given.
      let ready = 0;
      for (const id of scaler.agents) if (isWarmCapacity(core.book.get(id)!)) ready++;
      if (ready >= target) continue;
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
        continue;
      }
      for (let missing = target - ready; missing > 0; missing--) {
        if (core.shuttingDown) return;
        if (!this.#mayStart(scaler)) break;
        const outcome = await this.#spawner.attempt(scaler, labelSet, resources, undefined);
        if (!('kind' in outcome) || outcome.kind !== 'spawned') break;
      }
    }
  }
}
