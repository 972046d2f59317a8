/**
 * Manager telemetry (OpenTelemetry metrics and spans). Built only when the host
 * passed a provider; the manager otherwise holds `undefined` and each call site
 * is an optional call, so nothing runs and nothing is allocated per request.
 *
 * Gauges are read from the manager's status at collection time (nothing per
 * operation); counters and histograms come from the spawn path and the events
 * the manager already emits. Durations run on the manager's clock, so a
 * `TestClock` drives them as it drives every timing rule.
 */
import {
  contextWithSpan,
  failSpan,
  INTERNAL_SPAN,
  isRecording,
  type OtelContext,
  type OtelMeter,
  type OtelSpan,
  type OtelTracer,
  offerParentSpan,
  resolveProviders,
  type TelemetryOptions,
  withdrawParentSpan,
} from '../../internal/telemetry/index.js';
import type { ReserveResult } from '../../ledger/types.js';
import type { AgentRecord } from '../agents/agents.js';
import type { ScalerEvent } from '../events.js';
import type { ScaleResult } from '../types.js';
import { type ManagerView, observeManager } from './gauges.js';
import { createManagerInstruments, type ManagerInstruments } from './instruments.js';

/** Jobs whose first capacity refusal is remembered, at most (oldest forgotten first). */
const MAX_WAITING_JOBS = 10_000;

/** The telemetry options of `ScalerManager` (its `telemetry` option). @internal */
export interface ManagerTelemetryOptions extends TelemetryOptions {
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
}

/**
 * The telemetry of one manager, or `undefined` when no provider was given.
 * `view` is called lazily (the manager's parts exist by the first use).
 *
 * @throws TypeError for a provider without `getMeter`/`getTracer`, or a
 *   `spawnDurationHistogram` that is not a boolean.
 * @internal
 */
export function createManagerTelemetry(
  options: ManagerTelemetryOptions,
  view: () => ManagerView,
): ManagerTelemetry | undefined {
  const { meter, tracer } = resolveProviders(options);
  const histogram = options.spawnDurationHistogram;
  if (histogram !== undefined && typeof histogram !== 'boolean') {
    throw new TypeError(
      `Expected \`spawnDurationHistogram\` to be a boolean, got \`${histogram === null ? 'null' : typeof histogram}\``,
    );
  }
  if (meter === undefined && tracer === undefined) return undefined;
  return new ManagerTelemetry(meter, tracer, view, histogram === true);
}

/** Instruments and spans of one manager. @internal */
export class ManagerTelemetry {
  readonly #view: () => ManagerView;
  readonly #tracer: OtelTracer | undefined;
  /** The context of each job's open `requestScale` span, parent of its children. */
  readonly #scaleContexts = new Map<string, OtelContext>();
  /** When each job was first refused for capacity (manager clock, ms). */
  readonly #waiting = new Map<string, number>();
  /** Counters and histograms: only with a meter. */
  readonly #m: ManagerInstruments | undefined;

  constructor(
    meter: OtelMeter | undefined,
    tracer: OtelTracer | undefined,
    view: () => ManagerView,
    spawnDurationHistogram: boolean,
  ) {
    this.#view = view;
    this.#tracer = tracer;
    if (meter === undefined) return;
    this.#m = createManagerInstruments(meter, spawnDurationHistogram);
    observeManager(meter, view);
  }

  /** Wrap the host's `onEvent` so the telemetry sees every event first. */
  wrapOnEvent(onEvent: ((event: ScalerEvent) => void) | undefined): (event: ScalerEvent) => void {
    return (event) => {
      try {
        this.#event(event);
      } catch {
        // Telemetry never breaks the manager's books.
      }
      onEvent?.(event);
    };
  }

