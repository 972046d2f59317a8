import type { CapDimension } from '../caps/types.js';
import type { ConfigIssue } from '../errors.js';
import type { SweepOutcome } from './sweeps.js';

export type {
  BackendStatus,
  BackoffStatus,
  PoolStatus,
  ScalerCounters,
  ScalerStatus,
  Usage,
  WarmPoolHold,
  WarmPoolStatus,
} from './status-types.js';

import type { LimitRangeRule } from '../resources/limit-range.js';
import type { ResourceAmount, ResourceLimits } from '../resources/types.js';

/**
 * A job's resources after layered defaults: what caps add up and what the backend enforces.
 *
 * @example
 * ```ts
 * import type { AgentResources, ScalerManager } from 'scaler-primitives/manager';
 * declare const manager: ScalerManager;
 * const result = await manager.requestScale(['linux'], 'job-42');
 * if (result.kind === 'spawned') {
 *   const { requests, limits }: AgentResources = result.resources;
 *   console.log(`reserved ${requests.cpus} cores, limit ${limits.cpus ?? 'unset'}`);
 * }
 * ```
 */
export interface AgentResources {
  /** What the agent needs: summed by the scaler, orchestrator and pool caps. */
  requests: ResourceAmount;
  /**
   * What the agent may use at most: what the backend should enforce. A limit no
   * layer declares is absent (unset: enforce none), never 0.
   */
  limits: ResourceLimits;
}

/**
 * What the manager asks a backend to start.
 *
 * @example
 * ```ts
 * import type { ScalerBackend, SpawnRequest } from 'scaler-primitives/manager';
 * declare const request: SpawnRequest;
 * const backend: ScalerBackend = {
 *   async spawn(request: SpawnRequest) {
 *     request.emit({ kind: 'starting', message: `starting ${request.agentId} for ${request.jobId ?? 'the warm pool'}` });
 *     return { context: { cpus: request.resources.limits.cpus } };
 *   },
 *   async destroy(agentId) {},
 * };
 * ```
 */
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

/**
 * An event a backend reports through {@link SpawnRequest.emit}.
 *
 * @example
 * ```ts
 * import type { BackendEventInput, SpawnRequest } from 'scaler-primitives/manager';
 * declare const request: SpawnRequest;
 * const event: BackendEventInput = { kind: 'image-pulled', message: 'pulled ci-runner:2024.12', data: { ms: 1840 } };
 * request.emit(event);
 * ```
 */
export interface BackendEventInput {
  /** A short machine-readable kind, e.g. `image-pulled`. */
  kind: string;
  /** A human-readable sentence. */
  message?: string;
  /** Anything else worth passing on. */
  data?: Record<string, unknown>;
}

/**
 * What a backend's `spawn` resolves to. Everything is optional.
 *
 * @example
 * ```ts
 * import type { SpawnRequest, SpawnResult } from 'scaler-primitives/manager';
 * declare function startContainer(agentId: string, labels?: readonly string[]): Promise<string>;
 * declare const request: SpawnRequest;
 * async function spawn(request: SpawnRequest): Promise<SpawnResult> {
 *   const containerId = await startContainer(request.agentId);
 *   return { context: { containerId } }; // later: manager.getScalerContextForAgent(agentId)
 * }
 * ```
 */
export interface SpawnResult {
  /** Backend-specific facts about the agent (container id, VM address...), for `getScalerContextForAgent`. */
  context?: Record<string, unknown>;
}

