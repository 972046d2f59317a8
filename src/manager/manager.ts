import type { ClaimRequest, ClaimResult } from './agents/dispatch.js';
import {
  type AgentFilter,
  type AgentSnapshot,
  listSnapshots,
  snapshotOf,
} from './agents/inventory.js';
import type { AgentRegistration } from './agents/lifecycle.js';
import { checkSweeps } from './agents/sweeps.js';
import { checkId } from './checks.js';
import type { ConfigValidation } from './config/check.js';
import type { ScalerConfigInput } from './config/config.js';
import type { ScalerManagerOptions } from './options.js';
import { ManagerParts } from './parts.js';
import { reconcileManager, shutdownManager, startManager } from './running.js';
import { requestScale } from './scale.js';
import type { RecoveryResult } from './state/recovery.js';
import type {
  ReconcileResult,
  ReconcileSweep,
  ScaleRequest,
  ScaleResult,
  ScalerStatus,
  ShutdownResult,
} from './types.js';

/**
 * Decides whether a waiting job may get a new agent, where, and with what
 * resources; reserves that capacity in every scope (scaler and orchestrator
 * caps, then the machine pool through the ledger) or in none; and runs every
 * agent through one state machine (spawning → idle ⇄ busy → draining →
 * destroying → gone), so the manager never destroys a busy agent.
 *
 * The host brings its dispatcher and its backends. The dispatcher calls
 * {@link ScalerManager.requestScale} when a job finds no agent, and tells the
 * manager about agents registering, taking jobs, finishing and going away.
 *
 * @example
 * ```ts
 * import { type ScalerBackend, ScalerManager } from 'scaler-primitives/manager';
 *
 * declare const myContainerBackend: ScalerBackend; // your backend
 * declare const agentId: string; // from the dispatcher
 * declare const labels: string[];
 * const manager = new ScalerManager({
 *   config: {
 *     globalMaxAgents: 10,
 *     scalers: [{ name: 'small', type: 'container', maxAgents: 4, labelSets: [{ labels: ['linux'] }] }],
 *   },
 *   backends: [{ name: 'small', backend: myContainerBackend }],
 * });
 * manager.start();
 * const result = await manager.requestScale({ jobId: 'job-1', labels: ['linux'] });
 * if (result.kind === 'spawned') console.log(`starting ${result.agentId} on ${result.scaler}`);
 * // later, from the dispatcher:
 * manager.onAgentRegistered(agentId, labels); // -> { boundJobId: 'job-1', mandatoryLabels: [] }
 * manager.onAgentDisconnected(agentId); // releases everything it held
 * await manager.shutdownAll({ drain: true, timeoutMs: 60_000 });
 * ```
 */
export class ScalerManager {
  readonly #parts: ManagerParts;
  readonly #sweeps: ReadonlyMap<string, ReconcileSweep> | undefined;

  /**
   * @param options - Config, backends, callbacks and the ledger; see {@link ScalerManagerOptions}.
   * @throws {@link ConfigError} when the config is invalid, a scaler has no backend,
   *   or a scaler names a machine pool that no entry of `ledgers` serves.
   * @throws TypeError for malformed options (duplicate backend names, bad timings).
   */
  constructor(options: ScalerManagerOptions) {
    this.#parts = new ManagerParts(options);
    this.#sweeps = checkSweeps(options.sweeps);
  }

