import type { ResourceCap } from '../resources/types.js';
import type { CapacityLimit } from './scale-types.js';

/**
 * Counters, for metrics. They only grow.
 *
 * @example
 * ```ts
 * import type { ScalerCounters, ScalerManager } from 'scaler-primitives/manager';
 * declare const manager: ScalerManager;
 * const { coldStarts, warmHits, spawnFailures }: ScalerCounters = manager.getStatus().counters;
 * console.log(`warm hit rate ${(warmHits / Math.max(1, coldStarts + warmHits)).toFixed(2)}, ${spawnFailures} failed spawns`);
 * ```
 */
export interface ScalerCounters {
  /** Spawns for a job (an agent started because a job waited). */
  coldStarts: number;
  /** Jobs correlated to an idle warm agent. */
  warmHits: number;
  /** Warm-pool spawns. */
  warmSpawns: number;
  /** Spawns that failed (pool or backend). */
  spawnFailures: number;
  /** Spawns pruned because the agent never registered. */
  pruned: number;
  /** Idle agents destroyed after their idle timeout. */
  idleDestroyed: number;
  /** Agents released by `reconcile` because their backend no longer lists them. */
  reconciled: number;
  /** Agents destroyed for any reason but idleness or a missed registration: drains, job and lifetime limits, excess, removal, shutdown. */
  drained: number;
}

/**
 * Usage in CPU cores and memory bytes.
 *
 * @example
 * ```ts
 * import type { ScalerManager, Usage } from 'scaler-primitives/manager';
 * declare const manager: ScalerManager;
 * declare const requested: number;
 * const usage: Usage = manager.getStatus().globalUsage;
 * console.log(`${usage.cpus} cores, ${usage.memBytes / 2 ** 30} GiB requested`);
 * ```
 */
export interface Usage {
  /** Summed CPU requests, in cores. */
  cpus: number;
  /** Summed memory requests, in bytes. */
  memBytes: number;
  /** Summed extended resource requests, whole counts by name (absent when none). */
  extended?: Record<string, number>;
}

/**
 * A point-in-time summary for metrics and health endpoints.
 *
 * @example
 * ```ts
 * import type { ScalerManager, ScalerStatus } from 'scaler-primitives/manager';
 * declare const manager: ScalerManager;
 * const status: ScalerStatus = manager.getStatus();
 * console.log(`${status.globalActiveCount}/${status.globalMaxAgents} agents, ${status.spawningCount} spawning`);
 * ```
 */
export interface ScalerStatus {
  /** The orchestrator-wide agent limit. */
  globalMaxAgents: number;
  /** Agents tracked (spawning, idle and busy). */
  globalActiveCount: number;
  /** Agents spawning (not yet registered). */
  spawningCount: number;
  /**
   * Warm capacity of scalers with a warm pool: idle agents that can take another
   * job, plus spawns no job was given. An agent on its last job (see
   * `maxJobsPerAgent`) or spawning for a job is not counted.
   */
  warmPoolCount: number;
  /** Summed requests of every tracked agent. */
  globalUsage: Usage;
  /** The orchestrator-wide cap, if configured. */
  globalResourceCap?: ResourceCap;
  /** Machine pools: cap, and what this instance holds in each. */
  pools: PoolStatus[];
  /** Counters since construction. */
  counters: ScalerCounters;
  /** One entry per scaler (retiring ones included). */
  backends: BackendStatus[];
  /** True once `shutdownAll()` was called. */
  shuttingDown: boolean;
  /** The ledger lease this manager's pool rows are held under, when the ledger has `lease()`. */
  lease?: LeaseStatus;
}

/**
 * The ledger lease in {@link ScalerStatus}: its health now and what
 * `leaseLostPolicy` does about it.
 *
 * @example
 * ```ts
 * import type { LeaseStatus, ScalerManager } from 'scaler-primitives/manager';
 * declare const manager: ScalerManager;
 * const lease: LeaseStatus | undefined = manager.getStatus().lease;
 * if (lease && lease.health !== 'held') console.warn(`lease ${lease.health}, deadline ${lease.deadline}`);
 * ```
 */
