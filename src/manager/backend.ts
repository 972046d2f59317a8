/**
 * The backend contract: what the manager asks a backend to start (with the
 * resolved resources), what the backend answers and reports, and the
 * `ScalerBackend` interface a host implements.
 */
import type { LeaseLocation } from '../ledger/types.js';
import type { ResourceAmount, ResourceLimits } from '../resources/types.js';

/** A job's resources after layered defaults: what caps add up and what the backend enforces. */
export interface AgentResources {
  /** What the agent needs: summed by the scaler, orchestrator and pool caps. */
  requests: ResourceAmount;
  /**
   * What the agent may use at most: what the backend should enforce. A limit no
   * layer declares is absent (unset: enforce none), never 0.
   */
  limits: ResourceLimits;
}

/** What the manager asks a backend to start. */
export interface SpawnRequest {
  /** The agent id the manager generated; the agent must register under this id. */
  agentId: string;
  /** The scaler (its `BackendEntry` has the same name). */
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
   * Every ledger lease the agent's pool rows are held under, for an
   * agent-side fence: pass them all to the agent (`leaseEnv(request.leases)`
   * of `scaler-primitives/fence`) so it stops itself at the first that
   * lapses, before peers may take its capacity, even when this controller is
   * SIGKILLed, stalled or cut off from one of its stores. One lease per
   * ledger serving a pool the agent has a row in, earliest deadline first.
   * Present (never empty) when the agent is in a machine pool whose ledger
   * has `lease()` (`MachineLedger`, `NatsPoolLedger`, the test kit's
   * `MemoryPoolLedger`); absent otherwise.
   */
  leases?: readonly SpawnLease[];
  /**
   * The first of {@link SpawnRequest.leases} (the earliest deadline).
   *
   * @deprecated An agent with rows on several ledgers depends on every one of
   * their leases, and this is one of them: hand the agent `leases` instead
   * (`leaseEnv(request.leases)`). Kept for one release.
   */
  lease?: SpawnLease;
  /**
   * The device ids the agent was given, by extended resource name
   * (`{ "nvidia.com/gpu": ["1", "3"] }`), when a machine pool it reserves in
   * lists device ids for a resource it requests (`devices` in the pool's cap).
   * The ledger chose them in the write that recorded the row, so no other
   * agent sharing the pool holds them: pass exactly these to the agent (e.g.
   * `--gpus device=1,3`). Absent when no pool assigned any.
   */
  devices?: Record<string, string[]>;
  /**
   * Aborted when the manager no longer wants this agent and gives up waiting
   * for the spawn: `shutdownAll()` aborts every spawn still unanswered after
   * its `timeoutMs`. A backend that can cancel its work (`fetch`, execa's
   * `cancelSignal`, a cloud SDK's `abortSignal`) should pass it on and reject
   * once nothing runs; a spawn that answers after the abort is destroyed and
   * its capacity released. Set on every request the manager makes.
   */
  signal?: AbortSignal;
  /**
   * Report a backend event about this agent (image pulled, VM booted, log line...).
   * Events are relayed to `onScalerEvent` once the agent is correlated with a job,
   * and buffered until then.
   */
  emit(event: {
    /** A short machine-readable kind, e.g. `image-pulled`. */
    kind: string;
    /** A human-readable sentence. */
    message?: string;
    /** Anything else worth passing on. */
    data?: Record<string, unknown>;
  }): void;
}

/**
 * What each of {@link SpawnRequest.leases} tells a backend about a
 * controller's ledger lease: where it lives (a lease file, a NATS key), how long it is,
 * and the margin peers add to its deadline before they take its rows. An
 * agent-side fence watching `location` stops the agent when no renewal was
 * seen for `leaseMs` (so before `deadline + marginMs`, when peers may reuse
 * its capacity).
 */
export interface SpawnLease {
  /** Where the lease lives (`{ kind: 'file', path }`, `{ kind: 'nats', bucket, key }`, `{ kind: 'memory' }`). */
  location: LeaseLocation;
  /** The lease length in ms: no renewal seen for this long means the controller lost it. */
  leaseMs: number;
  /** What peers add to the deadline before they take the controller's rows. */
  marginMs: number;
}

/** An event a backend reports through {@link SpawnRequest.emit}. @internal */
export type BackendEventInput = Parameters<SpawnRequest['emit']>[0];

/** What a backend's `spawn` resolves to. Everything is optional. */
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
  /**
   * The agent confirmed it received its configuration (the host called
   * `ScalerManager.onConfigAck(agentId)`): e.g. a microVM backend clears the
   * agent's MMDS data here, with no wiring by the host. Called for agents of
   * this backend only, before the manager's `onConfigAck` option, and again on
   * every later ack (make it idempotent). A throw or a rejected promise is a
   * `config-ack-failed` event (`data.hook: 'backend'`); the option still runs.
   */
  onConfigAck?(agentId: string): void | Promise<void>;
}
