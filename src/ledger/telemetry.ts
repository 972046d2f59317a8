/**
 * Ledger telemetry (OpenTelemetry metrics and spans), shared by the file and the
 * NATS ledger. Built only when a provider was passed: a ledger without one holds
 * `undefined` and every call site is an optional call, so nothing runs and
 * nothing is allocated per operation.
 *
 * Pool usage is observable synchronously: every commit reads the pool document
 * anyway, so the ledger keeps the last one it read (under the lock, or at a
 * compare-and-set) with the monotonic time of the read; gauges report that and
 * its age. With `usageRefreshMs` a background read keeps it fresh when no
 * operation runs.
 */
import { type Clock, type ClockTimer, monotonicNow } from '../clock.js';
import {
  checkProviders,
  contextWithSpan,
  errorType,
  failSpan,
  INTERNAL_SPAN,
  isRecording,
  type OtelMeter,
  type OtelMeterProvider,
  type OtelSpan,
  type OtelTracer,
  type OtelTracerProvider,
  resolveProviders,
  TELEMETRY_OPTION_KEYS,
  takeParentSpan,
} from '../internal/telemetry/index.js';
import type { ResourceCap } from '../resources/types.js';
import type { StaleRow } from './document/verdict.js';
import type { LedgerAnswer, LedgerOp } from './ops.js';
import { LedgerInstruments, type PoolView } from './telemetry-instruments.js';
import type { ReservationRow } from './types.js';

/**
 * Telemetry options of `MachineLedger` and `NatsPoolLedger` (the manager's
 * `telemetry` option takes the same two providers).
 */
export interface LedgerTelemetryOptions {
  /**
   * Record metrics through this OpenTelemetry `MeterProvider` (its meter is named
   * `scaler-primitives` with the package version). Without it nothing is recorded
   * and nothing is allocated per operation. See docs/observability.md.
   * @default none
   */
  meterProvider?: OtelMeterProvider;
  /**
   * Record spans through this OpenTelemetry `TracerProvider` (tracer `scaler-primitives`).
   * @default none
   */
  tracerProvider?: OtelTracerProvider;
  /**
   * With a `meterProvider`: read every registered pool this often (no lock, no
   * write) so the usage gauges stay fresh while no operation runs. Without it
   * the gauges report the document the last operation read, and
   * `scaler.ledger.usage.age` says how old that is. Minimum 100.
   * @default none (no background read)
   */
  usageRefreshMs?: number;
  /**
   * With a `meterProvider`: also record the histograms
   * `scaler.ledger.lock.wait.duration` and `scaler.ledger.lock.hold.duration`
   * (file ledger; the NATS ledger takes no lock). Off by default: they cost
   * two SDK histogram records per lock cycle. Without them the ledger still
   * exports the cheap totals
   * `scaler.ledger.lock.cycles`, `scaler.ledger.lock.wait.time` and
   * `scaler.ledger.lock.hold.time` (in-memory sums, observed at collection),
   * whose rates give the mean wait and hold. Turn the histograms on for
   * percentiles. See docs/observability.md, Overhead.
   * @default false
   */
  lockHistograms?: boolean;
}

/** The option keys of {@link LedgerTelemetryOptions}. @internal */
export const LEDGER_TELEMETRY_KEYS = [
  ...TELEMETRY_OPTION_KEYS,
  'usageRefreshMs',
  'lockHistograms',
] as const;

/** Which ledger records: the value of `scaler.ledger.backend`. @internal */
export type LedgerBackendName = 'file' | 'nats';

/** How a ledger lets its telemetry read pools in the background. @internal */
export interface LedgerReader {
  /** The clock the refresh timer runs on. */
  clock: Clock;
  /** The registered pools. */
  pools(): Iterable<string>;
  /** Read one pool (the read reports back through {@link LedgerTelemetry.observed}). */
  read(pool: string): Promise<unknown>;
}

const OPERATION: Record<LedgerOp['kind'], string> = {
  reserve: 'reserve',
  adopt: 'adopt',
  release: 'release',
  releaseInstance: 'release_instance',
  reap: 'reap',
};

/**
 * Check the telemetry options before anything is connected or created.
 *
 * @throws TypeError as {@link createLedgerTelemetry}.
 * @internal
 */
