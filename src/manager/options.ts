import type { Clock } from '../clock.js';
import type { PoolLedger } from '../ledger/types.js';
import type { ScalerConfigInput } from './config.js';
import type { ScalerEvent } from './events.js';
import type { LeaseLostPolicy } from './leases.js';
import type { ReservationLostPolicy } from './reservations.js';
import type { BackendEntry } from './scalers.js';
import type { RecoveryOptions } from './state/recovery.js';
import type { StateStore } from './state/types.js';
import type { ReconcileSweep } from './sweeps.js';
import type { ManagerTelemetryOptions } from './telemetry.js';

/** Options of the `ScalerManager` constructor. */
export interface ScalerManagerOptions extends ManagerTelemetryOptions {
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
   * One ledger per machine pool, by pool name, instead of `ledger` (not both):
   * e.g. `{ local: machineLedger, 'gpu-box': natsLedger }`. One ledger object
   * may serve several pools. Every pool in `machinePools` needs one (a
   * `ConfigError` naming the pool otherwise); a ledger for a pool the config
   * does not declare (yet) is allowed.
   */
  ledgers?: Readonly<Record<string, PoolLedger>>;
  /**
   * A spawned agent that has not registered after this long is pruned: the
   * backend is asked to destroy it, then its reservations are released. It
   * counts as a spawn failure for the scaler's backoff.
   * @default 300000 (5 minutes)
   */
  registrationTimeoutMs?: number;
  /**
   * How often `start()` runs `maintain()` (prune, idle and lifetime rules, excess, warm pool).
   * @default 5000
   */
  maintenanceIntervalMs?: number;
  /**
   * How often `start()` runs `reconcile()` (compare with each backend's `list()`,
   * restore lost pool rows), in seconds. Without it, `start()` does not reconcile.
   */
  reconcileIntervalSeconds?: number;
  /**
   * What to do when the ledger removed the pool row of a running agent; the
   * manager first tries to write it back.
   * @default 'report'
   */
  reservationLostPolicy?: ReservationLostPolicy;
  /**
   * What to do when the ledger says its lease is at risk (renewals failing,
   * before peers may take this manager's pool rows): destroy the agents that
   * hold rows (`stop-agents`), stop spawning in machine pools
   * (`stop-spawning`), or only report (`report`). See docs/manager.md,
   * "Leases". Needs a ledger with `onLeaseEvent`.
   * @default 'stop-agents'
   */
  leaseLostPolicy?: LeaseLostPolicy;
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
   * The clock every timing rule runs on (maintenance and reconcile timers,
   * registration timeout, idle and lifetime limits, pacing, backoff, warm pool
   * schedules, demand hold, shutdown timeout).
   * @default the system clock (`systemClock` of `scaler-primitives`)
   */
  clock?: Clock;
  /** Shorthand for a `clock` that only replaces `now()` (epoch milliseconds). Ignored when `clock` is given. @default `Date.now` */
  now?: () => number;
  /** A source of numbers in [0, 1) for backoff and timer jitter. @default `Math.random` */
  random?: () => number;
  /** Make an agent id for a scaler. Must be unique, at most 253 characters. @default `<scaler>-<12 hex digits>` */
  generateAgentId?: (scaler: string) => string;
  /**
   * Where the manager keeps its books (agents, states, job bindings, pool
   * rows) so that a restarted host recovers them: `start()` runs
   * `recoverState()`. Writes are batched (group commit) and never delay the
   * capacity check; a spawn waits for its record to be durable before the
   * backend is asked. See docs/manager.md, "State stores and restart recovery".
   * @default none: the books live in memory only, as with a `MemoryStateStore` no one reads
   */
  stateStore?: StateStore;
  /** How `recoverState()` treats what it finds (`unrecordedAgents`: `leave` or `destroy`). */
  recovery?: RecoveryOptions;
  /**
   * Called by `onConfigAck(agentId)` once an agent confirmed it received its
   * configuration (e.g. to clear a microVM's MMDS data).
   */
  onConfigAck?: (agentId: string, scaler: string) => void;
  /**
   * Sweeps `reconcile()` runs after comparing with the backends, by name: each
   * removes what agents no longer alive left behind (caps keys, isolation rules)
   * given a live view of the agents, and answers `{ removedAgents }`. They run
   * only when every backend has a `list()` that answered (else the live set is
   * unknown). Results in `ReconcileResult.sweeps`, events `swept`, `sweep-failed`,
   * `sweeps-skipped`.
   */
  sweeps?: Readonly<Record<string, ReconcileSweep>>;
}
