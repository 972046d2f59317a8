import type { Clock } from '../clock.js';
import { assertKnownKeys } from '../internal/strict-keys.js';
import type { LedgerTelemetryOptions } from '../ledger/telemetry.js';
import type { PoolLedger } from '../ledger/types.js';
import type { ScalerConfigInput } from './config/config.js';
import type { ScalerEvent } from './events.js';
import type { BackendEntry } from './spawning/scalers.js';
import type { StateStore } from './state/types.js';
import type { ReconcileSweep } from './types.js';

/** Options of the `ScalerManager` constructor. */
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
   * The cross-process ledger of each machine pool, by pool name (a
   * `MachineLedger`, the NATS ledger, or anything implementing `PoolLedger`):
   * e.g. `{ local: machineLedger, 'gpu-box': natsLedger }`. One ledger object
   * may serve several pools (`{ a: ledger, b: ledger }`). Every pool in
   * `machinePools` needs one (a `ConfigError` naming the pool otherwise); a
   * ledger for a pool the config does not declare (yet) is allowed.
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
   * restore lost pool rows), in milliseconds. Without it, `start()` does not reconcile.
   */
  reconcileIntervalMs?: number;
  /**
   * What the manager does when something it holds is in doubt. Unknown keys are refused.
   */
  policies?: {
    /**
     * The ledger removed the pool row of a running agent (the manager first
     * tries to write it back): `report`, `stop-spawning` in that pool, or
     * `drain` the agents whose row could not be restored.
     * @default 'report'
     */
    reservationLost?: 'report' | 'stop-spawning' | 'drain';
    /**
     * The ledger says its lease is at risk (renewals failing, before peers may
     * take this manager's pool rows): destroy the agents that hold rows
     * (`stop-agents`), stop spawning in machine pools (`stop-spawning`), or
     * only report (`report`). See docs/manager.md, "Leases". Needs a ledger
     * with `onLeaseEvent`.
     * @default 'stop-agents'
     */
    leaseLost?: 'stop-agents' | 'stop-spawning' | 'report';
    /**
     * `recoverState()` finds agents a backend lists that no stored record
     * names: `leave` them running, or `destroy` them.
     * @default 'leave'
     */
    unrecordedAgents?: 'leave' | 'destroy';
  };
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
  /** A source of numbers in [0, 1) for backoff and timer jitter. @default `Math.random` */
  random?: () => number;
  /**
   * Make an agent id for a scaler. Must be unique, at most 253 characters.
   * Called once a request passed the agent counts and in-memory caps (not for
   * one they refuse); a pool ledger can still refuse it after.
   * @default `<scaler>-<12 hex digits>`
   */
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
  /**
   * Called by `onConfigAck(agentId)` once an agent confirmed it received its
   * configuration (e.g. to clear a microVM's MMDS data), after the agent's
   * backend's own `onConfigAck` when it has one. A throw is a
   * `config-ack-failed` event (`data.hook: 'option'`).
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
  /**
   * OpenTelemetry: with a `meterProvider` the manager records metrics, with a
   * `tracerProvider` spans (see docs/observability.md); without either it
   * records nothing and costs nothing. Unknown keys are refused.
   */
  telemetry?: Pick<LedgerTelemetryOptions, 'meterProvider' | 'tracerProvider'> & {
    /**
     * With a `meterProvider`: also record the histogram `scaler.spawn.duration`
     * (how long each backend `spawn` call took). Off by default: it is the one
     * instrument that costs an SDK `record` on every spawn (see
     * docs/observability.md, Overhead). `scaler.spawns` counts every spawn by
     * outcome either way, and `scaler.agent.registration.duration` covers spawn
     * to registration.
     * @default false
     */
    spawnDurationHistogram?: boolean;
  };
}

// Every key of ScalerManagerOptions, once: `satisfies` fails to compile when an
// option is missing here or a key here is not an option, so adding an option
// is one line in the interface and one here.
const OPTION_KEYS = {
  config: true,
  backends: true,
  onScalerEvent: true,
  onEvent: true,
  ledgers: true,
  registrationTimeoutMs: true,
  maintenanceIntervalMs: true,
  reconcileIntervalMs: true,
  policies: true,
  demandHoldMs: true,
  maxBufferedEvents: true,
  clock: true,
  random: true,
  generateAgentId: true,
  stateStore: true,
  onConfigAck: true,
  sweeps: true,
  telemetry: true,
} as const satisfies Record<keyof ScalerManagerOptions, true>;

const OPTION_KEY_LIST: readonly string[] = Object.keys(OPTION_KEYS);

/**
 * Refuse a key that is not a `ScalerManager` option (`reservationLostPolcy`):
 * an `InvalidInputError` naming it, the nearest option and every option.
 * @internal
 */
export function checkOptionKeys(options: ScalerManagerOptions): void {
  assertKnownKeys(options, OPTION_KEY_LIST, 'ScalerManager options');
  for (const [group, keys] of Object.entries(GROUP_KEYS)) {
    const value: unknown = options[group as keyof typeof GROUP_KEYS];
    if (value === undefined) continue;
    if (typeof value !== 'object' || value === null || Array.isArray(value)) {
      throw new TypeError(
        `Expected \`${group}\` to be an object { ${keys.join(', ')} }, got \`${Array.isArray(value) ? 'array' : String(value)}\``,
      );
    }
    assertKnownKeys(value, keys, `ScalerManager options.${group}`);
  }
}

// The keys of the grouped options, checked like the top-level ones.
const GROUP_KEYS = {
  policies: Object.keys({
    reservationLost: true,
    leaseLost: true,
    unrecordedAgents: true,
  } as const satisfies Record<keyof NonNullable<ScalerManagerOptions['policies']>, true>),
  telemetry: Object.keys({
    meterProvider: true,
    tracerProvider: true,
    spawnDurationHistogram: true,
  } as const satisfies Record<keyof NonNullable<ScalerManagerOptions['telemetry']>, true>),
} as const;