export function checkLedgerTelemetryOptions(options: LedgerTelemetryOptions): void {
  checkProviders(options);
  if (options.usageRefreshMs !== undefined) checkRefresh(options.usageRefreshMs);
  checkLockHistograms(options.lockHistograms);
}

function checkLockHistograms(value: unknown): void {
  if (value !== undefined && typeof value !== 'boolean') {
    throw new TypeError(
      `Expected \`lockHistograms\` to be a boolean, got \`${value === null ? 'null' : typeof value}\``,
    );
  }
}

function checkRefresh(refresh: unknown): void {
  if (typeof refresh !== 'number' || !Number.isFinite(refresh) || refresh < 100) {
    throw new TypeError(
      `Expected \`usageRefreshMs\` to be a finite number >= 100, got \`${String(refresh)}\``,
    );
  }
}

/**
 * The telemetry of one ledger, or `undefined` when no provider was given.
 *
 * @throws TypeError for a provider without `getMeter`/`getTracer`, a bad
 *   `usageRefreshMs`, or a `lockHistograms` that is not a boolean.
 * @internal
 */
export function createLedgerTelemetry(
  options: LedgerTelemetryOptions,
  backend: LedgerBackendName,
  reader: LedgerReader,
): LedgerTelemetry | undefined {
  const { meter, tracer } = resolveProviders(options);
  const refresh = options.usageRefreshMs;
  if (refresh !== undefined) checkRefresh(refresh);
  checkLockHistograms(options.lockHistograms);
  if (meter === undefined && tracer === undefined) return undefined;
  return new LedgerTelemetry(
    meter,
    tracer,
    backend,
    reader,
    refresh,
    options.lockHistograms === true,
  );
}

/**
 * Instruments and spans of one ledger.
 * @internal
 */
export class LedgerTelemetry {
  readonly #backend: LedgerBackendName;
  readonly #tracer: OtelTracer | undefined;
  readonly #views = new Map<string, PoolView>();
  readonly #spans = new WeakMap<LedgerOp, OtelSpan>();
  /** Instruments: only with a meter. */
  readonly #m: LedgerInstruments | undefined;
  readonly #reader: LedgerReader;
  #timer: ClockTimer | undefined;

  constructor(
    meter: OtelMeter | undefined,
    tracer: OtelTracer | undefined,
    backend: LedgerBackendName,
    reader: LedgerReader,
    refreshMs: number | undefined,
    lockHistograms: boolean,
  ) {
    this.#backend = backend;
    this.#tracer = tracer;
    this.#reader = reader;
    if (meter === undefined) return;
    this.#m = new LedgerInstruments(meter, backend, this.#views, lockHistograms);
    if (refreshMs !== undefined) {
      this.#timer = reader.clock.setInterval(() => this.refresh(), refreshMs).unref();
    }
  }

  /** Read every registered pool now (the background refresh). Never rejects. */
  refresh(): Promise<void> {
    const reads = [...this.#reader.pools()].map((pool) =>
      this.#reader.read(pool).catch(() => undefined),
    );
    return Promise.all(reads).then(() => undefined);
  }

  /**
   * One caller's operation: its span, and its answer counted. Takes the
   * operation's promise (not a function making it), so a call costs no closure
   * of the caller's; called in the same synchronous stretch as the enqueue, so
   * a parent span the manager offered is still there to take.
   */
  op(pool: string, op: LedgerOp, answer: Promise<LedgerAnswer>): Promise<LedgerAnswer> {
    // The reaper's own rounds are counted but make no span of their own.
    const span =
      this.#tracer === undefined || (op.kind === 'reap' && op.background)
        ? undefined
        : this.#span(this.#tracer, pool, op);
    return answer.then(
      (value) => {
        const result = resultOf(value);
        this.#m?.operations.add(1, pool, OPERATION[op.kind], result);
        if (span !== undefined) {
          if (isRecording(span)) {
            span.setAttribute('scaler.result', result);
            if (value.kind === 'reserve' && !value.value.ok) {
              span.setAttribute('scaler.limit.dimension', value.value.dimension);
            }
          }
          span.end();
        }
        return value;
      },
      (error: unknown) => {
        const type = errorType(error);
        if (type === 'ERR_LEDGER_LEASE_EXPIRED') {
          // A ledger that cannot name the rows (NATS) lost at least one.
          const named = (error as { agentIds?: readonly string[] }).agentIds?.length ?? 0;
          this.#m?.lost.add(Math.max(1, named), pool);
        }
        this.#m?.operations.add(1, pool, OPERATION[op.kind], 'error', type);
        if (span !== undefined) {
          if (isRecording(span)) failSpan(span, error);
          span.end();
        }
        throw error;
      },
    );
  }

