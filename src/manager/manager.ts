import { randomBytes } from 'node:crypto';
import { CapTracker } from '../caps/cap-tracker.js';
import { type Clock, type ClockTimer, resolveClock } from '../clock.js';
import {
  BackendError,
  type ConfigIssue,
  isLedgerLeaseExpiredError,
  type LedgerLeaseExpiredError,
} from '../errors.js';
import type { PoolLedger } from '../ledger/types.js';
import { coresToMillicores } from '../resources/quantity.js';
import { resolveResources } from '../resources/resolve.js';
import type { ResourceAmount, ResourceRequest } from '../resources/types.js';
import { checkLabels, exceeds, nonNegative, positive } from './checks.js';
import {
  configError,
  type ScalerConfig,
  type ScalerConfigInput,
  type ScalerEntryConfig,
  validateScalerConfig,
} from './config.js';
import { type AgentMailbox, EventRelay, newMailbox } from './events.js';
import {
  automaticLabels,
  type CompiledLabelSet,
  explainMatch,
  passesMandatoryGate,
} from './labels.js';
import type {
  AgentRegistration,
  AgentResources,
  AgentState,
  BackendEventInput,
  BackendStatus,
  CapacityLimit,
  NoMatchReason,
  ReconcileResult,
  ScaleResult,
  ScalerBackend,
  ScalerCounters,
  ScalerEvent,
  ScalerStatus,
  SpawnRequest,
  ValidationResult,
} from './types.js';

/** One backend the host provides, under the scaler name it serves. */
export interface BackendEntry {
  /** The scaler name in config (`scalers[].name`). */
  name: string;
  /** The host's implementation. */
  backend: ScalerBackend;
  /**
   * Platform labels the manager adds to every label set of this scaler (e.g.
   * `kici:os:linux`, `kici:arch:amd64`). Each must start with the config's
   * `autoLabelPrefix`.
   */
  platformLabels?: string[];
}

/** Options of the {@link ScalerManager} constructor. */
export interface ScalerManagerOptions {
  /** The scaler configuration (validated with `scalerConfigSchema`). */
  config: ScalerConfigInput;
  /** One backend per scaler name (more are allowed, for scalers a later `reload` adds). */
  backends: BackendEntry[];
  /**
   * Receives the events of agents correlated with a job (`correlateAgentToJob`),
   * including the events buffered before the correlation.
   */
  onScalerEvent?: (runId: string, jobId: string, event: ScalerEvent) => void;
  /** Receives every event as it happens, correlated or not: the hook for logs and metrics. */
  onEvent?: (event: ScalerEvent) => void;
  /**
   * The cross-process ledger for `machinePools` (a `MachineLedger`, the NATS
   * ledger, or anything implementing `PoolLedger`). Required when a scaler names a pool.
   */
  ledger?: PoolLedger;
  /**
   * A spawned agent that has not registered after this long is pruned: its
   * reservations are released and the backend is asked to destroy it.
   * @default 300000 (5 minutes)
   */
  registrationTimeoutMs?: number;
  /**
   * How often `start()` runs {@link ScalerManager.maintain} (prune, idle timeouts, warm pool).
   * @default 5000
   */
  maintenanceIntervalMs?: number;
  /**
   * After a job was refused for capacity, the warm pool does not replenish the
   * scalers involved for this long, so capacity freed by finished agents goes to
   * waiting jobs first.
   * @default 10000
   */
  demandHoldMs?: number;
  /**
   * Events kept per agent while it is not yet correlated with a job; older ones
   * are dropped and an `events-dropped` event says how many.
   * @default 100
   */
  maxBufferedEvents?: number;
  /**
   * The clock every timing rule runs on (maintenance timer, registration
   * timeout, warm pool, demand hold).
   * @default {@link systemClock}
   */
  clock?: Clock;
  /** Shorthand for a `clock` that only replaces `now()` (epoch milliseconds). Ignored when `clock` is given. @default `Date.now` */
  now?: () => number;
  /** Make an agent id for a scaler. Must be unique. @default `<scaler>-<12 hex digits>` */
  generateAgentId?: (scaler: string) => string;
}

interface LabelSetState extends CompiledLabelSet {
  resources: ResourceRequest | undefined;
}

interface ScalerState {
  name: string;
  scope: string;
  config: ScalerEntryConfig;
  backend: ScalerBackend;
  platformLabels: string[];
  labelSets: LabelSetState[];
  agents: Set<string>;
  retiring: boolean;
  jobSpawnsInFlight: number;
  lastDemandAt: number;
}

interface AgentRecord {
  agentId: string;
  scaler: ScalerState;
  jobId: string | undefined;
  warm: boolean;
  state: AgentState;
  labels: string[];
  resources: AgentResources;
  pool: string | undefined;
  spawnedAt: number;
  spawnSettled: boolean;
  idleSince: number;
  destroying: boolean;
  context: Record<string, unknown> | undefined;
  mailbox: AgentMailbox;
  /** Set when the agent itself went away (it registered, maybe ran, and disconnected). */
  disconnected: boolean;
}

interface Candidate {
  scaler: ScalerState;
  labelSet: LabelSetState;
}

interface MatchOutcome {
  candidates: Candidate[];
  reasons: NoMatchReason[];
}

const GLOBAL_SCOPE = 'global';
const MATCH_CACHE_LIMIT = 4096;

