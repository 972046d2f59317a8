import type { ResourceCap } from '../resources/types.js';
import type { CapacityLimit } from './capacity.js';
import { GLOBAL_SCOPE } from './capacity.js';
import type { FleetCore } from './core.js';
import { isWarmCapacity } from './inventory.js';
import type { ScalerState } from './scalers.js';

/** Counters, for metrics. They only grow. @internal */
export type ScalerCounters = ScalerStatus['counters'];

/** Usage in CPU cores and memory bytes. @internal */
export type Usage = ScalerStatus['globalUsage'];

/** A point-in-time summary for metrics and health endpoints. */
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
  globalUsage: {
    /** Summed CPU requests, in cores. */
    cpus: number;
    /** Summed memory requests, in bytes. */
    memBytes: number;
    /** Summed extended resource requests, whole counts by name (absent when none). */
    extended?: Record<string, number>;
  };
  /** The orchestrator-wide cap, if configured. */
  globalResourceCap?: ResourceCap;
  /** Machine pools: cap, and what this instance holds in each. */
  pools: {
    /** The pool. */
    name: string;
    /** Its cap. */
    cap: ResourceCap;
    /**
     * What this manager's agents hold in it (other processes' rows are not
     * counted): for an agent in several pools, its part of the request in this one.
     */
    usage: {
      /** Summed CPU requests, in cores. */
      cpus: number;
      /** Summed memory requests, in bytes. */
      memBytes: number;
      /** Summed extended resource requests, whole counts by name (absent when none). */
      extended?: Record<string, number>;
    };
  }[];
  /** Counters since construction. */
  counters: {
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
  };
  /** One entry per scaler (retiring ones included), in config order. */
  scalers: ScalerEntryStatus[];
  /** True once `shutdownAll()` was called. */
  shuttingDown: boolean;
  /** The ledger lease this manager's pool rows are held under, when the ledger has `lease()`. */
  lease?: {
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
    /** The manager's `policies.leaseLost`. */
    policy: 'stop-agents' | 'stop-spawning' | 'report';
    /** True while the policy refuses new spawns in machine pools. */
    spawningStopped: boolean;
  };
}

/** The ledger lease in {@link ScalerStatus}. @internal */
export type LeaseStatus = NonNullable<ScalerStatus['lease']>;

/** One machine pool in {@link ScalerStatus}. @internal */
export type PoolStatus = ScalerStatus['pools'][number];

/** One scaler in {@link ScalerStatus}. */
export interface ScalerEntryStatus {
  /** The scaler name. */
  name: string;
  /** The scaler's `type` from config. */
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
  usage: {
    /** Summed CPU requests, in cores. */
    cpus: number;
    /** Summed memory requests, in bytes. */
    memBytes: number;
    /** Summed extended resource requests, whole counts by name (absent when none). */
    extended?: Record<string, number>;
  };
  /** The scaler's cap, if configured. */
  resourceCap?: ResourceCap;
  /** The machine pool, if any. */
  machinePool?: string;
  /**
   * Every machine pool its agents reserve in (the scaler's and its label
   * sets'), sorted by name, when that is more than `machinePool` alone
   * (several pools, or label sets with their own). Each agent's pools are in
   * `ScalerManager.getAgent()` / `listAgents()` (`pools`).
   */
  machinePools?: string[];
  /** Labels a job must name to run here (empty: no gate). */
  mandatoryLabels: string[];
  /** The warm pool target, if any. */
  warmPool?: {
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
  };
  /** The spawn-failure backoff, when failures were counted. */
  backoff?: {
    /** Consecutive failures (spawns that failed or agents that never registered). */
    failures: number;
    /** True while requests are refused with `backing-off`. */
    open: boolean;
    /** Epoch milliseconds when it closes (when open). */
    until?: number;
    /** The last failure. */
    lastError?: unknown;
  };
  /**
   * True while spawns in one of its machine pools are held: by
   * `policies.reservationLost` `stop-spawning` after a lost pool reservation, or
   * by `policies.leaseLost` while the lease of that pool's ledger is at risk or
   * lost. A label set whose pools are all unaffected spawns on.
   */
  spawningStopped?: boolean;
  /** True once `reload` removed it; it goes when its last agent goes. */
  retiring: boolean;
}

/** A scaler's spawn-failure backoff in {@link ScalerEntryStatus}. @internal */
export type BackoffStatus = NonNullable<ScalerEntryStatus['backoff']>;

/** A scaler's warm pool in {@link ScalerEntryStatus}. @internal */
export type WarmPoolStatus = NonNullable<ScalerEntryStatus['warmPool']>;

/**
 * Why a warm pool is not replenished now, and until when. Also the `data` of
 * the `warm-pool-held` event (emitted when a hold begins or its reason changes;
 * `warm-pool-resumed` follows when it ends).
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

/** Per-scaler facts other parts add to the status (warm target, pacing, schedule). @internal */
export type StatusExtras = (scaler: ScalerState, entry: ScalerEntryStatus) => void;

/** A point-in-time summary of the fleet. @internal */
export function buildStatus(core: FleetCore, extras: StatusExtras): ScalerStatus {
  const config = core.config;
  let spawningCount = 0;
  let warmPoolCount = 0;
  for (const record of core.book.values()) {
    if (record.state === 'spawning') spawningCount++;
    if (record.scaler.config.warmPool !== undefined && isWarmCapacity(record)) warmPoolCount++;
  }
  const poolUsage = core.gate.poolUsage();
  const status: ScalerStatus = {
    globalMaxAgents: config.globalMaxAgents,
    globalActiveCount: core.book.size,
    spawningCount,
    warmPoolCount,
    globalUsage: core.gate.usage(GLOBAL_SCOPE),
    pools: Object.entries(config.machinePools).map(([name, cap]) => ({
      name,
      cap: { ...cap },
      usage: poolUsage.get(name) ?? { cpus: 0, memBytes: 0 },
    })),
    counters: { ...core.counters },
    scalers: [],
    shuttingDown: core.shuttingDown,
  };
  if (config.resourceCap !== undefined) status.globalResourceCap = { ...config.resourceCap };
  for (const scaler of core.scalers.order) {
    const counts = { spawning: 0, idle: 0, busy: 0, draining: 0, destroying: 0 };
    const draining: string[] = [];
    for (const id of scaler.agents) {
      const state = core.book.get(id)!.state;
      if (state === 'gone') continue;
      counts[state]++;
      if (state === 'draining') draining.push(id);
    }
    const entry: ScalerEntryStatus = {
      name: scaler.name,
      type: scaler.config.type,
      activeCount: scaler.agents.size,
      spawningCount: counts.spawning,
      idleCount: counts.idle,
      busyCount: counts.busy,
      drainingCount: counts.draining,
      destroyingCount: counts.destroying,
      draining,
      maxAgents: scaler.config.maxAgents,
      labelSets: scaler.labelSets.map((set) => [...set.labels]),
      usage: core.gate.usage(scaler.scope),
      mandatoryLabels: [...scaler.config.mandatoryLabels],
      retiring: scaler.retiring,
    };
    if (scaler.config.resourceCap !== undefined) {
      entry.resourceCap = { ...scaler.config.resourceCap };
    }
    if (scaler.config.machinePool !== undefined) entry.machinePool = scaler.config.machinePool;
    if (
      scaler.pools.length > 1 ||
      (scaler.pools.length === 1 && scaler.pools[0] !== scaler.config.machinePool)
    ) {
      entry.machinePools = [...scaler.pools];
    }
    extras(scaler, entry);
    status.scalers.push(entry);
  }
  return status;
}
