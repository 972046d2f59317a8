/**
 * The manager's shared types: what its public answers and events are made of,
 * in one leaf file every part may import (it imports no part), so that the
 * parts import each other in one direction only.
 */
import type { CapDimension } from '../caps/types.js';
import type { ResourceCap, ResourceRequest } from '../resources/types.js';
import type { AgentResources } from './backend.js';

/**
 * The state of one agent (see the state machine in docs/manager.md):
 * `spawning` → `idle` ⇄ `busy` → `draining` → `destroying` → `gone`.
 */
export type AgentState = 'spawning' | 'idle' | 'busy' | 'draining' | 'destroying' | 'gone';

/** A limit that refused a request, and by how much. Discriminated by `limit`. */
export type CapacityLimit =
  | {
      /**
       * The scaler's spawn pacing: `maxConcurrentSpawns` (`window: 'concurrent'`)
       * or `maxSpawnsPerMinute` (`window: 'minute'`) was reached.
       */
      limit: 'spawn-rate';
      /** The scaler. */
      scaler: string;
      /** Which pacing rule refused. */
      window: 'concurrent' | 'minute';
      /** Spawns counted by that rule now. */
      used: number;
      /** The rule's limit. */
      max: number;
      /** When to ask again, in milliseconds. */
      retryAfterMs: number;
      /** Always false. */
      neverFits: false;
    }
  | {
      /**
       * The scaler's machine pool lost rows of running agents and the
       * `stop-spawning` policy holds new spawns there until they are restored.
       */
      limit: 'reservation-lost';
      /** The scaler. */
      scaler: string;
      /** The pool. */
      pool: string;
      /** Always false. */
      neverFits: false;
    }
  | {
      /**
       * The ledger lease this manager's pool rows are held under is at risk
       * or lost (renewals fail): `leaseLostPolicy` `stop-agents` or
       * `stop-spawning` refuses new spawns in machine pools until the lease
       * is renewed.
       */
      limit: 'lease-at-risk';
      /** The scaler. */
      scaler: string;
      /** The pool. */
      pool: string;
      /** The lease's health now. */
      health: 'at-risk' | 'lost';
      /** The lease's deadline (epoch ms on the ledger's clock), when known. */
      deadline?: number;
      /** Always false. */
      neverFits: false;
    }
  | {
      /**
       * The job is outside a LimitRange-like policy: the scaler's `limits`
       * (`scaler-limit-range`) or the orchestrator's (`global-limit-range`).
       */
      limit: 'scaler-limit-range' | 'global-limit-range';
      /** The scaler that was tried. */
      scaler: string;
      /** The resource (`cpus`, `memory` or an extended resource name). */
      resource: string;
      /** The rule that refused: `min`, `max` or `maxLimitRequestRatio`. */
      rule: 'min' | 'max' | 'maxLimitRequestRatio';
      /** The side checked (`limits` for the ratio). */
      side: 'requests' | 'limits';
      /** The job's value (cores, bytes or a count; the ratio for `maxLimitRequestRatio`). */
      value: number;
      /** The rule's bound. */
      bound: number;
      /** A sentence naming all of it. */
      message: string;
      /** Always true: the job never fits this policy. */
      neverFits: true;
    }
  | {
      /** The scaler's spawn backoff is open after consecutive spawn failures. */
      limit: 'backing-off';
      /** The scaler. */
      scaler: string;
      /** Consecutive failures so far. */
      failures: number;
      /** When the backoff closes, in milliseconds from now. */
      retryAfterMs: number;
      /** The last spawn failure. */
      lastError: unknown;
      /** Always false. */
      neverFits: false;
    }
  | {
      /** `globalMaxAgents` was reached. */
      limit: 'global-max-agents';
      /** Agents tracked now (spawning, idle and busy). */
      used: number;
      /** The limit. */
      max: number;
      /** The scaler that was tried. */
      scaler: string;
      /** Always false: agents may go away, and a limit of 0 may be raised by `reload`. */
      neverFits: false;
    }
  | {
      /** The scaler's `maxAgents` was reached. */
      limit: 'scaler-max-agents';
      /** Agents of this scaler tracked now. */
      used: number;
      /** The limit. */
      max: number;
      /** The scaler. */
      scaler: string;
      /** Always false: agents may go away, and a limit of 0 may be raised by `reload`. */
      neverFits: false;
    }
  | {
      /**
       * A CPU, memory or extended resource cap: the orchestrator's (`global-cap`),
       * the scaler's, or a machine pool's (`pool-cap`, with the pool; for an agent
       * in several pools, the pool that refused).
       */
      limit: 'global-cap' | 'scaler-cap' | 'pool-cap';
      /** The scaler that was tried. */
      scaler: string;
      /** The pool, for `pool-cap`. */
      pool?: string;
      /** The dimension that did not fit. */
      dimension: CapDimension;
      /** What the request asked for (cores or bytes). */
      requested: number;
      /** What is already held (cores or bytes). */
      used: number;
      /** The cap (cores or bytes). */
      max: number;
      /** True when the request exceeds the cap even with nothing held. */
      neverFits: boolean;
    };

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

