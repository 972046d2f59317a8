import { type Clock, resolveClock } from '../clock.js';
import { Dispatch } from './agents/dispatch.js';
import { AgentLifecycle } from './agents/lifecycle.js';
import { Maintenance, Timers } from './agents/maintenance.js';
import { checkLeaseLostPolicy, LeaseWatch } from './capacity/leases.js';
import { Pacing } from './capacity/pacing.js';
import { PoolLedgers } from './capacity/pools.js';
import { checkReservationLostPolicy, LostReservations } from './capacity/reservations.js';
import { nonNegative, positive } from './checks.js';
import { type ConfigValidation, configError, validateScalerConfig } from './config/check.js';
import type { ScalerConfig, ScalerConfigInput } from './config/config.js';
import { FleetCore } from './core.js';
import { EventRelay } from './events.js';
import { checkOptionKeys, type ScalerManagerOptions } from './options.js';
import type { ScalerState } from './spawning/scalers.js';
import { Spawner } from './spawning/spawner.js';
import { WarmPool } from './spawning/warm-pool.js';
import { StateWriter } from './state/batching.js';
import {
  checkRecoveryOptions,
  type RecoveryOptions,
  type RecoveryResult,
  recoverFleet,
} from './state/recovery.js';
import { buildStatus } from './telemetry/status.js';
import { createManagerTelemetry } from './telemetry/telemetry.js';
import type { CapacityLimit, ScalerStatus, ShutdownResult } from './types.js';

/**
 * The parts of one manager, built from its options and wired to each other
 * (every reference points from here into a part, never back).
 * @internal
 */
export class ManagerParts {
  readonly core: FleetCore;
  readonly ledgers: PoolLedgers;
  readonly spawner: Spawner;
  readonly pacing: Pacing;
  readonly warm: WarmPool;
  readonly maintenance: Maintenance;
  readonly timers: Timers;
  readonly lost: LostReservations;
  readonly leases: LeaseWatch;
  readonly lifecycle: AgentLifecycle;
  readonly dispatch: Dispatch;
  readonly maintenanceIntervalMs: number;
  readonly reconcileIntervalMs: number | undefined;
  ledgerStarted = false;
  shutdown: Promise<ShutdownResult> | undefined;
  readonly recovery: Required<RecoveryOptions>;
  /** The one recovery run (`start()` or `recoverState()`), once begun. */
  recovering: Promise<RecoveryResult> | undefined;
  /** True while recovery runs: `requestScale` waits for it. */
  recoveryPending = false;
  /** `start()` was called while recovery ran: arm the timers once it ends. */
  startQueued = false;

  constructor(options: ScalerManagerOptions) {
    if (typeof options !== 'object' || options === null) {
      throw new TypeError(`Expected \`options\` to be an object, got \`${String(options)}\``);
    }
    checkOptionKeys(options);
    const policies = options.policies ?? {};
    const leaseLostPolicy = checkLeaseLostPolicy(policies.leaseLost);
    const clock = resolveClock(options.clock, undefined);
    const random = options.random ?? Math.random;
    if (typeof random !== 'function') {
      throw new TypeError(`Expected \`random\` to be a function, got \`${typeof random}\``);
    }
    this.ledgers = new PoolLedgers(options.ledgers);
    this.maintenanceIntervalMs = positive(
      'maintenanceIntervalMs',
      options.maintenanceIntervalMs,
      5000,
    );
    this.reconcileIntervalMs =
      options.reconcileIntervalMs === undefined
        ? undefined
        : positive('reconcileIntervalMs', options.reconcileIntervalMs, 60_000);
    const telemetry = createManagerTelemetry(options.telemetry ?? {}, () => this);
    const events = new EventRelay(
      telemetry?.wrapOnEvent(options.onEvent) ?? options.onEvent,
      options.onScalerEvent,
      nonNegative('maxBufferedEvents', options.maxBufferedEvents, 100),
    );
    const validated = validateScalerConfig(options.config);
    // The config is checked against the backends below, once the registry exists.
    const initial = validated.ok ? validated.config : undefined;
    this.core = new FleetCore(
      initial as ScalerConfig,
      clock,
      events,
      options.backends,
      this.ledgers,
      {
        registrationTimeoutMs: positive(
          'registrationTimeoutMs',
          options.registrationTimeoutMs,
          300_000,
        ),
        demandHoldMs: nonNegative('demandHoldMs', options.demandHoldMs, 10_000),
        random,
      },
    );
    this.core.telemetry = telemetry;
    if (!validated.ok) throw configError(validated.errors);
    const problems = this.core.scalers.check(validated.config, this.ledgers);
    if (problems.length > 0) throw configError(problems);
    this.pacing = new Pacing(this.core);
    this.lost = new LostReservations(
      this.core,
      checkReservationLostPolicy(policies.reservationLost),
    );
    this.spawner = new Spawner(
      this.core,
      options.generateAgentId,
      this.pacing,
      (pool, lost) => this.lost.handle(pool, lost),
      (pools) => this.leases.spawnLeases(pools),
    );
    this.warm = new WarmPool(
      this.core,
      this.spawner,
      (scaler, pools) => this.pacing.check(scaler) ?? this.refusal(scaler, pools),
    );
    this.maintenance = new Maintenance(this.core, this.warm, (scaler) =>
      this.pacing.failed(scaler, new Error('The agent did not register in time')),
    );
    this.timers = new Timers(this.core);
    this.lifecycle = new AgentLifecycle(this.core, this.pacing, options.onConfigAck);
    this.recovery = checkRecoveryOptions(policies.unrecordedAgents);
    this.#attachStore(options.stateStore);
    this.dispatch = new Dispatch(this.core, this.spawner, this.lifecycle);
    this.apply(validated.config);
    // Last: events may arrive from the ledger's timers from here on.
    this.leases = new LeaseWatch(this.core, this.ledgers, leaseLostPolicy);
  }