  /**
   * Decide whether a waiting job gets a new agent and, if so, reserve its
   * capacity and ask the backend to spawn it; every reservation is released
   * again when a later step refuses or fails. Scalers are tried in config
   * order, with the first label set of each that fits; a scaler that is full,
   * paced or backing off is skipped for the next one that matches.
   *
   * @param request - `{ jobId, labels, excludeLabels?, resources? }`; see {@link ScaleRequest}.
   * @returns A {@link ScaleResult}, discriminated by `kind`. Never rejects for a
   *   backend or ledger failure (that is `spawn-failed`).
   * @throws `InvalidInputError` for an unknown key in `resources` (a typo, or
   *   the flat `{ cpus, memory }` form) or an id or label over its length limit.
   * @throws `ResourceParseError` or `ResourceConflictError` when the
   *   job's resources (with the layered defaults) are invalid.
   * @throws TypeError for an unknown field or malformed values.
   */
  async requestScale(request: ScaleRequest): Promise<ScaleResult> {
    return requestScale(this.#parts, request);
  }

  /**
   * An agent registered with the dispatcher. An agent this manager spawned stops
   * counting as spawning, its scaler's spawn backoff resets, and the answer says
   * which job it is bound to and which mandatory labels every job it takes must
   * name (see {@link ScalerManager.canRunJob}). When another agent took its job
   * meanwhile, it is bound to the oldest waiting job it can run (`rebound: true`)
   * or to none; a draining agent is bound to none. Idempotent.
   *
   * @param agentId - The registering agent.
   * @param labels - The labels it registered with (passed on in the `registered` event).
   * @returns `{ boundJobId?, mandatoryLabels }`, or `null` for an agent this
   *   manager did not spawn (a static agent).
   */
  onAgentRegistered(agentId: string, labels: readonly string[] = []): AgentRegistration | null {
    return this.#parts.lifecycle.registered(agentId, labels);
  }

  /**
   * True when a job with `jobLabels` may be dispatched to `agentId`: the agent is
   * not one of ours (no gate), or it takes jobs (not draining, not being
   * destroyed, not destroyed by this manager) and the job names every mandatory
   * label of its scaler and every label it asks for is in its label set.
   *
   * @param agentId - The agent.
   * @param jobLabels - The job's labels.
   */
  canRunJob(agentId: string, jobLabels: readonly string[]): boolean {
    return this.#parts.lifecycle.canRunJob(agentId, jobLabels);
  }

  /**
   * The dispatcher gave `jobId` (of `runId`) to `agentId`: the agent becomes busy,
   * and the events buffered for it are relayed to `onScalerEvent` (after an
   * `events-dropped` event when the buffer overflowed). An agent whose destroy has
   * begun takes no job: the call only emits `job-refused`.
   *
   * @param agentId - The agent.
   * @param runId - The run.
   * @param jobId - The job.
   */
  correlateAgentToJob(agentId: string, runId: string, jobId: string): void {
    this.#parts.lifecycle.correlate(agentId, runId, jobId);
  }

  /**
   * A job on `agentId` finished. The agent is idle again, unless it is draining
   * or reached `maxJobsPerAgent` or `maxAgentLifetimeSeconds`, or its scaler is
   * above `maxAgents` or retiring: then it is destroyed.
   *
   * @param agentId - The agent.
   */
  onJobComplete(agentId: string): void {
    this.#parts.lifecycle.jobComplete(agentId);
  }

  /**
   * An agent went away. Everything it held (scaler, orchestrator and pool
   * reservations) is released. Idempotent.
   *
   * @param agentId - The agent.
   * @returns Resolves once the pool row (if any) is released; never rejects
   *   (a ledger failure is reported as a `release-failed` event, and the
   *   release is tried again at the next `reconcile()` and when the ledger
   *   lease is renewed).
   */
  onAgentDisconnected(agentId: string): Promise<void> {
    return this.#parts.lifecycle.disconnected(agentId);
  }

  /**
   * An agent confirmed it received its configuration: the `onConfigAck` of the
   * backend that runs it is called (e.g. to clear a microVM's MMDS data), then
   * the `onConfigAck` option. Neither waits for the other; a hook that throws or
   * rejects is reported as a `config-ack-failed` event (`data.hook`: `backend`
   * or `option`) and does not keep the other from running. Unknown agents are
   * ignored.
   *
   * @param agentId - The agent.
   */
  onConfigAck(agentId: string): void {
    this.#parts.lifecycle.configAcked(agentId);
  }

  /**
   * Drain one agent: it takes no new job (`canRunJob` is false, registration binds
   * nothing) and is destroyed when its current job completes; an idle or spawning
   * one is destroyed at once. Idempotent.
   *
   * @param agentId - The agent.
   * @returns Resolves when the agent is gone and the release of its pool rows has settled
   *   (a failed release is reported as a `release-failed` event and retried), at once for an
   *   agent not tracked.
   */
  drain(agentId: string): Promise<void> {
    return this.#parts.lifecycle.drain(agentId);
  }

  /**
   * Drain every agent a scaler runs now (see {@link ScalerManager.drain}). New
   * requests may still spawn fresh agents (a rolling replacement); to stop a
   * scaler, remove it or set its `maxAgents` to 0 with `reload`.
   *
   * @param name - The scaler.
   * @returns Resolves when every agent it ran at the call is gone and its pool rows released.
   * @throws TypeError for an unknown scaler.
   */
  drainScaler(name: string): Promise<void> {
    return this.#parts.lifecycle.drainScaler(name);
  }

  /**
   * A frozen snapshot of every agent this manager tracks (spawning, idle, busy,
   * draining, destroying), in the order they were spawned.
   *
   * @param filter - `{ scaler?, state?, labels? }`; each narrows (see {@link AgentFilter}).
   * @throws TypeError for an unknown filter key or a bad value.
   */
  listAgents(filter?: AgentFilter): AgentSnapshot[] {
    return listSnapshots(this.#parts.core.book, filter);
  }

  /**
   * A frozen snapshot of one agent, or `undefined` for an agent this manager
   * does not track (never spawned here, or gone).
   *
   * @param agentId - The agent.
   */
  getAgent(agentId: string): AgentSnapshot | undefined {
    checkId('agentId', agentId);
    const record = this.#parts.core.book.get(agentId);
    return record === undefined ? undefined : snapshotOf(record);
  }

  /**
   * Pick an idle agent that can run `job` (the {@link ScalerManager.canRunJob}
   * rule, and its resources when the job declares some) and bind it to the job,
   * in one synchronous step: two claims never get the same agent. On `claimed`
   * the agent is busy with the job (do not call `correlateAgentToJob`); an agent
   * still spawning for that job loses it. Scalers are tried in config order;
   * within one, the agent idle longest first.
   *
   * @param job - `{ jobId, labels, runId?, excludeLabels?, resources? }`; see {@link ClaimRequest}.
   * @returns A {@link ClaimResult}, discriminated by `kind`.
   * @throws TypeError for an unknown field or malformed values; `InvalidInputError`
   *   for an id or label over its length limit; `ResourceParseError` or
   *   `ResourceConflictError` for invalid job resources.
   */
  claimIdleAgent(job: ClaimRequest): ClaimResult {
    return this.#parts.dispatch.claim(job);
  }

  /**
   * Run unattended: {@link ScalerManager.maintain} every `maintenanceIntervalMs`
   * and, with `reconcileIntervalMs`, {@link ScalerManager.reconcile}; each
   * timer is re-armed only after its pass ended (never overlapping), with up to
   * 10% jitter, unref'd. Also starts the ledger's reaper. Idempotent.
   */
  start(): void {
    startManager(this.#parts, this);
  }

  /**
   * Recover the books a `stateStore` holds (what `start()` runs first). Each
   * stored agent is checked against its backend's `list()`: one that still runs
   * is tracked again in its stored state, with its job binding and its pool row
   * taken over (`PoolLedger.adopt`); one that no longer runs is forgotten and its
   * row released; one whose row is gone is reserved again where it fits, else
   * handled by `policies.leaseLost` / `policies.reservationLost`. Agents no record names
   * are left or destroyed (`policies.unrecordedAgents`). `requestScale` calls wait
   * for it. Runs once; later calls return the first run's result.
   *
   * A ledger with `openLease()` (`MachineLedger`) makes its lease first: a
   * restart within the lease of a dead predecessor with the same `instanceId`
   * continues that lease, so the recovered agents' fences stay satisfied.
   *
   * @returns What was recovered, released, and found unrecorded.
   * @throws StateStoreError when the store cannot be read (it is left as it is).
   * @throws LedgerInstanceInUseError when another live process holds this
   *   instance id's lease: nothing was revived, adopted or destroyed.
   */
  recoverState(): Promise<RecoveryResult> {
    return this.#parts.recover();
  }

  /** Stop the timers `start()` armed (a pass in flight finishes). The ledger's reaper keeps running. */
  stop(): void {
    this.#parts.timers.stop();
  }

  /**
   * One maintenance pass (what `start()` runs every `maintenanceIntervalMs`):
   *
   * 1. prune spawns that did not register within `registrationTimeoutMs`
   *    (`pruned` event, destroy, then release; counts as a spawn failure);
   * 2. retry destroys that failed;
   * 3. drain agents past `maxAgentLifetimeSeconds`;
   * 4. destroy idle agents past the idle timeout, except those the warm pool's
   *    target keeps; destroy idle agents above a lowered `maxAgents` (or of a
   *    removed scaler) and drain busy ones;
   * 5. replenish warm pools up to their target, unless jobs were refused for
   *    capacity within `demandHoldMs`.
   *
   * Never rejects: failures become events. Concurrent calls share one pass.
   */
  maintain(): Promise<void> {
    return this.#parts.maintenance.run();
  }

  /**
   * Compare the agents this manager tracks with each backend's `list()` and
   * release the ones that are gone (spawns and destroys in flight are left
   * alone); write back pool rows of ours that vanished, when they fit (else
   * `policies.reservationLost`); then, when every backend could be listed, run the
   * `sweeps` (e.g. `sweepAgentCaps`, `sweepIsolation`) with the agents alive.
   *
   * @returns What was released, what runs untracked, which backends failed to
   *   list, and what each sweep removed.
   */
  async reconcile(): Promise<ReconcileResult> {
    return reconcileManager(this.#parts, this.#sweeps);
  }

  /**
   * Stop timers, stop every agent and release every reservation; new
   * `requestScale` calls answer `shutting-down`, and no spawn starts after the
   * call. Spawns in flight are waited for and their agents destroyed; a spawn
   * still unanswered after `timeoutMs` is aborted (`SpawnRequest.signal`). No
   * pool row is released while its agent may still run: what could not be
   * confirmed stopped is listed in the result with its rows kept, and is
   * destroyed and released as soon as its spawn or destroy answers. With
   * `drain`, busy agents finish their job first (up to `timeoutMs`). Stops the
   * ledger's reaper if `start()` started it (the ledger belongs to the host).
   * Idempotent (later calls share the first run's result); never rejects
   * (failures become events).
   *
   * @param options - `drain`: let busy agents finish their job first (default false);
   *   `timeoutMs`: the longest wait of each stage (draining, spawns in flight, destroys; default 300000).
   * @returns The agents it could not confirm stopped (`unconfirmed`, empty when all stopped).
   */
  shutdownAll(
    options: {
      /**
       * Drain first: idle and spawning agents are destroyed at once, busy ones when
       * their job completes, up to `timeoutMs`; what is left is then destroyed.
       * @default false
       */
      drain?: boolean;
      /**
       * The longest wait of each stage: draining agents; spawns in flight (a spawn
       * still unanswered then is aborted through its request's `signal` and given
       * up to 5 s more); destroys and backend `shutdown()` calls; the ledger
       * releases and the state store's flush at the end. What is still
       * unanswered is listed in {@link ShutdownResult.unconfirmed} with its pool
       * rows kept, and destroyed and released as soon as it answers.
       * @default 300000
       */
      timeoutMs?: number;
    } = {},
  ): Promise<ShutdownResult> {
    return shutdownManager(this.#parts, options);
  }

  /**
   * Validate and apply a new config without disturbing busy agents: a lowered cap
   * refuses new work until usage falls below it; agents above a lowered
   * `maxAgents` or of a removed scaler are destroyed when idle and drained when
   * busy; new machine pools are registered with the ledger. When anything is
   * wrong nothing changes.
   *
   * @param config - The new configuration.
   * @returns `{ ok: true, config, errors: [] }` with the config now applied (read
   *   it, do not change it), or `{ ok: false, errors }` with every problem's path.
   */
  async reload(config: ScalerConfigInput): Promise<ConfigValidation> {
    return this.#parts.reload(config);
  }

  /** A point-in-time summary: counts, usage and caps per scaler and overall, pools, counters. */
  getStatus(): ScalerStatus {
    return this.#parts.status();
  }
}
