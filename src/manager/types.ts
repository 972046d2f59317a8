import type { CapDimension } from '../caps/cap-tracker.js';
import type { ConfigIssue } from '../errors.js';
import type { ResourceAmount, ResourceCap } from '../resources/types.js';

/** A job's resources after layered defaults: what caps add up and what the backend enforces. */
export interface AgentResources {
  /** What the agent needs: summed by the scaler, orchestrator and pool caps. */
  requests: ResourceAmount;
  /** What the agent may use at most: what the backend should enforce. */
  limits: ResourceAmount;
}

/** What the manager asks a backend to start. */
export interface SpawnRequest {
  /** The agent id the manager generated; the agent must register under this id. */
  agentId: string;
  /** The scaler (backend entry) name. */
  scaler: string;
  /** The job the agent is started for; absent for a warm-pool spawn. */
  jobId?: string;
  /** True for a warm-pool spawn (no job yet). */
  warm: boolean;
  /** The matched label set, automatic labels included: the labels the agent should register with. */
  labels: readonly string[];
  /** Index of the matched label set in the scaler's `labelSets`. */
  labelSetIndex: number;
  /** The scaler's mandatory labels (a job must name all of them to run on this agent). */
  mandatoryLabels: readonly string[];
  /** The resolved requests and limits. */
  resources: AgentResources;
  /**
   * Report a backend event about this agent (image pulled, VM booted, log line...).
   * Events are relayed to `onScalerEvent` once the agent is correlated with a job,
   * and buffered until then.
   */
  emit(event: BackendEventInput): void;
}

/** An event a backend reports through {@link SpawnRequest.emit}. */
export interface BackendEventInput {
  /** A short machine-readable kind, e.g. `image-pulled`. */
  kind: string;
  /** A human-readable sentence. */
  message?: string;
  /** Anything else worth passing on. */
  data?: Record<string, unknown>;
}

/** What a backend's `spawn` resolves to. Everything is optional. */
export interface SpawnResult {
  /** Backend-specific facts about the agent (container id, VM address...), for `getScalerContextForAgent`. */
  context?: Record<string, unknown>;
}

/**
 * What the host implements for each kind of agent (containers, microVMs, processes,
 * cloud instances). The manager decides; the backend acts.
 */
export interface ScalerBackend {
  /**
   * Start an agent. Resolve once it is starting (it registers later, through
   * `onAgentRegistered`); reject when it could not be started. The manager has
   * already reserved its capacity and releases it when this rejects.
   */
  // biome-ignore lint/suspicious/noConfusingVoidType: lets `async spawn() {}` implement it
  spawn(request: SpawnRequest): Promise<SpawnResult | undefined | void>;
  /** Stop an agent and free what it holds. Called for idle warm agents, pruned spawns and shutdown. */
  destroy(agentId: string): Promise<void>;
  /** The ids of the agents this backend currently runs, for `ScalerManager.reconcile`. */
  list?(): Promise<string[]>;
  /** Stop every agent of this backend (called by `shutdownAll`); without it, `destroy` is called per agent. */
  shutdown?(): Promise<void>;
}