export interface LeaseStatus {
  /** `none`, `held`, `at-risk` or `lost` (see `LeaseHealth` in `scaler-primitives/ledger`). */
  health: 'none' | 'held' | 'at-risk' | 'lost';
  /** The last renewal the store confirmed (epoch ms, ledger clock), once there was one. */
  confirmedAt?: number;
  /** `confirmedAt + leaseMs`: rows are not safe past it. */
  deadline?: number;
  /** The lease length in ms. */
  leaseMs: number;
  /** What peers add to the deadline before they take rows. */
  marginMs: number;
  /** The manager's `leaseLostPolicy`. */
  policy: 'stop-agents' | 'stop-spawning' | 'report';
  /** True while the policy refuses new spawns in machine pools. */
  spawningStopped: boolean;
}

/**
 * One machine pool in {@link ScalerStatus}.
 *
 * @example
 * ```ts
 * import type { PoolStatus, ScalerManager } from 'scaler-primitives/manager';
 * declare const manager: ScalerManager;
 * for (const pool of manager.getStatus().pools) {
 *   const p: PoolStatus = pool;
 *   console.log(`${p.name}: ${p.usage.cpus} of ${p.cap.maxCpu ?? 'unlimited'} cores`);
 * }
 * ```
 */
export interface PoolStatus {
  /** The pool. */
  name: string;
  /** Its cap. */
  cap: ResourceCap;
  /** What this manager's agents hold in it (other processes' rows are not counted). */
  usage: Usage;
}

/**
 * One scaler in {@link ScalerStatus}.
 *
 * @example
 * ```ts
 * import type { BackendStatus, ScalerManager } from 'scaler-primitives/manager';
 * declare const manager: ScalerManager;
 * for (const b of manager.getStatus().backends) {
 *   const s: BackendStatus = b;
 *   console.log(`${s.name}: ${s.busyCount} busy, ${s.idleCount} idle, ${s.spawningCount} spawning of ${s.maxAgents}`);
 * }
 * ```
 */
export interface BackendStatus {
  /** The scaler name. */
  name: string;
  /** The backend kind from config. */
  type: string;
  /** Agents tracked (spawning, idle, busy). */
  activeCount: number;
  /** Agents spawning. */
  spawningCount: number;
  /** Agents registered and idle. */
  idleCount: number;
  /** Agents registered and busy (draining ones not included). */
  busyCount: number;
  /** Busy agents draining: destroyed when their job completes. */
  drainingCount: number;
  /** Agents whose destroy has begun. */
  destroyingCount: number;
  /** The ids of the draining agents. */
  draining: string[];
  /** The scaler's agent limit. */
  maxAgents: number;
  /** Label sets this scaler can provision, automatic labels included. */
  labelSets: string[][];
  /** Summed requests of this scaler's agents. */
  usage: Usage;
  /** The scaler's cap, if configured. */
  resourceCap?: ResourceCap;
  /** The machine pool, if any. */
  machinePool?: string;
  /** Labels a job must name to run here (empty: no gate). */
  mandatoryLabels: string[];
  /** The warm pool target, if any. */
  warmPool?: WarmPoolStatus;
  /** The spawn-failure backoff, when failures were counted. */
  backoff?: BackoffStatus;
  /**
   * True while spawns in its machine pool are held: by `reservationLostPolicy`
   * `stop-spawning` after a lost pool reservation, or by `leaseLostPolicy`
   * while the ledger lease is at risk or lost.
   */
  spawningStopped?: boolean;
  /** True once `reload` removed it; it goes when its last agent goes. */
  retiring: boolean;
}

