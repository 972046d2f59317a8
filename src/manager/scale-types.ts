/**
 * The answer to `requestScale`: a spawn, or why not (the limit that refused,
 * or why no scaler matched).
 */
import type { CapDimension } from '../caps/types.js';
import type { LimitRangeRule } from '../resources/limit-range.js';
import type { AgentResources } from './backend-types.js';

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
