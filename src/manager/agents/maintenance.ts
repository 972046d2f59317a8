import type { ClockTimer } from '../../clock.js';
import type { FleetCore } from '../core.js';
import type { ScalerState } from '../spawning/scalers.js';
import type { WarmPool } from '../spawning/warm-pool.js';
import type { AgentRecord } from './agents.js';

const NONE: Promise<void>[] = [];

/**
 * The maintenance loop: prune spawns that never registered, retry failed
 * destroys, reap idle agents, drain agents past their lifetime or above a
 * lowered `maxAgents`, and replenish warm pools. Busy agents are never
 * destroyed here: they are drained.
 * @internal
 */
export class Maintenance {
  readonly #core: FleetCore;
  readonly #warm: WarmPool;
  readonly #onPruned: (scaler: ScalerState) => void;
  #pass: Promise<void> | undefined;

  constructor(core: FleetCore, warm: WarmPool, onPruned: (scaler: ScalerState) => void) {
    this.#core = core;
    this.#warm = warm;
    this.#onPruned = onPruned;
  }

  /** The pass in flight, if any. */
  get running(): Promise<void> | undefined {
    return this.#pass;
  }

  /** One pass; concurrent calls share it. Never rejects. */
  run(): Promise<void> {
    this.#pass ??= this.#guarded();
    return this.#pass;
  }

  // One promise per pass (a pass runs every few seconds for the process's life).
  async #guarded(): Promise<void> {
    try {
      await this.#once();
    } catch (error) {
      // A timer must never reject into the host (an unhandled rejection kills it).
      this.#core.emitGeneral('', 'maintenance-failed', 'A maintenance pass failed', { error });
    } finally {
      this.#pass = undefined;
    }
  }

  async #once(): Promise<void> {
    const core = this.#core;
    if (core.shuttingDown) return;
    const now = core.now();
    const timeoutMs = core.options.registrationTimeoutMs;
    const destroys: Promise<void>[] = [];
    for (const record of core.book.list()) {
      if (record.state === 'spawning' && now - record.spawnedAt >= timeoutMs) {
        core.counters.pruned++;
        core.emitFor(
          record,
          'pruned',
          `${record.agentId} did not register within ${timeoutMs} ms; released and destroyed`,
        );
        this.#onPruned(record.scaler);
        destroys.push(core.destroy(record, 'pruned'));
      } else if (record.state === 'destroying' && record.destroyFailed) {
        destroys.push(core.runDestroy(record));
      } else if (record.state === 'idle' || record.state === 'busy') {
        const lifetime = record.scaler.config.maxAgentLifetimeSeconds;
        if (lifetime !== undefined && now - record.spawnedAt >= lifetime * 1000) {
          const wasIdle = record.state === 'idle';
          void core.drain(record, 'lifetime');
          if (wasIdle) destroys.push(record.destroyCall ?? Promise.resolve());
        }
      }
    }
    for (const scaler of core.scalers.order) {
      const reaped = this.#reapIdle(scaler, now);
      for (const destroy of reaped) destroys.push(destroy);
      this.#trimExcess(scaler);
    }
    if (destroys.length > 0) await Promise.all(destroys);
    await this.#warm.replenish(now);
  }

  /**
   * Destroy idle agents past the scaler's idle timeout, except the ones the
   * warm pool's current target keeps (the most recently idle).
   */
  #reapIdle(scaler: ScalerState, now: number): Promise<void>[] {
    const seconds = scaler.config.idleTimeoutSeconds ?? scaler.config.warmPool?.idleTimeoutSeconds;
    if (seconds === undefined) return NONE;
    const timeoutMs = seconds * 1000;
    // Most passes find nothing expired: look before building anything.
    const book = this.#core.book;
    let idleCount = 0;
    let expired: AgentRecord[] | undefined;
    for (const id of scaler.agents) {
      const record = book.get(id);
      if (record?.state !== 'idle') continue;
      idleCount++;
      if (now - record.idleSince < timeoutMs) continue;
      expired ??= [];
      expired.push(record);
    }
    if (expired === undefined) return NONE;
    const keep = Math.max(0, this.#warm.target(scaler, now) - (idleCount - expired.length));
    expired.sort((a, b) => b.idleSince - a.idleSince);
    return expired.slice(keep).map((record) => this.#core.destroy(record, 'idle'));
  }

  /**
   * A scaler above its `maxAgents` (a reload lowered it) or removed by a
   * reload: idle agents above the limit are destroyed, busy ones drained.
   */
  #trimExcess(scaler: ScalerState): void {
    const core = this.#core;
    const max = scaler.retiring ? 0 : scaler.config.maxAgents;
    // Within the limit (nearly every pass): count before building anything.
    if (scaler.agents.size <= max) return;
    let live = 0;
    const idle: AgentRecord[] = [];
    const busy: AgentRecord[] = [];
    for (const id of scaler.agents) {
      const record = core.book.get(id)!;
      if (record.state === 'destroying' || record.state === 'draining') continue;
      live++;
      if (record.state === 'idle') idle.push(record);
      else if (record.state === 'busy') busy.push(record);
    }
    let excess = live - max;
    if (excess <= 0) return;
    idle.sort((a, b) => a.idleSince - b.idleSince);
    for (const record of idle) {
      if (excess-- <= 0) return;
      void core.destroy(record, 'excess');
    }
    for (const record of busy) {
      if (excess-- <= 0) return;
      void core.drain(record, 'excess');
    }
  }
}

/**
 * Two timers on the injected clock, each re-armed only after its task
 * settled (never overlapping), with up to 10% jitter, unref'd.
 * @internal
 */
export class Timers {
  readonly #core: FleetCore;
  readonly #timers = new Map<string, ClockTimer>();
  #stopped = true;

  constructor(core: FleetCore) {
    this.#core = core;
  }

  get running(): boolean {
    return !this.#stopped;
  }

  /** Run `task` every `intervalMs` (plus jitter), starting after one interval. */
  every(name: string, intervalMs: number, task: () => Promise<unknown>): void {
    this.#stopped = false;
    if (this.#timers.has(name)) return;
    const arm = () => {
      if (this.#stopped) return;
      const jitter = Math.floor(intervalMs * 0.1 * this.#core.options.random());
      const rearm = () => {
        if (this.#timers.get(name) === timer) {
          this.#timers.delete(name);
          arm();
        }
      };
      const timer = this.#core.clock.setTimeout(() => {
        void task().then(rearm, rearm);
      }, intervalMs + jitter);
      timer.unref();
      this.#timers.set(name, timer);
    };
    arm();
  }

  stop(): void {
    this.#stopped = true;
    for (const timer of this.#timers.values()) this.#core.clock.clearTimeout(timer);
    this.#timers.clear();
  }
}