/**
 * A scaler's spawn-failure backoff in {@link BackendStatus}.
 *
 * @example
 * ```ts
 * import type { BackoffStatus, ScalerManager } from 'scaler-primitives/manager';
 * declare const manager: ScalerManager;
 * for (const b of manager.getStatus().backends) {
 *   const backoff: BackoffStatus | undefined = b.backoff;
 *   if (backoff?.open) console.warn(`${b.name}: backing off after ${backoff.failures} failed spawns`);
 * }
 * ```
 */
export interface BackoffStatus {
  /** Consecutive failures (spawns that failed or agents that never registered). */
  failures: number;
  /** True while requests are refused with `backing-off`. */
  open: boolean;
  /** Epoch milliseconds when it closes (when open). */
  until?: number;
  /** The last failure. */
  lastError?: unknown;
}

/**
 * A scaler's warm pool in {@link BackendStatus}.
 *
 * @example
 * ```ts
 * import type { ScalerManager, WarmPoolStatus } from 'scaler-primitives/manager';
 * declare const manager: ScalerManager;
 * for (const b of manager.getStatus().backends) {
 *   const warm: WarmPoolStatus | undefined = b.warmPool;
 *   if (warm) console.log(`${b.name}: warm pool ${warm.size} (base ${warm.baseSize})`);
 * }
 * ```
 */
export interface WarmPoolStatus {
  /** Idle agents to keep ready now (the active schedule's size, or the base `size`). */
  size: number;
  /** The configured base size (outside every schedule). */
  baseSize: number;
  /** Index of the active schedule in `warmPool.schedules`, if one is active. */
  activeSchedule?: number;
  /** Epoch milliseconds of the next schedule start (when schedules are configured). */
  nextChangeAt?: number;
  /** Idle agents older than this are destroyed. */
  idleTimeoutSeconds: number;
  /** Why the pool holds fewer agents than it could, when it does (see {@link WarmPoolHold}). */
  held?: WarmPoolHold;
}

/**
 * Why a warm pool is not replenished now, and until when. Also the `data` of
 * the `warm-pool-held` event (emitted when a hold begins or its reason changes;
 * `warm-pool-resumed` follows when it ends).
 *
 * @example
 * ```ts
 * import type { ScalerManager, WarmPoolHold } from 'scaler-primitives/manager';
 * declare const manager: ScalerManager;
 * for (const b of manager.getStatus().backends) {
 *   const held: WarmPoolHold | undefined = b.warmPool?.held;
 *   if (held) console.log(`${b.name}: warm pool held (${held.reason}) until ${held.until ?? 'unknown'}`);
 * }
 * ```
 */
export interface WarmPoolHold {
  /**
   * - `demand`: a job was refused for capacity within `demandHoldMs` (at this
   *   scaler, or globally): freed capacity goes to waiting jobs first;
   * - `job-spawns`: spawns for jobs are in flight at this scaler;
   * - `capacity`: a limit refused the warm spawn (`limit`: which, with numbers;
   *   spawn pacing, failure backoff and a stopped pool are limits too);
   * - `spawn-failed`: the last warm spawn failed (see the `spawn-failed` event);
   * - `resources`: the warm label set's resources do not resolve (see `warm-pool-failed`);
   * - `schedule`: an active schedule sets a smaller pool than `size`.
   */
  reason: 'demand' | 'job-spawns' | 'capacity' | 'spawn-failed' | 'resources' | 'schedule';
  /** A sentence saying it. */
  message: string;
  /** Agents the pool holds toward its target now (idle, or spawning with no job). */
  ready: number;
  /** The target it is held below (for `schedule`: the base `size`). */
  target: number;
  /** Epoch milliseconds when the hold began (the first pass that found it). */
  since: number;
  /** Epoch milliseconds when it lifts at the earliest, when known (demand hold end, retry time, schedule change). */
  until?: number;
  /** The limit that refused, for `capacity`. */
  limit?: CapacityLimit;
}