/** Why a scaler did not match a job. @internal */
export type NoMatchReason = Extract<ScaleResult, { kind: 'no-match' }>['reasons'][number];

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

/** An agent `shutdownAll()` could not confirm stopped: its pool rows are kept. */
export interface UnconfirmedAgent {
  /** The agent. */
  agentId: string;
  /** Its scaler. */
  scaler: string;
  /**
   * What was not confirmed:
   * - `spawn-unanswered`: its spawn (or pool reservation) had not answered, even after the abort;
   * - `destroy-unanswered`: its `destroy` had not answered;
   * - `destroy-failed`: its `destroy` rejected (twice, when it had failed before);
   * - `shutdown-failed`: its backend's `shutdown()` rejected or had not answered.
   */
  reason: 'spawn-unanswered' | 'destroy-unanswered' | 'destroy-failed' | 'shutdown-failed';
}

/** What `shutdownAll()` did. */
export interface ShutdownResult {
  /**
   * Agents that may still run, with their pool rows kept (empty when every
   * agent was confirmed stopped and every row released). A spawn or destroy
   * listed here that answers later, while the process lives, is destroyed and
   * its rows released at once; otherwise peers reclaim the rows once this
   * instance's lease ends.
   */
  unconfirmed: UnconfirmedAgent[];
}

/** What `reconcile` found. */
export interface ReconcileResult {
  /** Tracked agents their backend no longer lists: released and forgotten. */
  released: string[];
  /** Agents a backend lists that this manager does not track (left alone). */
  untracked: {
    /** The scaler whose backend listed it (for a backend object serving several scalers, the first of them in config order). */
    scaler: string;
    /** The agent. */
    agentId: string;
  }[];
  /** Backends whose `list()` threw (their agents were left alone). */
  failed: {
    /** The scaler. */
    scaler: string;
    /** What `list()` threw. */
    error: unknown;
  }[];
  /** What each of the `sweeps` option's sweeps did, in order (absent without `sweeps`). */
  sweeps?: {
    /** The sweep's name (its key in the `sweeps` option). */
    name: string;
    /** The agents whose leftovers it removed (empty when it failed or did not run). */
    removedAgents: string[];
    /** What it threw (or a `TypeError` for an answer without `removedAgents`), when it failed. */
    error?: unknown;
    /**
     * Set when it did not run because the live set was unknown: a backend has no
     * `list()` or its `list()` failed, so agents it still runs (a crashed
     * controller's, say) could not be told from dead ones.
     */
    skipped?: 'live-set-unknown';
  }[];
}

/** An agent a backend runs that the manager does not track. @internal */
export type UntrackedAgent = ReconcileResult['untracked'][number];

/** A backend whose `list()` threw during `reconcile`. @internal */
export type ReconcileFailure = ReconcileResult['failed'][number];

/** Options of `ScalerManager.shutdownAll`. @internal */
export type ShutdownOptions = { drain?: boolean; timeoutMs?: number };

/** What one sweep did in a `reconcile()` pass. @internal */
export type SweepOutcome = NonNullable<ReconcileResult['sweeps']>[number];

/**
 * One sweep: remove what agents not in `liveAgentIds` left behind, and answer
 * which agents that was. `sweepAgentCaps(kv, live)` and
 * `sweepIsolation(live, opts)` both fit once closed over their first argument.
 *
 * `liveAgentIds` is a live view: iterating it reads the manager's agents at that
 * moment (every tracked agent, spawning and being destroyed included, plus the
 * agents a backend listed that the manager does not track), so a sweep that
 * iterates it after reading its own state keeps what an agent started meanwhile
 * wrote.
 */
export type ReconcileSweep = (liveAgentIds: Iterable<string>) => Promise<{
  /** The agents whose leftovers the sweep removed. */
  readonly removedAgents: readonly string[];
}>;