/**
 * What the host implements for each kind of agent (containers, microVMs, processes,
 * cloud instances). The manager decides; the backend acts.
 *
 * One backend object may serve several scalers (give it under each name in
 * `backends`): `destroy` is called per agent, so one scaler's drain, trim or
 * removal never ends another's agents, and `list()` and `shutdown()` are
 * called once per backend object, not once per scaler, so they must answer
 * for every agent the object runs.
 *
 * @example
 * ```ts
 * import type { ScalerBackend } from 'scaler-primitives/manager';
 * declare function startContainer(agentId: string, labels?: readonly string[]): Promise<string>;
 * declare function stopContainer(agentId: string): Promise<void>;
 * const backend: ScalerBackend = {
 *   async spawn({ agentId, labels }) {
 *     await startContainer(agentId, labels);
 *   },
 *   async destroy(agentId) {
 *     await stopContainer(agentId);
 *   },
 * };
 * ```
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

/**
 * A limit that refused a request, and by how much. Discriminated by `limit`.
 *
 * @example
 * ```ts
 * import type { CapacityLimit, ScalerManager } from 'scaler-primitives/manager';
 * declare const manager: ScalerManager;
 * const result = await manager.requestScale(['linux'], 'job-42');
 * if (result.kind === 'at-capacity') {
 *   const limit: CapacityLimit = result.limit;
 *   console.log(`waiting on ${limit.limit} at ${limit.scaler}`);
 * }
 * ```
 */
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
       * The job is outside a LimitRange-like policy: the scaler's `limits`
       * (`scaler-limit-range`) or the orchestrator's (`global-limit-range`).
       */
      limit: 'scaler-limit-range' | 'global-limit-range';
      /** The scaler that was tried. */
      scaler: string;
      /** The resource (`cpus`, `memory` or an extended resource name). */
      resource: string;
      /** The rule that refused: `min`, `max` or `maxLimitRequestRatio`. */
      rule: LimitRangeRule;
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

/**
 * Why a scaler did not match a job.
 *
 * @example
 * ```ts
 * import type { NoMatchReason, ScalerManager } from 'scaler-primitives/manager';
 * declare const manager: ScalerManager;
 * const result = await manager.requestScale(['windows'], 'job-42');
 * if (result.kind === 'no-match') {
 *   for (const r of result.reasons as NoMatchReason[]) console.log(`${r.scaler}: ${r.reason} ${r.missing?.join(',') ?? ''}`);
 * }
 * ```
 */
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
 * - `spawn-failed`: the pool reservation or the backend's `spawn` failed; everything was rolled back;
 * - `backing-off`: every matching scaler that could fit is in spawn-failure backoff (`retryAfterMs`);
 * - `shutting-down`: `shutdownAll()` was called.
 *
 * @example
 * ```ts
 * import type { ScaleResult, ScalerManager } from 'scaler-primitives/manager';
 * declare const manager: ScalerManager;
 * const result: ScaleResult = await manager.requestScale(['linux', 'x64'], 'job-42');
 * if (result.kind === 'spawned') console.log(`${result.agentId} starting on ${result.backend}`);
 * else if (result.kind === 'never-fits') console.error(`job-42 can never run: ${result.limit.limit}`);
 * ```
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
      /** The soonest a pacing or backoff refusal lifts, when one of them refused. */
      retryAfterMs?: number;
    }
  | {
      /** Every matching scaler that could fit is backing off after spawn failures. */
      kind: 'backing-off';
      /** The first scaler backing off. */
      backend: string;
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
      /**
       * `reserve`: the pool ledger threw; `spawn`: the backend rejected;
       * `state`: the `stateStore` failed to record the agent (nothing was spawned).
       */
      stage: 'reserve' | 'spawn' | 'state';
      /** What was thrown. */
      error: unknown;
    };

/**
 * The state of one agent (see the state machine in docs/manager.md):
 * `spawning` → `idle` ⇄ `busy` → `draining` → `destroying` → `gone`.
 *
 * @example
 * ```ts
 * import type { AgentState, ScalerManager } from 'scaler-primitives/manager';
 * declare const manager: ScalerManager;
 * const busy = manager.listAgents().filter((a) => a.state === ('busy' satisfies AgentState));
 * ```
 */
export type AgentState = 'spawning' | 'idle' | 'busy' | 'draining' | 'destroying' | 'gone';

