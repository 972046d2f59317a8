/**
 * The part of the OpenTelemetry API this library calls, as structural types of
 * its own: `@opentelemetry/api` is an optional peer, never imported at run time,
 * and these declarations keep the published types free of it. A real
 * `MeterProvider` / `TracerProvider` (from `@opentelemetry/api` or an SDK) fits them.
 */

/**
 * Attribute values we record: strings, numbers and booleans only.
 *
 * @example
 * ```ts
 * import type { OtelAttributes, OtelCounter } from 'scaler-primitives/ledger';
 *
 * declare const spawned: OtelCounter;
 * const attributes: OtelAttributes = { pool: 'build-host', warm: true, cpus: 2 };
 * spawned.add(1, attributes);
 * ```
 */
export type OtelAttributes = Record<string, string | number | boolean | undefined>;

/**
 * What an observable callback reports into.
 *
 * @example
 * ```ts
 * import type { OtelMeter, OtelObservableResult } from 'scaler-primitives/ledger';
 *
 * declare const meter: OtelMeter;
 * meter.createObservableGauge('ci.queue.depth').addCallback((result: OtelObservableResult) => {
 *   result.observe(12, { queue: 'linux' });
 * });
 * ```
 */
export interface OtelObservableResult {
  /** Report one value with its attributes. */
  observe(value: number, attributes?: OtelAttributes): void;
}

/**
 * A callback of an observable instrument, called at each collection.
 *
 * @example
 * ```ts
 * import type { OtelObservable, OtelObservableCallback } from 'scaler-primitives/ledger';
 *
 * declare const gauge: OtelObservable;
 * const report: OtelObservableCallback = (result) => result.observe(3, { pool: 'build-host' });
 * gauge.addCallback(report);
 * gauge.removeCallback(report); // on shutdown
 * ```
 */
export type OtelObservableCallback = (result: OtelObservableResult) => void | Promise<void>;

/**
 * An observable instrument (gauge, up-down counter).
 *
 * @example
 * ```ts
 * import type { OtelMeter, OtelObservable } from 'scaler-primitives/ledger';
 *
 * declare const meter: OtelMeter;
 * const idle: OtelObservable = meter.createObservableUpDownCounter('ci.agents.idle', { unit: '{agent}' });
 * idle.addCallback((result) => result.observe(4));
 * ```
 */
export interface OtelObservable {
  /** Add a callback run at each collection. */
  addCallback(callback: OtelObservableCallback): void;
  /** Remove a callback added with `addCallback`. */
  removeCallback(callback: OtelObservableCallback): void;
}

/**
 * A counter or a histogram: something values are recorded into.
 *
 * @example
 * ```ts
 * import type { OtelCounter, OtelMeter } from 'scaler-primitives/ledger';
 *
 * declare const meter: OtelMeter;
 * const refused: OtelCounter = meter.createCounter('ci.reservations.refused', { unit: '{reservation}' });
 * refused.add(1, { pool: 'build-host', dimension: 'cpu' });
 * ```
 */
export interface OtelCounter {
  /** Add `value` (>= 0) under `attributes`. */
  add(value: number, attributes?: OtelAttributes): void;
}

/**
 * A histogram.
 *
 * @example
 * ```ts
 * import type { OtelHistogram, OtelMeter } from 'scaler-primitives/ledger';
 *
 * declare const meter: OtelMeter;
 * const startup: OtelHistogram = meter.createHistogram('ci.agent.startup', { unit: 's' });
 * startup.record(41.5, { pool: 'build-host' });
 * ```
 */
export interface OtelHistogram {
  /** Record one measurement under `attributes`. */
  record(value: number, attributes?: OtelAttributes): void;
}

/**
 * Instrument options we pass: description and UCUM unit.
 *
 * @example
 * ```ts
 * import type { OtelInstrumentOptions, OtelMeter } from 'scaler-primitives/ledger';
 *
 * declare const meter: OtelMeter;
 * const options: OtelInstrumentOptions = {
 *   description: 'Time from spawn to registration',
 *   unit: 's',
 *   advice: { explicitBucketBoundaries: [1, 5, 15, 30, 60, 120] },
 * };
 * meter.createHistogram('ci.agent.startup', options);
 * ```
 */
export interface OtelInstrumentOptions {
  /** What the instrument measures. */
  description?: string;
  /** The UCUM unit (`s`, `By`, `{cpu}`, `{agent}`). */
  unit?: string;
  /** Histogram bucket boundaries we suggest (the SDK's views may override them). */
  advice?: {
    /** Histogram bucket boundaries, ascending. */
    explicitBucketBoundaries?: number[];
  };
}

/**
 * The part of an OpenTelemetry `Meter` this library calls.
 *
 * @example
 * ```ts
 * import { metrics } from '@opentelemetry/api';
 * import type { OtelMeter } from 'scaler-primitives/ledger';
 *
 * // Any @opentelemetry/api Meter fits: the library only calls these five methods.
 * const meter: OtelMeter = metrics.getMeter('my-orchestrator');
 * meter.createCounter('ci.jobs.started').add(1);
 * ```
 */
export interface OtelMeter {
  /** A monotonic counter. */
  createCounter(name: string, options?: OtelInstrumentOptions): OtelCounter;
  /** A histogram. */
  createHistogram(name: string, options?: OtelInstrumentOptions): OtelHistogram;
  /** A gauge read at collection. */
  createObservableGauge(name: string, options?: OtelInstrumentOptions): OtelObservable;
  /** A monotonic count read at collection. */
  createObservableCounter(name: string, options?: OtelInstrumentOptions): OtelObservable;
  /** An additive count read at collection. */
  createObservableUpDownCounter(name: string, options?: OtelInstrumentOptions): OtelObservable;
}