/**
 * Decides whether a waiting job may get a new agent, where, and with what
 * resources; reserves that capacity everywhere it must (scaler and orchestrator
 * caps in memory, then the machine pool through the ledger) or nowhere; and
 * keeps its books straight through spawn failures, agents that never register,
 * crashes of the host's backends and config reloads.
 *
 * The host brings its dispatcher and its backends. The dispatcher calls
 * {@link ScalerManager.requestScale} when a job finds no agent, and tells the
 * manager about agents registering, taking jobs, finishing and going away.
 *
 * @example
 * ```ts
 * const manager = new ScalerManager({
 *   config: {
 *     globalMaxAgents: 10,
 *     scalers: [{ name: 'small', type: 'container', maxAgents: 4, labelSets: [{ labels: ['linux'] }] }],
 *   },
 *   backends: [{ name: 'small', backend: myContainerBackend }],
 * });
 * manager.start();
 * const result = await manager.requestScale(['linux'], 'job-1');
 * if (result.kind === 'spawned') console.log(`starting ${result.agentId} on ${result.backend}`);
 * // later, from the dispatcher:
 * manager.onAgentRegistered(agentId, labels); // -> { boundJobId: 'job-1', mandatoryLabels: [] }
 * manager.onAgentDisconnected(agentId); // releases everything it held
 * await manager.shutdownAll();
 * ```
 */