/**
 * A lifecycle or backend event about one agent. Manager events have `source: 'manager'`;
 * events a backend reports through `emit` have `source: 'backend'`.
 *
 * @example
 * ```ts
 * import {
 *   type BackendEntry,
 *   type ScalerConfigInput,
 *   type ScalerEvent,
 *   ScalerManager,
 * } from 'scaler-primitives/manager';
 * declare const config: ScalerConfigInput;
 * declare const backends: BackendEntry[];
 * const manager = new ScalerManager({
 *   config,
 *   backends,
 *   onEvent: (event: ScalerEvent) => console.log(`${event.scaler}/${event.agentId}: ${event.kind}`),
 * });
 * ```
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
   * when the ledger could not say which rows it removed), `job-taken` (another agent took
   * the job this one was spawning for: `data: { jobId, by }`); and, with an
   * empty `agentId`, `maintenance-failed`, `warm-pool-failed`, `shutdown-failed`,
   * `warm-pool-held` (`data` is a `WarmPoolHold`: why and until when) and
   * `warm-pool-resumed` (`data: { reason }`: the hold that ended), and
   * from `reconcile()`'s sweeps `swept`, `sweep-failed`, `sweeps-skipped`. For a backend: its own kind.
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

/**
 * The answer to `reload`.
 *
 * @example
 * ```ts
 * import type { ScalerManager, ValidationResult } from 'scaler-primitives/manager';
 * declare const manager: ScalerManager;
 * declare const text: string;
 * const result: ValidationResult = await manager.reload(JSON.parse(text));
 * if (!result.ok) for (const e of result.errors) console.error(`${e.path.join('.')}: ${e.message}`);
 * ```
 */
export interface ValidationResult {
  /** True when the new config was applied. */
  ok: boolean;
  /** Every problem found (empty when `ok`); nothing was changed when there is one. */
  errors: ConfigIssue[];
}

/**
 * What `reconcile` found.
 *
 * @example
 * ```ts
 * import type { ReconcileResult, ScalerManager } from 'scaler-primitives/manager';
 * declare const manager: ScalerManager;
 * const result: ReconcileResult = await manager.reconcile();
 * console.log(`released ${result.released.length}, untracked ${result.untracked.length}, failed ${result.failed.length}`);
 * ```
 */
export interface ReconcileResult {
  /** Tracked agents their backend no longer lists: released and forgotten. */
  released: string[];
  /** Agents a backend lists that this manager does not track (left alone). */
  untracked: UntrackedAgent[];
  /** Backends whose `list()` threw (their agents were left alone). */
  failed: ReconcileFailure[];
  /** What each of the `sweeps` option's sweeps did, in order (absent without `sweeps`). */
  sweeps?: SweepOutcome[];
}

/**
 * An agent a backend runs that the manager does not track.
 *
 * @example
 * ```ts
 * import type { ScalerManager, UntrackedAgent } from 'scaler-primitives/manager';
 * declare const manager: ScalerManager;
 * const { untracked } = await manager.reconcile();
 * for (const agent of untracked as UntrackedAgent[]) console.warn(`${agent.scaler} runs ${agent.agentId}, not ours`);
 * ```
 */
export interface UntrackedAgent {
  /** The scaler whose backend listed it (for a backend object serving several scalers, the first of them in config order). */
  scaler: string;
  /** The agent. */
  agentId: string;
}

/**
 * A backend whose `list()` threw during `reconcile`.
 *
 * @example
 * ```ts
 * import type { ReconcileFailure, ScalerManager } from 'scaler-primitives/manager';
 * declare const manager: ScalerManager;
 * const { failed } = await manager.reconcile();
 * for (const f of failed as ReconcileFailure[]) console.error(`list() of ${f.scaler} failed`, f.error);
 * ```
 */
export interface ReconcileFailure {
  /** The scaler. */
  scaler: string;
  /** What `list()` threw. */
  error: unknown;
}

/**
 * The answer to `onAgentRegistered` for an agent the manager spawned.
 *
 * @example
 * ```ts
 * import type { AgentRegistration, ScalerManager } from 'scaler-primitives/manager';
 * declare const manager: ScalerManager;
 * declare function dispatch(jobId: string, agentId: string): void;
 * const registration: AgentRegistration | null = manager.onAgentRegistered('agent-7f3a', ['linux']);
 * if (registration?.boundJobId) dispatch(registration.boundJobId, 'agent-7f3a');
 * ```
 */
export interface AgentRegistration {
  /**
   * The job the agent is bound to: the one it was spawned for or, when another
   * agent took that job meanwhile, the oldest job waiting on a spawn that it can
   * run (`rebound` is then true). Absent for a warm-pool agent, or when no
   * waiting job fits: the agent is idle.
   */
  boundJobId?: string;
  /** True when `boundJobId` is not the job the agent was spawned for (see `boundJobId`). */
  rebound?: boolean;
  /** Labels every job given to this agent must name (apply them to queue-drain dispatch too). */
  mandatoryLabels: string[];
}