/**
 * An OpenTelemetry `MeterProvider` (the `meterProvider` option of `ScalerManager`,
 * `MachineLedger` and `NatsPoolLedger`): the global one from
 * `metrics.getMeterProvider()` of `@opentelemetry/api`, or an SDK `MeterProvider`.
 * Only this structural part is used, so the package needs no import of the API.
 *
 * @example
 * ```ts
 * import { type BackendEntry, type ScalerConfigInput, ScalerManager } from 'scaler-primitives/manager';
 * import type { OtelMeterProvider } from 'scaler-primitives/ledger';
 * import { metrics } from '@opentelemetry/api';
 *
 * declare const config: ScalerConfigInput;
 * declare const backends: BackendEntry[];
 * const meterProvider: OtelMeterProvider = metrics.getMeterProvider();
 * const manager = new ScalerManager({ config, backends, meterProvider });
 * ```
 */
export interface OtelMeterProvider {
  /** Return the meter named after the instrumentation library. */
  getMeter(name: string, version?: string): OtelMeter;
}

/**
 * A span's status: 0 unset, 1 ok, 2 error (OpenTelemetry `SpanStatusCode`).
 *
 * @example
 * ```ts
 * import type { OtelSpan, OtelSpanStatus } from 'scaler-primitives/ledger';
 *
 * declare const span: OtelSpan;
 * const failed: OtelSpanStatus = { code: 2, message: 'spawn timed out' }; // SpanStatusCode.ERROR
 * span.setStatus(failed);
 * span.end();
 * ```
 */
export interface OtelSpanStatus {
  /** The status code. */
  code: 0 | 1 | 2;
  /** A message for an error status. */
  message?: string;
}

/**
 * The part of an OpenTelemetry `Span` this library calls.
 *
 * @example
 * ```ts
 * import type { OtelSpan, OtelTracer } from 'scaler-primitives/ledger';
 *
 * declare const tracer: OtelTracer;
 * const span: OtelSpan = tracer.startSpan('spawn agent');
 * span.setAttribute('ci.pool', 'build-host');
 * span.addEvent('registered', { agent: 'agent-42' });
 * span.end();
 * ```
 */
export interface OtelSpan {
  /** Set one attribute. */
  setAttribute(key: string, value: string | number | boolean): unknown;
  /** Add a timestamped event. */
  addEvent(name: string, attributes?: OtelAttributes): unknown;
  /** Set the status. */
  setStatus(status: OtelSpanStatus): unknown;
  /** Record an exception as an event. */
  recordException(exception: Error | string): void;
  /** End the span. */
  end(): void;
  /**
   * Whether the span records what is set on it (false for a sampled-out or
   * noop span: the library then builds no attributes for it). Taken as true
   * when absent.
   */
  isRecording?(): boolean;
}

/**
 * Options of `startSpan`: kind (0 internal) and initial attributes.
 *
 * @example
 * ```ts
 * import type { OtelSpanOptions, OtelTracer } from 'scaler-primitives/ledger';
 *
 * declare const tracer: OtelTracer;
 * const options: OtelSpanOptions = { kind: 0, attributes: { 'ci.pool': 'build-host', 'ci.job': 'job-7' } };
 * tracer.startSpan('reserve', options).end();
 * ```
 */
export interface OtelSpanOptions {
  /** The span kind (0: internal). */
  kind?: number;
  /** Initial attributes. */
  attributes?: OtelAttributes;
}

/**
 * An OpenTelemetry `Context` (immutable key-value map). The library builds its
 * own to parent child spans, so it never needs the API's context functions.
 *
 * @example
 * ```ts
 * import { context } from '@opentelemetry/api';
 * import type { OtelContext, OtelTracer } from 'scaler-primitives/ledger';
 *
 * declare const tracer: OtelTracer;
 * // Any @opentelemetry/api Context fits: parent a span under the active one.
 * const parent: OtelContext = context.active();
 * tracer.startSpan('release', {}, parent).end();
 * ```
 */
export interface OtelContext {
  /** The value under `key`. */
  getValue(key: symbol): unknown;
  /** A copy with `key` set. */
  setValue(key: symbol, value: unknown): OtelContext;
  /** A copy without `key`. */
  deleteValue(key: symbol): OtelContext;
}

/**
 * The part of an OpenTelemetry `Tracer` this library calls.
 *
 * @example
 * ```ts
 * import { trace } from '@opentelemetry/api';
 * import type { OtelTracer } from 'scaler-primitives/ledger';
 *
 * // Any @opentelemetry/api Tracer fits: the library only calls startSpan.
 * const tracer: OtelTracer = trace.getTracer('my-orchestrator');
 * tracer.startSpan('dispatch').end();
 * ```
 */
export interface OtelTracer {
  /** Start a span, a child of the span in `context` (else of the active context). */
  startSpan(name: string, options?: OtelSpanOptions, context?: OtelContext): OtelSpan;
}

/**
 * An OpenTelemetry `TracerProvider` (the `tracerProvider` option): the global one
 * from `trace.getTracerProvider()` of `@opentelemetry/api`, or an SDK provider.
 *
 * @example
 * ```ts
 * import { type BackendEntry, type ScalerConfigInput, ScalerManager } from 'scaler-primitives/manager';
 * import type { OtelTracerProvider } from 'scaler-primitives/ledger';
 * import { trace } from '@opentelemetry/api';
 *
 * declare const config: ScalerConfigInput;
 * declare const backends: BackendEntry[];
 * const tracerProvider: OtelTracerProvider = trace.getTracerProvider();
 * const manager = new ScalerManager({ config, backends, tracerProvider });
 * ```
 */
export interface OtelTracerProvider {
  /** Return the tracer named after the instrumentation library. */
  getTracer(name: string, version?: string): OtelTracer;
}