/** A limit that refused a request, and by how much. Discriminated by `limit`. */
export type CapacityLimit =
  | {
      /** `globalMaxAgents` was reached. */
      limit: 'global-max-agents';
      /** Agents tracked now (spawning, idle and busy). */
      used: number;
      /** The limit. */
      max: number;
      /** The scaler that was tried. */
      scaler: string;
      /** True when the limit is 0. */
      neverFits: boolean;
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
      /** True when the limit is 0. */
      neverFits: boolean;
    }
  | {
      /** A CPU or memory cap: the orchestrator's (`global-cap`), the scaler's, or the machine pool's. */
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

/** Why a scaler did not match a job. */
export interface NoMatchReason {
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
}

/**
 * The answer to `requestScale`, discriminated by `kind`:
 *
 * - `spawned`: capacity was reserved and the backend is starting `agentId`;
 * - `already-spawning`: a spawn for this job is in flight (nothing new reserved);
 * - `no-match`: no scaler has a label set for this job (`reasons` per scaler);
 * - `at-capacity`: a limit is full now; retry when an agent goes away;
 * - `never-fits`: the request exceeds a cap even when empty at every scaler that matches; fail the job;
 * - `spawn-failed`: the pool reservation or the backend's `spawn` failed; everything was rolled back.
 */
export type ScaleResult =
  | {
      /** Capacity reserved, backend spawning. */
      kind: 'spawned';
      /** The scaler chosen. */
      backend: string;
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
      backend: string;
      /** The agent being spawned. */
      agentId: string;
    }
  | {
      /** No scaler can run this job. */
      kind: 'no-match';
      /** Why, per scaler (in config order). */
      reasons: NoMatchReason[];
    }
  | {
      /** Every matching scaler is full now. */
      kind: 'at-capacity';
      /** The first scaler that matched. */
      backend: string;
      /** The first limit that refused (at the first matching scaler). */
      limit: CapacityLimit;
      /** The refusal of every matching scaler, in the order they were tried. */
      refusals: CapacityLimit[];
    }
  | {
      /** The request can never fit at any matching scaler under the current config. */
      kind: 'never-fits';
      /** The first scaler that matched. */
      backend: string;
      /** The cap it exceeds at that scaler. */
      limit: CapacityLimit;
      /** The refusal of every matching scaler. */
      refusals: CapacityLimit[];
    }
  | {
      /** Reserving in the machine pool or spawning failed; every reservation was released. */
      kind: 'spawn-failed';
      /** The scaler chosen. */
      backend: string;
      /** The agent id that was to be used. */
      agentId: string;
      /** `reserve`: the pool ledger threw; `spawn`: the backend rejected. */
      stage: 'reserve' | 'spawn';
      /** What was thrown. */
      error: unknown;
    };

/** The state of one tracked agent. */
export type AgentState = 'spawning' | 'idle' | 'busy';

/**
 * A lifecycle or backend event about one agent. Manager events have `source: 'manager'`;
 * events a backend reports through `emit` have `source: 'backend'`.
 */
export interface ScalerEvent {
  /** Who produced the event. */
  source: 'manager' | 'backend';
  /**
   * For the manager: `spawning`, `spawned`, `spawn-failed`, `registered`, `busy`, `idle`,
   * `disconnected`, `pruned`, `destroyed`, `destroy-failed`, `release-failed`, `gone`
   * (reconcile), `events-dropped` (the pre-correlation buffer overflowed),
   * `reservation-lost` (the ledger removed this agent's pool row while this instance's
   * lease had lapsed: the agent runs without a pool reservation; `data.certain` is false
   * when the ledger could not say which rows it removed); and, with an
   * empty `agentId`, `maintenance-failed`, `warm-pool-failed` and `shutdown-failed`. For a backend: its own kind.
   */
  kind: string;
  /** The agent. */
  agentId: string;
  /** The scaler. */
  scaler: string;
  /** When, in epoch milliseconds (from the manager's clock). */
  at: number;
  /** A human-readable sentence. */
  message?: string;
  /** Extra facts (e.g. `{ dropped: 12 }` for `events-dropped`, `{ error }` for failures). */
  data?: Record<string, unknown>;
}

/** Counters, for metrics. They only grow. */
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
}

/** Usage in CPU cores and memory bytes. */
export interface Usage {
  /** Summed CPU requests, in cores. */
  cpus: number;
  /** Summed memory requests, in bytes. */
  memBytes: number;
}

/** A point-in-time summary for metrics and health endpoints. */
export interface ScalerStatus {
  /** The orchestrator-wide agent limit. */
  globalMaxAgents: number;
  /** Agents tracked (spawning, idle and busy). */
  globalActiveCount: number;
  /** Agents spawning (not yet registered). */
  spawningCount: number;
  /** Idle agents of scalers with a warm pool, plus warm spawns in flight. */
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
}

/** One machine pool in {@link ScalerStatus}. */
export interface PoolStatus {
  /** The pool. */
  name: string;
  /** Its cap. */
  cap: ResourceCap;
  /** What this manager's agents hold in it (other processes' rows are not counted). */
  usage: Usage;
}

/** One scaler in {@link ScalerStatus}. */
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
  /** Agents registered and busy. */
  busyCount: number;
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
  /** True once `reload` removed it; it goes when its last agent goes. */
  retiring: boolean;
}

/** A scaler's warm pool in {@link BackendStatus}. */
export interface WarmPoolStatus {
  /** Idle agents to keep ready. */
  size: number;
  /** Idle agents older than this are destroyed. */
  idleTimeoutSeconds: number;
}

/** The answer to `reload`. */
export interface ValidationResult {
  /** True when the new config was applied. */
  ok: boolean;
  /** Every problem found (empty when `ok`); nothing was changed when there is one. */
  errors: ConfigIssue[];
}

/** What `reconcile` found. */
export interface ReconcileResult {
  /** Tracked agents their backend no longer lists: released and forgotten. */
  released: string[];
  /** Agents a backend lists that this manager does not track (left alone). */
  untracked: UntrackedAgent[];
  /** Backends whose `list()` threw (their agents were left alone). */
  failed: ReconcileFailure[];
}

/** An agent a backend runs that the manager does not track. */
export interface UntrackedAgent {
  /** The scaler whose backend listed it. */
  scaler: string;
  /** The agent. */
  agentId: string;
}

/** A backend whose `list()` threw during `reconcile`. */
export interface ReconcileFailure {
  /** The scaler. */
  scaler: string;
  /** What `list()` threw. */
  error: unknown;
}

/** The answer to `onAgentRegistered` for an agent the manager spawned. */
export interface AgentRegistration {
  /** The job the agent was spawned for; absent for a warm-pool agent. */
  boundJobId?: string;
  /** Labels every job given to this agent must name (apply them to queue-drain dispatch too). */
  mandatoryLabels: string[];
}