export class ScalerManager {
  #config: ScalerConfig;
  readonly #backends = new Map<string, BackendEntry>();
  readonly #scalers = new Map<string, ScalerState>();
  /** Scalers in config order (retiring ones last), for matching. */
  #order: ScalerState[] = [];
  readonly #agents = new Map<string, AgentRecord>();
  readonly #spawningByJob = new Map<string, string>();
  readonly #caps = new CapTracker();
  readonly #ledger: PoolLedger | undefined;
  readonly #events: EventRelay;
  readonly #now: () => number;
  readonly #generateAgentId: (scaler: string) => string;
  readonly #registrationTimeoutMs: number;
  readonly #maintenanceIntervalMs: number;
  readonly #demandHoldMs: number;
  readonly #matchCache = new Map<string, MatchOutcome>();
  readonly #poolReleases = new Set<Promise<void>>();
  #globalDemandAt = Number.NEGATIVE_INFINITY;
  #timer: ClockTimer | undefined;
  readonly #clock: Clock;
  #maintaining: Promise<void> | undefined;
  #ledgerStarted = false;
  #shutDown = false;
  readonly #counters: ScalerCounters = {
    coldStarts: 0,
    warmHits: 0,
    warmSpawns: 0,
    spawnFailures: 0,
    pruned: 0,
    idleDestroyed: 0,
    reconciled: 0,
  };

  /**
   * @param options - Config, backends, callbacks and the ledger; see {@link ScalerManagerOptions}.
   * @throws {@link ConfigError} when the config is invalid, a scaler has no backend,
   *   or a scaler names a machine pool and no `ledger` was given.
   * @throws TypeError for malformed options (duplicate backend names, bad timings).
   */
  constructor(options: ScalerManagerOptions) {
    if (typeof options !== 'object' || options === null) {
      throw new TypeError(`Expected \`options\` to be an object, got \`${String(options)}\``);
    }
    if (!Array.isArray(options.backends)) {
      throw new TypeError(
        `Expected \`backends\` to be an array of { name, backend }, got \`${typeof options.backends}\``,
      );
    }
    for (const entry of options.backends) {
      if (typeof entry?.name !== 'string' || typeof entry.backend?.spawn !== 'function') {
        throw new TypeError(
          `Expected each backend entry to be { name: string, backend: { spawn, destroy } }, got \`${String(entry?.name)}\``,
        );
      }
      if (this.#backends.has(entry.name)) {
        throw new TypeError(`Expected backend names to be unique, got \`${entry.name}\` twice`);
      }
      this.#backends.set(entry.name, entry);
    }
    this.#ledger = options.ledger;
    this.#clock = resolveClock(options.clock, options.now);
    this.#now = () => this.#clock.now();
    this.#generateAgentId = options.generateAgentId ?? defaultAgentId;
    this.#registrationTimeoutMs = positive(
      'registrationTimeoutMs',
      options.registrationTimeoutMs,
      300_000,
    );
    this.#maintenanceIntervalMs = positive(
      'maintenanceIntervalMs',
      options.maintenanceIntervalMs,
      5000,
    );
    this.#demandHoldMs = nonNegative('demandHoldMs', options.demandHoldMs, 10_000);
    this.#events = new EventRelay(
      options.onEvent,
      options.onScalerEvent,
      nonNegative('maxBufferedEvents', options.maxBufferedEvents, 100),
    );

    const checked = this.#check(options.config);
    if (!checked.ok) throw configError(checked.errors);
    this.#config = checked.config;
    this.#apply(checked.config);
  }

  // ---------------------------------------------------------------- requestScale

  /**
   * Decide whether a waiting job gets a new agent and, if so, reserve its
   * capacity (scaler and orchestrator caps, then the machine pool) and ask the
   * backend to spawn it. Every reservation is released again when a later step
   * refuses or fails.
   *
   * Scalers are tried in config order; the first label set of a scaler that fits
   * is used; a scaler that is full is skipped for the next one that matches.
   *
   * @param labels - The labels the job asks for (automatic labels such as
   *   `kici:scaler:<name>` may be named to pin a scaler).
   * @param jobId - The job; one spawn per job is in flight at a time.
   * @param excludeLabels - Label sets holding any of these are not used.
   * @param resources - The job's own resource declaration (highest layer of defaults).
   * @returns A {@link ScaleResult}, discriminated by `kind`. Never rejects for a
   *   backend or ledger failure (that is `spawn-failed`).
   * @throws `ResourceParseError` or `ResourceConflictError` when the
   *   job's resources (with the layered defaults) are invalid.
   * @throws TypeError for malformed arguments.
   */
  async requestScale(
    labels: readonly string[],
    jobId: string,
    excludeLabels: readonly string[] = [],
    resources?: ResourceRequest,
  ): Promise<ScaleResult> {
    checkLabels('labels', labels);
    checkLabels('excludeLabels', excludeLabels);
    if (typeof jobId !== 'string' || jobId === '') {
      throw new TypeError(`Expected \`jobId\` to be a non-empty string, got \`${String(jobId)}\``);
    }
    const inFlight = this.#spawningByJob.get(jobId);
    if (inFlight !== undefined) {
      const record = this.#agents.get(inFlight)!;
      return { kind: 'already-spawning', backend: record.scaler.name, agentId: inFlight };
    }
    const { candidates, reasons } = this.#match(labels, excludeLabels);
    if (candidates.length === 0) return { kind: 'no-match', reasons };

    const refusals: CapacityLimit[] = [];
    for (const { scaler, labelSet } of candidates) {
      const resolved = this.#resolve(scaler, labelSet, resources);
      const outcome = await this.#attempt(scaler, labelSet, resolved, jobId);
      if ('kind' in outcome) return outcome;
      refusals.push(outcome);
    }
    const waiting = refusals.find((r) => !r.neverFits);
    if (waiting === undefined) {
      return {
        kind: 'never-fits',
        backend: candidates[0]!.scaler.name,
        limit: refusals[0]!,
        refusals,
      };
    }
    const now = this.#now();
    for (const refusal of refusals) {
      if (refusal.neverFits) continue;
      if (refusal.limit === 'global-max-agents' || refusal.limit === 'global-cap') {
        this.#globalDemandAt = now;
      }
      const state = this.#scalers.get(refusal.scaler);
      if (state) state.lastDemandAt = now;
    }
    return { kind: 'at-capacity', backend: candidates[0]!.scaler.name, limit: waiting, refusals };
  }

  /**
   * Reserve in memory, then in the pool, then spawn. Returns a result, or the
   * limit that refused (the caller tries the next candidate).
   */
  async #attempt(
    scaler: ScalerState,
    labelSet: LabelSetState,
    resources: AgentResources,
    jobId: string | undefined,
  ): Promise<ScaleResult | CapacityLimit> {
    const requests = resources.requests;
    const never = this.#neverFits(scaler, requests);
    if (never) return never;
    const agentId = this.#newAgentId(scaler.name);
    const refusal = this.#reserveInMemory(agentId, scaler, requests);
    if (refusal) return refusal;

    // Tracked from here on: counts toward every max, visible to already-spawning.
    const record: AgentRecord = {
      agentId,
      scaler,
      jobId,
      warm: jobId === undefined,
      state: 'spawning',
      labels: labelSet.labels,
      resources,
      pool: scaler.config.machinePool,
      spawnedAt: this.#now(),
      spawnSettled: false,
      idleSince: 0,
      destroying: false,
      context: undefined,
      mailbox: newMailbox(),
      disconnected: false,
    };
    this.#agents.set(agentId, record);
    scaler.agents.add(agentId);
    if (jobId !== undefined) {
      this.#spawningByJob.set(jobId, agentId);
      scaler.jobSpawnsInFlight++;
    }
    try {
      if (record.pool !== undefined) {
        let granted: Awaited<ReturnType<PoolLedger['reserve']>>;
        try {
          granted = await this.#ledger!.reserve(
            record.pool,
            agentId,
            requests.cpus,
            requests.memBytes,
          );
        } catch (error) {
          // A store that failed mid-write may hold the row: releasing is idempotent.
          this.#rollback(record);
          void this.#releasePool(record);
          if (isLedgerLeaseExpiredError(error)) this.#reservationsLost(record.pool, agentId, error);
          this.#counters.spawnFailures++;
          this.#emitFor(record, 'spawn-failed', `Reserving in pool "${record.pool}" failed`, {
            stage: 'reserve',
            error,
          });
          return { kind: 'spawn-failed', backend: scaler.name, agentId, stage: 'reserve', error };
        }
        if (!granted.ok) {
          this.#rollback(record);
          return {
            limit: 'pool-cap',
            scaler: scaler.name,
            pool: granted.pool,
            dimension: granted.dimension,
            requested: granted.requested,
            used: granted.used,
            max: granted.max,
            neverFits: granted.neverFits,
          };
        }
        if (!this.#agents.has(agentId)) {
          // Pruned or shut down while the ledger answered: give the row back.
          this.#releasePool(record);
          return this.#lostWhileSpawning(record, 'reserve');
        }
      }

      this.#emitFor(record, 'spawning', `Spawning ${agentId} on ${scaler.name}`, {
        jobId,
        warm: record.warm,
      });
      const request: SpawnRequest = {
        agentId,
        scaler: scaler.name,
        warm: record.warm,
        labels: [...labelSet.labels],
        labelSetIndex: labelSet.index,
        mandatoryLabels: [...scaler.config.mandatoryLabels],
        resources: {
          requests: { ...resources.requests },
          limits: { ...resources.limits },
        },
        emit: (event) => this.#backendEvent(agentId, scaler.name, event),
      };
      if (jobId !== undefined) request.jobId = jobId;
      let result: Awaited<ReturnType<ScalerBackend['spawn']>>;
      try {
        result = await scaler.backend.spawn(request);
      } catch (error) {
        if (this.#agents.get(agentId) === record) {
          this.#forget(record);
          this.#counters.spawnFailures++;
          this.#emitFor(
            record,
            'spawn-failed',
            `Backend ${scaler.name} failed to spawn ${agentId}`,
            {
              stage: 'spawn',
              error,
            },
          );
        }
        return { kind: 'spawn-failed', backend: scaler.name, agentId, stage: 'spawn', error };
      }
      record.spawnSettled = true;
      if (this.#agents.get(agentId) !== record && !record.disconnected) {
        // Pruned (or shut down) before the backend answered: it must not live on.
        this.#destroyQuietly(record);
        return this.#lostWhileSpawning(record, 'spawn');
      }
      // (A fast agent may even have registered, run and disconnected by now: still a spawn.)
      if (result && typeof result === 'object' && result.context) record.context = result.context;
      if (record.warm) this.#counters.warmSpawns++;
      else this.#counters.coldStarts++;
      this.#emitFor(record, 'spawned', `Backend ${scaler.name} is starting ${agentId}`);
      return {
        kind: 'spawned',
        backend: scaler.name,
        agentId,
        labels: [...labelSet.labels],
        resources: { requests: { ...resources.requests }, limits: { ...resources.limits } },
      };
    } finally {
      if (jobId !== undefined) scaler.jobSpawnsInFlight--;
    }
  }

  #lostWhileSpawning(record: AgentRecord, stage: 'reserve' | 'spawn'): ScaleResult {
    return {
      kind: 'spawn-failed',
      backend: record.scaler.name,
      agentId: record.agentId,
      stage,
      error: new BackendError(
        record.scaler.name,
        `Agent ${record.agentId} was pruned or shut down before its spawn finished; it was destroyed and its reservations released.`,
      ),
    };
  }

  #neverFits(scaler: ScalerState, requests: ResourceAmount): CapacityLimit | undefined {
    const global = exceeds(this.#config.resourceCap, requests);
    if (global) return { limit: 'global-cap', scaler: scaler.name, ...global, neverFits: true };
    const own = exceeds(scaler.config.resourceCap, requests);
    if (own) return { limit: 'scaler-cap', scaler: scaler.name, ...own, neverFits: true };
    const pool = scaler.config.machinePool;
    if (pool !== undefined) {
      const hit = exceeds(this.#config.machinePools[pool], requests);
      if (hit) return { limit: 'pool-cap', scaler: scaler.name, pool, ...hit, neverFits: true };
    }
    return undefined;
  }

  #reserveInMemory(
    agentId: string,
    scaler: ScalerState,
    requests: ResourceAmount,
  ): CapacityLimit | undefined {
    const globalMax = this.#config.globalMaxAgents;
    if (this.#agents.size >= globalMax) {
      return {
        limit: 'global-max-agents',
        scaler: scaler.name,
        used: this.#agents.size,
        max: globalMax,
        neverFits: false,
      };
    }
    if (scaler.agents.size >= scaler.config.maxAgents) {
      return {
        limit: 'scaler-max-agents',
        scaler: scaler.name,
        used: scaler.agents.size,
        max: scaler.config.maxAgents,
        neverFits: false,
      };
    }
    const granted = this.#caps.tryReserve(agentId, [GLOBAL_SCOPE, scaler.scope], requests);
    if (granted.ok) return undefined;
    return {
      limit: granted.scope === GLOBAL_SCOPE ? 'global-cap' : 'scaler-cap',
      scaler: scaler.name,
      dimension: granted.dimension,
      requested: granted.requested,
      used: granted.used,
      max: granted.max,
      neverFits: granted.neverFits,
    };
  }

  #resolve(
    scaler: ScalerState,
    labelSet: LabelSetState,
    job: ResourceRequest | undefined,
  ): AgentResources {
    const { requests, limits } = resolveResources([
      job,
      labelSet.resources,
      scaler.config.defaults?.resources,
      this.#config.defaults?.resources,
    ]);
    return { requests, limits };
  }

  #match(labels: readonly string[], exclude: readonly string[]): MatchOutcome {
    // JSON keeps ['a,b'] and ['a', 'b'] apart: job labels are not restricted.
    const key = JSON.stringify([labels, exclude]);
    const cached = this.#matchCache.get(key);
    if (cached) return cached;
    const jobSet = new Set(labels);
    const candidates: Candidate[] = [];
    const reasons: NoMatchReason[] = [];
    for (const scaler of this.#order) {
      if (scaler.retiring) {
        reasons.push({ scaler: scaler.name, reason: 'retired' });
        continue;
      }
      const found = explainMatch(
        scaler.name,
        scaler.labelSets,
        scaler.config.mandatoryLabels,
        labels,
        jobSet,
        exclude,
      );
      if ('reason' in found) reasons.push(found);
      else candidates.push({ scaler, labelSet: found as LabelSetState });
    }
    const outcome = { candidates, reasons };
    if (this.#matchCache.size >= MATCH_CACHE_LIMIT) this.#matchCache.clear();
    this.#matchCache.set(key, outcome);
    return outcome;
  }

  #newAgentId(scaler: string): string {
    for (let i = 0; i < 5; i++) {
      const id = this.#generateAgentId(scaler);
      if (typeof id !== 'string' || id === '') {
        throw new TypeError(
          `Expected \`generateAgentId\` to return a non-empty string, got \`${String(id)}\``,
        );
      }
      if (!this.#agents.has(id)) return id;
    }
    throw new TypeError('Expected `generateAgentId` to return unique ids, got repeats');
  }

  // ---------------------------------------------------------------- lifecycle

  /**
   * An agent registered with the dispatcher. For an agent this manager spawned,
   * it stops counting as spawning (and can no longer be pruned) and the answer
   * says which job it was started for and which mandatory labels every job it
   * takes must name (apply them to queue-drain dispatch too; see
   * {@link ScalerManager.canRunJob}).
   *
   * @param agentId - The registering agent.
   * @param labels - The labels it registered with (passed on in the `registered` event).
   * @returns `{ boundJobId?, mandatoryLabels }`, or `null` for an agent this
   *   manager did not spawn (a static agent).
   */
  onAgentRegistered(agentId: string, labels: readonly string[] = []): AgentRegistration | null {
    const record = this.#agents.get(agentId);
    if (record === undefined) return null;
    if (record.state === 'spawning') {
      if (this.#spawningByJob.get(record.jobId ?? '') === agentId) {
        this.#spawningByJob.delete(record.jobId!);
      }
      const now = this.#now();
      if (record.jobId !== undefined) {
        record.state = 'busy';
      } else {
        record.state = 'idle';
        record.idleSince = now;
      }
      this.#emitFor(record, 'registered', `${agentId} registered`, { labels: [...labels] });
    }
    const answer: AgentRegistration = {
      mandatoryLabels: [...record.scaler.config.mandatoryLabels],
    };
    if (record.jobId !== undefined) answer.boundJobId = record.jobId;
    return answer;
  }

  /**
   * True when a job with `jobLabels` may be dispatched to `agentId`: the agent is
   * not one of ours (no gate), or the job names every mandatory label of the
   * agent's scaler and every label it asks for is in the agent's label set.
   *
   * @param agentId - The agent.
   * @param jobLabels - The job's labels.
   */
  canRunJob(agentId: string, jobLabels: readonly string[]): boolean {
    const record = this.#agents.get(agentId);
    if (record === undefined) return true;
    if (!passesMandatoryGate(jobLabels, record.scaler.config.mandatoryLabels)) return false;
    return jobLabels.every((label) => record.labels.includes(label));
  }

  /**
   * The dispatcher gave `jobId` (of `runId`) to `agentId`. The agent becomes busy
   * (an idle warm agent taking a job counts as a warm hit), and the events buffered
   * for it so far are relayed to `onScalerEvent`, preceded by an `events-dropped`
   * event when the buffer overflowed.
   *
   * @param agentId - The agent.
   * @param runId - The run.
   * @param jobId - The job.
   */
  correlateAgentToJob(agentId: string, runId: string, jobId: string): void {
    const record = this.#agents.get(agentId);
    if (record === undefined) return;
    if (record.state === 'idle') this.#counters.warmHits++;
    if (record.state !== 'spawning') record.state = 'busy';
    if (this.#spawningByJob.get(record.jobId ?? '') === agentId && record.jobId !== jobId) {
      // Taken by another job before registering: the original job waits again.
      this.#spawningByJob.delete(record.jobId!);
    }
    record.jobId = jobId;
    this.#events.correlate(record.mailbox, runId, jobId, (dropped) => ({
      source: 'manager',
      kind: 'events-dropped',
      agentId,
      scaler: record.scaler.name,
      at: this.#now(),
      message: `${dropped} event(s) of ${agentId} were dropped before it was correlated with a job`,
      data: { dropped },
    }));
    this.#emitFor(record, 'busy', `${agentId} runs job ${jobId}`, { runId, jobId });
  }

  /**
   * A job on `agentId` finished; the agent is idle again (and, for a scaler with a
   * warm pool, counts toward its target until its idle timeout).
   *
   * @param agentId - The agent.
   */
  onJobComplete(agentId: string): void {
    const record = this.#agents.get(agentId);
    if (record === undefined || record.state === 'spawning') return;
    record.state = 'idle';
    record.idleSince = this.#now();
    // The job still hears that its agent is done; later events wait for the next job.
    this.#emitFor(record, 'idle', `${agentId} finished job ${record.jobId ?? ''} and is idle`);
    record.jobId = undefined;
    this.#events.uncorrelate(record.mailbox);
  }

  /**
   * An agent went away. Everything it held (scaler, orchestrator and pool
   * reservations) is released. Idempotent.
   *
   * @param agentId - The agent.
   * @returns Resolves once the pool row (if any) is released; never rejects
   *   (a ledger failure is reported as a `release-failed` event, and the ledger's
   *   reaper removes the row later).
   */
  onAgentDisconnected(agentId: string): Promise<void> {
    const record = this.#agents.get(agentId);
    if (record === undefined) return Promise.resolve();
    record.disconnected = true;
    this.#emitFor(record, 'disconnected', `${agentId} disconnected`);
    return this.#forget(record);
  }

  /**
   * The scaler name that spawned `agentId`, or `null` for an agent not spawned here.
   *
   * @param agentId - The agent.
   */
  getBackendName(agentId: string): string | null {
    return this.#agents.get(agentId)?.scaler.name ?? null;
  }

  /**
   * Alias of {@link ScalerManager.getBackendName} (the seed's second name).
   *
   * @param agentId - The agent.
   */
  getBackendForAgent(agentId: string): string | null {
    return this.getBackendName(agentId);
  }

  /**
   * What a host may add to a job's context for an agent it spawned: scaler name
   * and type, labels, resources, the scaler's `options`, and what the backend's
   * `spawn` returned as `context`.
   *
   * @param agentId - The agent.
   * @returns The context, or `undefined` for an agent not spawned here.
   */
  getScalerContextForAgent(agentId: string): Record<string, unknown> | undefined {
    const record = this.#agents.get(agentId);
    if (record === undefined) return undefined;
    return {
      ...record.scaler.config.options,
      ...record.context,
      scaler: record.scaler.name,
      type: record.scaler.config.type,
      labels: [...record.labels],
      resources: {
        requests: { ...record.resources.requests },
        limits: { ...record.resources.limits },
      },
    };
  }

  /** Agents tracked now: spawning, idle and busy. */
  getGlobalActiveCount(): number {
    return this.#agents.size;
  }

  // ---------------------------------------------------------------- maintenance

  /**
   * Start periodic maintenance ({@link ScalerManager.maintain}, on an unref'd timer)
   * and the ledger's reaper. Idempotent.
   */
  start(): void {
    if (this.#shutDown) return;
    if (this.#timer === undefined) {
      this.#timer = this.#clock.setInterval(() => {
        void this.maintain();
      }, this.#maintenanceIntervalMs);
      this.#timer.unref();
    }
    if (this.#ledger && !this.#ledgerStarted) {
      this.#ledger.start();
      this.#ledgerStarted = true;
    }
  }

  /**
   * One maintenance pass (what `start()` runs every `maintenanceIntervalMs`):
   *
   * 1. prune spawns that did not register within `registrationTimeoutMs`
   *    (release, `pruned` event, backend `destroy`);
   * 2. destroy idle agents of warm-pool scalers past `idleTimeoutSeconds` (busy ones never);
   * 3. replenish warm pools up to their size, counting idle agents and warm
   *    spawns in flight, unless jobs were refused for capacity within `demandHoldMs`.
   *
   * Never rejects: failures become events. Concurrent calls share one pass.
   */
  maintain(): Promise<void> {
    this.#maintaining ??= this.#maintainOnce()
      .catch((error: unknown) => {
        // A timer must never reject into the host (an unhandled rejection kills it).
        this.#emitGeneral('', 'maintenance-failed', 'A maintenance pass failed', error);
      })
      .finally(() => {
        this.#maintaining = undefined;
      });
    return this.#maintaining;
  }

  async #maintainOnce(): Promise<void> {
    if (this.#shutDown) return;
    const now = this.#now();
    const destroys: Promise<void>[] = [];
    for (const record of [...this.#agents.values()]) {
      if (record.state === 'spawning' && now - record.spawnedAt >= this.#registrationTimeoutMs) {
        this.#counters.pruned++;
        this.#emitFor(
          record,
          'pruned',
          `${record.agentId} did not register within ${this.#registrationTimeoutMs} ms; released and destroyed`,
        );
        destroys.push(this.#forget(record));
        if (record.spawnSettled) destroys.push(this.#destroyQuietly(record));
        continue;
      }
      const warm = record.scaler.config.warmPool;
      if (
        record.state === 'idle' &&
        !record.destroying &&
        warm !== undefined &&
        now - record.idleSince >= warm.idleTimeoutSeconds * 1000
      ) {
        destroys.push(this.#destroyIdle(record));
      }
    }
    await Promise.all(destroys);
    for (const scaler of this.#order) {
      const warm = scaler.config.warmPool;
      if (scaler.retiring || warm === undefined || warm.size === 0) continue;
      if (scaler.jobSpawnsInFlight > 0) continue;
      if (now - scaler.lastDemandAt < this.#demandHoldMs) continue;
      if (now - this.#globalDemandAt < this.#demandHoldMs) continue;
      // Only agents that can take a job count: idle ones and warm spawns not yet registered.
      let ready = 0;
      for (const id of scaler.agents) {
        const record = this.#agents.get(id)!;
        if (record.state === 'idle' && !record.destroying) ready++;
        else if (record.state === 'spawning' && record.warm) ready++;
      }
      const labelSet = scaler.labelSets[warm.labelSet] ?? scaler.labelSets[0]!;
      let resources: AgentResources;
      try {
        resources = this.#resolve(scaler, labelSet, undefined);
      } catch (error) {
        this.#emitGeneral(
          scaler.name,
          'warm-pool-failed',
          `The warm pool of ${scaler.name} cannot resolve its label set's resources`,
          error,
        );
        continue;
      }
      for (let missing = warm.size - ready; missing > 0; missing--) {
        const outcome = await this.#attempt(scaler, labelSet, resources, undefined);
        if (!('kind' in outcome) || outcome.kind !== 'spawned') break;
        if (this.#shutDown) return;
      }
    }
  }

  async #destroyIdle(record: AgentRecord): Promise<void> {
    record.destroying = true;
    try {
      await record.scaler.backend.destroy(record.agentId);
    } catch (error) {
      record.destroying = false;
      this.#emitFor(record, 'destroy-failed', `Destroying idle ${record.agentId} failed`, {
        error,
      });
      return;
    }
    if (this.#agents.get(record.agentId) !== record) return;
    this.#counters.idleDestroyed++;
    this.#emitFor(record, 'destroyed', `${record.agentId} was idle too long; destroyed`);
    await this.#forget(record);
  }

  /**
   * Compare the agents this manager tracks with what each backend's `list()`
   * reports, and release the ones that are gone (their spawn finished but the
   * backend no longer runs them). Spawns still in flight are left alone.
   *
   * @returns What was released, what is running untracked, and which backends failed to list.
   */
  async reconcile(): Promise<ReconcileResult> {
    const result: ReconcileResult = { released: [], untracked: [], failed: [] };
    for (const scaler of [...this.#order]) {
      if (typeof scaler.backend.list !== 'function') continue;
      let listed: Set<string>;
      try {
        listed = new Set(await scaler.backend.list());
      } catch (error) {
        result.failed.push({ scaler: scaler.name, error });
        continue;
      }
      const releases: Promise<void>[] = [];
      for (const id of [...scaler.agents]) {
        const record = this.#agents.get(id);
        if (record === undefined || !record.spawnSettled || listed.has(id)) continue;
        this.#counters.reconciled++;
        this.#emitFor(record, 'gone', `${id} is no longer listed by ${scaler.name}; released`);
        releases.push(this.#forget(record));
        result.released.push(id);
      }
      for (const id of listed) {
        if (!this.#agents.has(id)) result.untracked.push({ scaler: scaler.name, agentId: id });
      }
      await Promise.all(releases);
    }
    return result;
  }

  /**
   * Stop maintenance, stop every backend (`shutdown()`, or `destroy` per agent),
   * release every reservation (caps, and this instance's rows in the ledger), and
   * stop the ledger's reaper if `start()` started it. The ledger itself is not
   * closed: it belongs to the host. Never rejects; failures become events.
   */
  async shutdownAll(): Promise<void> {
    this.#shutDown = true;
    this.#clock.clearInterval(this.#timer);
    this.#timer = undefined;
    await this.#maintaining;
    const stops: Promise<unknown>[] = [];
    for (const scaler of this.#scalers.values()) {
      if (typeof scaler.backend.shutdown === 'function') {
        stops.push(
          scaler.backend
            .shutdown()
            .catch((error: unknown) =>
              this.#emitGeneral(
                scaler.name,
                'shutdown-failed',
                `Backend ${scaler.name} failed to shut down`,
                error,
              ),
            ),
        );
      } else {
        for (const id of scaler.agents) {
          const record = this.#agents.get(id)!;
          stops.push(this.#destroyQuietly(record));
        }
      }
    }
    await Promise.all(stops);
    await Promise.all([...this.#agents.values()].map((record) => this.#forget(record)));
    this.#spawningByJob.clear();
    await Promise.all([...this.#poolReleases]);
    if (this.#ledger) {
      try {
        await this.#ledger.releaseAllForInstance();
      } catch {
        // The ledger's own reaper removes rows of an instance whose lease ended.
      }
      if (this.#ledgerStarted) this.#ledger.stop();
      this.#ledgerStarted = false;
    }
  }

  // ---------------------------------------------------------------- reload and status

  /**
   * Validate and apply a new config without disturbing running agents. A lowered
   * cap or max refuses new work until usage falls below it; a removed scaler takes
   * no new work and goes when its last agent goes; new machine pools are registered
   * with the ledger. When anything is wrong nothing changes.
   *
   * @param config - The new configuration.
   * @returns `{ ok, errors }`, with every problem's path.
   */
  async reload(config: ScalerConfigInput): Promise<ValidationResult> {
    const checked = this.#check(config);
    if (!checked.ok) return { ok: false, errors: checked.errors };
    this.#config = checked.config;
    this.#apply(checked.config);
    return { ok: true, errors: [] };
  }

  /** A point-in-time summary: counts, usage and caps per scaler and overall, pools, counters. */
  getStatus(): ScalerStatus {
    const globalUsage = this.#caps.usage(GLOBAL_SCOPE);
    const poolUsage = new Map<string, { cpus: number; memBytes: number }>();
    let spawningCount = 0;
    let warmPoolCount = 0;
    for (const record of this.#agents.values()) {
      if (record.state === 'spawning') spawningCount++;
      if (record.scaler.config.warmPool !== undefined) {
        if (record.state === 'idle' || (record.state === 'spawning' && record.warm)) {
          warmPoolCount++;
        }
      }
      if (record.pool !== undefined) {
        const usage = poolUsage.get(record.pool) ?? { cpus: 0, memBytes: 0 };
        usage.cpus =
          (coresToMillicores(usage.cpus) + coresToMillicores(record.resources.requests.cpus)) /
          1000;
        usage.memBytes += record.resources.requests.memBytes;
        poolUsage.set(record.pool, usage);
      }
    }
    const status: ScalerStatus = {
      globalMaxAgents: this.#config.globalMaxAgents,
      globalActiveCount: this.#agents.size,
      spawningCount,
      warmPoolCount,
      globalUsage: { cpus: globalUsage.cpus, memBytes: globalUsage.memBytes },
      pools: Object.entries(this.#config.machinePools).map(([name, cap]) => ({
        name,
        cap: { ...cap },
        usage: poolUsage.get(name) ?? { cpus: 0, memBytes: 0 },
      })),
      counters: { ...this.#counters },
      backends: [],
    };
    if (this.#config.resourceCap !== undefined) {
      status.globalResourceCap = { ...this.#config.resourceCap };
    }
    for (const scaler of this.#order) {
      let idle = 0;
      let busy = 0;
      let spawning = 0;
      for (const id of scaler.agents) {
        const state = this.#agents.get(id)!.state;
        if (state === 'idle') idle++;
        else if (state === 'busy') busy++;
        else spawning++;
      }
      const usage = this.#caps.usage(scaler.scope);
      const entry: BackendStatus = {
        name: scaler.name,
        type: scaler.config.type,
        activeCount: scaler.agents.size,
        spawningCount: spawning,
        idleCount: idle,
        busyCount: busy,
        maxAgents: scaler.config.maxAgents,
        labelSets: scaler.labelSets.map((set) => [...set.labels]),
        usage: { cpus: usage.cpus, memBytes: usage.memBytes },
        mandatoryLabels: [...scaler.config.mandatoryLabels],
        retiring: scaler.retiring,
      };
      if (scaler.config.resourceCap !== undefined) {
        entry.resourceCap = { ...scaler.config.resourceCap };
      }
      if (scaler.config.machinePool !== undefined) entry.machinePool = scaler.config.machinePool;
      if (scaler.config.warmPool !== undefined) {
        entry.warmPool = {
          size: scaler.config.warmPool.size,
          idleTimeoutSeconds: scaler.config.warmPool.idleTimeoutSeconds,
        };
      }
      status.backends.push(entry);
    }
    return status;
  }

  // ---------------------------------------------------------------- internals

  #check(
    input: ScalerConfigInput,
  ): { ok: true; config: ScalerConfig } | { ok: false; errors: ConfigIssue[] } {
    const result = validateScalerConfig(input);
    if (!result.ok) return result;
    const config = result.config;
    const errors: ConfigIssue[] = [];
    for (const [i, scaler] of config.scalers.entries()) {
      const entry = this.#backends.get(scaler.name);
      if (entry === undefined) {
        errors.push({
          path: ['scalers', i, 'name'],
          message: `No backend was given for scaler "${scaler.name}" (backends: ${[...this.#backends.keys()].join(', ') || 'none'})`,
        });
        continue;
      }
      for (const label of entry.platformLabels ?? []) {
        if (!label.startsWith(config.autoLabelPrefix)) {
          errors.push({
            path: ['scalers', i, 'name'],
            message: `Platform label "${label}" of backend "${scaler.name}" must start with the automatic-label prefix "${config.autoLabelPrefix}"`,
          });
        }
      }
      if (scaler.machinePool !== undefined && this.#ledger === undefined) {
        errors.push({
          path: ['scalers', i, 'machinePool'],
          message: `Scaler "${scaler.name}" uses machine pool "${scaler.machinePool}" but the manager was given no \`ledger\``,
        });
      }
    }
    return errors.length > 0 ? { ok: false, errors } : { ok: true, config };
  }

  #apply(config: ScalerConfig): void {
    this.#matchCache.clear();
    this.#caps.setCap(GLOBAL_SCOPE, config.resourceCap);
    if (this.#ledger) {
      for (const [pool, cap] of Object.entries(config.machinePools)) {
        this.#ledger.registerPool(pool, cap);
      }
    }
    const keep = new Set<string>();
    const order: ScalerState[] = [];
    for (const entry of config.scalers) {
      keep.add(entry.name);
      const backend = this.#backends.get(entry.name)!;
      const platformLabels = backend.platformLabels ?? [];
      const auto = automaticLabels(config.autoLabelPrefix, entry.name, platformLabels);
      const labelSets: LabelSetState[] = entry.labelSets.map((set, index) => {
        const labels = [...new Set([...set.labels, ...auto])];
        return {
          index,
          labels,
          set: new Set(labels),
          resources: set.resources,
        };
      });
      let state = this.#scalers.get(entry.name);
      if (state === undefined) {
        state = {
          name: entry.name,
          scope: `scaler:${entry.name}`,
          config: entry,
          backend: backend.backend,
          platformLabels,
          labelSets,
          agents: new Set(),
          retiring: false,
          jobSpawnsInFlight: 0,
          lastDemandAt: Number.NEGATIVE_INFINITY,
        };
        this.#scalers.set(entry.name, state);
      } else {
        state.config = entry;
        state.labelSets = labelSets;
        state.retiring = false;
      }
      this.#caps.setCap(state.scope, entry.resourceCap);
      order.push(state);
    }
    for (const state of this.#scalers.values()) {
      if (keep.has(state.name)) continue;
      state.retiring = true;
      if (state.agents.size === 0) this.#retire(state);
      else order.push(state);
    }
    this.#order = order;
  }

  #retire(state: ScalerState): void {
    this.#scalers.delete(state.name);
    this.#order = this.#order.filter((s) => s !== state);
    this.#caps.setCap(state.scope, undefined);
    this.#matchCache.clear();
  }

  /** Undo a reservation whose spawn never started (no events of its own). */
  #rollback(record: AgentRecord): void {
    this.#untrack(record);
  }

  #untrack(record: AgentRecord): boolean {
    if (this.#agents.get(record.agentId) !== record) return false;
    this.#agents.delete(record.agentId);
    record.scaler.agents.delete(record.agentId);
    this.#caps.release(record.agentId);
    if (record.jobId !== undefined && this.#spawningByJob.get(record.jobId) === record.agentId) {
      this.#spawningByJob.delete(record.jobId);
    }
    if (record.scaler.retiring && record.scaler.agents.size === 0) this.#retire(record.scaler);
    return true;
  }

  /** Stop tracking an agent and release everything it holds. Idempotent; never rejects. */
  #forget(record: AgentRecord): Promise<void> {
    if (!this.#untrack(record)) return Promise.resolve();
    return this.#releasePool(record);
  }

  #releasePool(record: AgentRecord): Promise<void> {
    if (record.pool === undefined || this.#ledger === undefined) return Promise.resolve();
    const pool = record.pool;
    const done = this.#ledger
      .release(pool, record.agentId)
      .then(
        () => undefined,
        (error: unknown) => {
          this.#emitFor(
            record,
            'release-failed',
            `Releasing ${record.agentId} in pool "${pool}" failed`,
            {
              error,
            },
          );
        },
      )
      .finally(() => {
        this.#poolReleases.delete(done);
      });
    this.#poolReleases.add(done);
    return done;
  }

  #destroyQuietly(record: AgentRecord): Promise<void> {
    return record.scaler.backend.destroy(record.agentId).then(
      () => undefined,
      (error: unknown) => {
        this.#emitFor(record, 'destroy-failed', `Destroying ${record.agentId} failed`, { error });
      },
    );
  }

  #backendEvent(agentId: string, scaler: string, input: BackendEventInput): void {
    const event: ScalerEvent = {
      source: 'backend',
      kind: String(input?.kind ?? 'event'),
      agentId,
      scaler,
      at: this.#now(),
    };
    if (input?.message !== undefined) event.message = input.message;
    if (input?.data !== undefined) event.data = input.data;
    this.#events.dispatch(this.#agents.get(agentId)?.mailbox, event);
  }

  #emitFor(
    record: AgentRecord,
    kind: string,
    message: string,
    data?: Record<string, unknown>,
  ): void {
    const event: ScalerEvent = {
      source: 'manager',
      kind,
      agentId: record.agentId,
      scaler: record.scaler.name,
      at: this.#now(),
      message,
    };
    if (data !== undefined) event.data = data;
    this.#events.dispatch(record.mailbox, event);
  }

  // The ledger says rows of ours in `pool` were removed while this instance
  // stalled (or by an operator): those agents run without a pool reservation
  // now. The host decides (destroy, or let them finish); we say which ones.
  #reservationsLost(pool: string, except: string, error: LedgerLeaseExpiredError): void {
    const named = new Set(error.agentIds);
    for (const record of this.#agents.values()) {
      if (record.pool !== pool || record.agentId === except) continue;
      // A ledger that cannot name the rows (NATS) means all of ours may be gone.
      if (named.size > 0 && !named.has(record.agentId)) continue;
      this.#emitFor(
        record,
        'reservation-lost',
        `The pool reservation of ${record.agentId} in "${pool}" is gone (${named.size > 0 ? 'removed' : 'possibly removed'} while this instance's lease had lapsed); its capacity may now be given to others`,
        { pool, certain: named.size > 0, error },
      );
    }
  }

  /** An event about no single agent (`agentId` is empty). */
  #emitGeneral(scaler: string, kind: string, message: string, error: unknown): void {
    this.#events.general({
      source: 'manager',
      kind,
      agentId: '',
      scaler,
      at: this.#now(),
      message,
      data: { error },
    });
  }
}

function defaultAgentId(scaler: string): string {
  return `${scaler}-${randomBytes(6).toString('hex')}`;
}