  #event(event: ScalerEvent): void {
    switch (event.kind) {
      case 'registered': {
        const record = this.#view().core.book.get(event.agentId);
        if (record === undefined || this.#m === undefined) return;
        this.#m.registration.record(
          Math.max(0, event.at - record.spawnedAt) / 1000,
          this.#m.registrationAttributes.get(event.scaler, record.warm),
        );
        return;
      }
      case 'destroyed': {
        const reason = event.data?.reason;
        this.#m?.destroyed.add(1, event.scaler, typeof reason === 'string' ? reason : 'unknown');
        return;
      }
      case 'reservation-lost': {
        this.#m?.lost.add(1, event.scaler, String(event.data?.pool));
        return;
      }
      default:
    }
  }

  /** One `requestScale`: its span (the parent of the reserve and spawn spans) and its answer counted. */
  scale(jobId: string, run: () => Promise<ScaleResult>): Promise<ScaleResult> {
    if (this.#tracer !== undefined) return this.#tracedScale(this.#tracer, jobId, run);
    return run().then(
      (result) => {
        this.#answered(jobId, result);
        return result;
      },
      (error: unknown) => {
        this.#m?.requests.add(1, 'error');
        throw error;
      },
    );
  }

  async #tracedScale(
    tracer: OtelTracer,
    jobId: string,
    run: () => Promise<ScaleResult>,
  ): Promise<ScaleResult> {
    const span = tracer.startSpan('scaler.request_scale', INTERNAL_SPAN);
    const recording = isRecording(span);
    if (recording) span.setAttribute('scaler.job.id', jobId);
    // A second request for a job in flight answers already-spawning: the first span stays the parent.
    // Kept even when not recording: a sampled-out parent keeps its children out too.
    const context = this.#scaleContexts.has(jobId) ? undefined : contextWithSpan(span);
    if (context !== undefined) this.#scaleContexts.set(jobId, context);
    let result: ScaleResult;
    try {
      result = await run();
    } catch (error) {
      if (context !== undefined && this.#scaleContexts.get(jobId) === context) {
        this.#scaleContexts.delete(jobId);
      }
      this.#m?.requests.add(1, 'error');
      if (recording) failSpan(span, error);
      span.end();
      throw error;
    }
    if (context !== undefined && this.#scaleContexts.get(jobId) === context) {
      this.#scaleContexts.delete(jobId);
    }
    this.#answered(jobId, result, recording ? span : undefined);
    span.end();
    return result;
  }

  #answered(jobId: string, result: ScaleResult, span?: OtelSpan): void {
    const kind = result.kind;
    const scaler = 'scaler' in result ? result.scaler : undefined;
    let limit: string | undefined;
    let pool: string | undefined;
    let dimension: string | undefined;
    if ('limit' in result) {
      const refused = result.limit;
      limit = refused.limit;
      if ('pool' in refused) pool = refused.pool;
      if ('dimension' in refused && refused.dimension !== undefined) {
        dimension = String(refused.dimension);
      }
    } else if (kind === 'backing-off') {
      limit = 'backing-off';
    }
    const m = this.#m;
    if (m !== undefined) {
      m.requests.add(1, kind, scaler, limit, pool, dimension);
      this.#waited(m, jobId, result);
    }
    if (span === undefined) return;
    span.setAttribute('scaler.result', kind);
    if (scaler !== undefined) span.setAttribute('scaler.name', scaler);
    if (limit !== undefined) span.setAttribute('scaler.limit', limit);
    if (pool !== undefined) span.setAttribute('scaler.pool', pool);
    if (dimension !== undefined) span.setAttribute('scaler.limit.dimension', dimension);
    if (result.kind === 'spawned' || result.kind === 'spawn-failed') {
      span.setAttribute('scaler.agent.id', result.agentId);
    }
    if (result.kind === 'spawn-failed') {
      span.setAttribute('scaler.stage', result.stage);
      failSpan(span, result.error);
    }
  }

  /** Job wait: remember a job's first capacity refusal, record the wait when it spawns. */
  #waited(m: ManagerInstruments, jobId: string, result: ScaleResult): void {
    if (result.kind === 'at-capacity' || result.kind === 'backing-off') {
      if (!this.#waiting.has(jobId)) {
        if (this.#waiting.size >= MAX_WAITING_JOBS) {
          this.#waiting.delete(this.#waiting.keys().next().value!);
        }
        this.#waiting.set(jobId, this.#view().core.now());
      }
    } else if (result.kind === 'spawned') {
      // Only jobs that were refused first: a job spawned at its first request did not wait.
      const since = this.#waiting.get(jobId);
      if (since !== undefined) {
        this.#waiting.delete(jobId);
        const now = this.#view().core.now();
        m.jobWait.record(Math.max(0, now - since) / 1000, m.waitAttributes.get(result.scaler));
      }
    } else if (result.kind !== 'already-spawning') {
      this.#waiting.delete(jobId);
    }
  }

  /** A child span of the job's `requestScale` span (a root for warm-pool spawns). */
  #child(tracer: OtelTracer, name: string, record: AgentRecord): OtelSpan {
    const parent = record.jobId === undefined ? undefined : this.#scaleContexts.get(record.jobId);
    const span = tracer.startSpan(name, INTERNAL_SPAN, parent);
    if (isRecording(span)) {
      span.setAttribute('scaler.name', record.scaler.name);
      span.setAttribute('scaler.agent.id', record.agentId);
      span.setAttribute('scaler.warm', record.warm);
    }
    return span;
  }

  /** The pool reservation of a spawn: its span, handed to the ledger as the parent of its own. */
  async reserve(
    record: AgentRecord,
    pool: string,
    run: () => Promise<ReserveResult>,
  ): Promise<ReserveResult> {
    const span =
      this.#tracer === undefined
        ? undefined
        : this.#child(this.#tracer, 'scaler.pool.reserve', record);
    const recording = span !== undefined && isRecording(span);
    if (recording) span.setAttribute('scaler.pool', pool);
    let call: Promise<ReserveResult>;
    if (span === undefined) {
      call = run();
    } else {
      // Offered even when not recording, so the ledger's span follows its sampling.
      offerParentSpan(pool, record.agentId, span);
      try {
        call = run();
      } finally {
        withdrawParentSpan(pool, record.agentId);
      }
    }
    let granted: ReserveResult;
    try {
      granted = await call;
    } catch (error) {
      this.#m?.spawns.add(1, record.scaler.name, record.warm, 'reserve');
      if (recording) failSpan(span, error);
      span?.end();
      throw error;
    }
    if (recording) {
      span.setAttribute('scaler.result', granted.ok ? 'granted' : 'refused');
      if (!granted.ok) span.setAttribute('scaler.limit.dimension', granted.dimension);
    }
    span?.end();
    return granted;
  }

  /** The backend's spawn call: its span, its outcome counted, its duration when recorded. */
  spawn<T>(record: AgentRecord, run: () => T): Promise<Awaited<T>> {
    if (this.#tracer !== undefined || this.#m?.spawnDuration !== undefined) {
      return this.#timedSpawn(record, run);
    }
    // Counted only: no async frame of its own (it showed in the allocation per request).
    let call: Promise<Awaited<T>>;
    try {
      call = Promise.resolve(run());
    } catch (error) {
      this.#spawned(record, 'spawn', 0);
      return Promise.reject(error);
    }
    return call.then(
      (result) => {
        this.#spawned(record, undefined, 0);
        return result;
      },
      (error: unknown) => {
        this.#spawned(record, 'spawn', 0);
        throw error;
      },
    );
  }

  async #timedSpawn<T>(record: AgentRecord, run: () => T): Promise<Awaited<T>> {
    const span =
      this.#tracer === undefined
        ? undefined
        : this.#child(this.#tracer, 'scaler.backend.spawn', record);
    const started = this.#m?.spawnDuration !== undefined ? this.#view().core.now() : 0;
    let result: Awaited<T>;
    try {
      result = await run();
    } catch (error) {
      this.#spawned(record, 'spawn', started);
      if (span !== undefined) {
        if (isRecording(span)) failSpan(span, error);
        span.end();
      }
      throw error;
    }
    this.#spawned(record, undefined, started);
    span?.end();
    return result;
  }

  #spawned(record: AgentRecord, failed: 'spawn' | undefined, started: number): void {
    const m = this.#m;
    if (m === undefined) return;
    m.spawns.add(1, record.scaler.name, record.warm, failed);
    if (m.spawnDuration !== undefined) {
      m.spawnDuration.record(
        (this.#view().core.now() - started) / 1000,
        m.spawnAttributes.get(record.scaler.name, record.warm, failed),
      );
    }
  }
}