  #span(tracer: OtelTracer, pool: string, op: LedgerOp): OtelSpan {
    // A manager's reserve span, when it handed one over, is the parent.
    const parent = op.kind === 'reserve' ? takeParentSpan(pool, op.row.agentId) : undefined;
    const span = tracer.startSpan(
      `scaler.ledger.${OPERATION[op.kind]}`,
      INTERNAL_SPAN,
      parent === undefined ? undefined : contextWithSpan(parent),
    );
    if (isRecording(span)) {
      span.setAttribute('scaler.pool', pool);
      span.setAttribute('scaler.ledger.backend', this.#backend);
      this.#spans.set(op, span);
    }
    return span;
  }

  /** The monotonic time a lock wait began. */
  lockWaitStart(): number {
    return monotonicNow();
  }

  /** The lock was taken: record the wait (and tell each op's span); returns when. */
  lockAcquired(pool: string, startedAt: number | undefined, ops: readonly LedgerOp[]): number {
    const now = monotonicNow();
    const wait = startedAt === undefined ? 0 : (now - startedAt) / 1000;
    const m = this.#m;
    if (m !== undefined) {
      const totals = m.lock(pool);
      totals.cycles++;
      totals.waitSeconds += wait;
      m.lockWait?.record(wait, totals.attributes);
    }
    if (this.#tracer !== undefined) {
      for (const op of ops) {
        this.#spans
          .get(op)
          ?.addEvent('scaler.ledger.lock.acquired', { 'scaler.ledger.lock.wait': wait });
      }
    }
    return now;
  }

  /** The lock was released: record how long it was held. */
  lockReleased(pool: string, acquiredAt: number | undefined): void {
    const m = this.#m;
    if (acquiredAt === undefined || m === undefined) return;
    const hold = (monotonicNow() - acquiredAt) / 1000;
    const totals = m.lock(pool);
    totals.holdSeconds += hold;
    m.lockHold?.record(hold, totals.attributes);
  }

  /**
   * A commit decided: `cap` and `live` are the document after it, `reaped` the
   * stale rows the written document dropped. (Rows of ours found gone are
   * counted from the `LedgerLeaseExpiredError` a call rejects with.)
   */
  committed(
    pool: string,
    cap: ResourceCap,
    live: readonly ReservationRow[],
    reaped: readonly StaleRow[],
  ): void {
    this.observed(pool, cap, live);
    const m = this.#m;
    if (m !== undefined) {
      for (const stale of reaped) m.reaped.add(1, pool, stale.reason);
    }
  }

  /** A read of the pool: what the usage gauges report from now on. */
  observed(pool: string, cap: ResourceCap, live: readonly ReservationRow[]): void {
    const view = this.#views.get(pool);
    if (view === undefined) {
      this.#views.set(pool, { cap, rows: live, at: monotonicNow() });
    } else {
      view.cap = cap;
      view.rows = live;
      view.at = monotonicNow();
    }
  }

  /** A change of this instance's own lease (see `LeaseEvent`). */
  leaseEvent(type: 'lease-at-risk' | 'lease-lost' | 'lease-renewed'): void {
    this.#m?.leaseEvents.add(1, type);
  }

  /** A compare-and-set lost to another writer. */
  conflict(pool: string): void {
    this.#m?.conflicts.add(1, pool);
  }

  /** Stop the refresh and stop reporting (the instruments stay with the meter). */
  close(): void {
    this.#reader.clock.clearInterval(this.#timer);
    this.#timer = undefined;
    this.#m?.close();
    this.#views.clear();
  }
}

function resultOf(answer: LedgerAnswer): string {
  switch (answer.kind) {
    case 'reserve':
      return answer.value.ok ? 'granted' : 'refused';
    case 'release':
      return answer.value ? 'released' : 'absent';
    default:
      return 'ok';
  }
}