  /**
   * Why the policies (lease at risk, lost rows) hold spawns of this scaler in
   * `pools` (by default any of its pools) now, if they do.
   */
  refusal(scaler: ScalerState, pools = scaler.pools): CapacityLimit | undefined {
    return this.leases.refusal(scaler, pools) ?? this.lost.refusal(scaler, pools);
  }

  #attachStore(store: ScalerManagerOptions['stateStore']): void {
    if (store === undefined) return;
    if (typeof store?.load !== 'function' || typeof store.commit !== 'function') {
      throw new TypeError(
        `Expected \`stateStore\` to be a StateStore ({ load, commit }), got \`${typeof store}\``,
      );
    }
    const writer = new StateWriter(store, (error, agentIds) =>
      this.core.emitGeneral('', 'state-write-failed', 'Writing the manager state failed', {
        error,
        agentIds,
      }),
    );
    this.core.state = writer;
    this.core.book.onChange = (record) => writer.mark(record);
  }

  /** Recover the stored books once (later calls share the first run). */
  recover(): Promise<RecoveryResult> {
    if (this.recovering === undefined) {
      this.recoveryPending = true;
      this.recovering = recoverFleet(
        this.core,
        this.recovery,
        (pool, lost) => this.lost.handle(pool, lost),
        this.leases.policy === 'stop-agents',
      );
      const done = () => {
        this.recoveryPending = false;
      };
      this.recovering.then(done, done);
    }
    return this.recovering;
  }

  get clock(): Clock {
    return this.core.clock;
  }

  /** Validate a new config against the schema and the backends; apply it when nothing is wrong. */
  reload(config: ScalerConfigInput): ConfigValidation {
    const validated = validateScalerConfig(config);
    if (!validated.ok) return validated;
    const problems = this.core.scalers.check(validated.config, this.ledgers);
    if (problems.length > 0) return { ok: false, errors: problems };
    this.apply(validated.config);
    return validated;
  }

  /** Apply a config the registry accepted. */
  apply(config: ScalerConfig): void {
    this.core.config = config;
    this.core.scalers.apply(config);
    this.core.gate.applyConfig(config, this.core.scalers.values());
  }

  /** The status, with what the warm pool, pacing and reservation parts know. */
  status(): ScalerStatus {
    const now = this.core.now();
    const status = buildStatus(this.core, (scaler, entry) => {
      this.warm.describe(scaler, entry, now);
      const backoff = this.pacing.status(scaler);
      if (backoff !== undefined) entry.backoff = backoff;
      if (this.refusal(scaler) !== undefined) entry.spawningStopped = true;
    });
    const lease = this.leases.status();
    if (lease !== undefined) status.lease = lease;
    return status;
  }
}
