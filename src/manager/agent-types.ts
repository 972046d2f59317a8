/**
 * One agent as the host sees it: its state, the events about it, and the
 * answer to its registration.
 */

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
   * `warm-pool-held` (`data` is a `WarmPoolHold`: why and until when),
   * `warm-pool-resumed` (`data: { reason }`: the hold that ended),
   * `lease-at-risk`, `lease-lost` and `lease-renewed` (the ledger lease;
   * `data: { lease, policy, agents }`, see `LeaseLostPolicy`), and
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
