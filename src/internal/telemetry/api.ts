/**
 * The part of the OpenTelemetry API this library calls, as structural types of
 * its own: `@opentelemetry/api` is an optional peer, never imported at run time,
 * and these declarations keep the published types free of it. A real
 * `MeterProvider` / `TracerProvider` (from `@opentelemetry/api` or an SDK) fits them.
 */

/** Attribute values we record: strings, numbers and booleans only. */
export type OtelAttributes = Record<string, string | number | boolean | undefined>;

/** What an observable callback reports into. */
export interface OtelObservableResult {
  /** Report one value with its attributes. */
  observe(value: number, attributes?: OtelAttributes): void;
}

/** A callback of an observable instrument, called at each collection. */
export type OtelObservableCallback = (result: OtelObservableResult) => void | Promise<void>;

/** An observable instrument (gauge, up-down counter). */
export interface OtelObservable {
  /** Add a callback run at each collection. */
  addCallback(callback: OtelObservableCallback): void;
  /** Remove a callback added with `addCallback`. */
  removeCallback(callback: OtelObservableCallback): void;
}

/** A counter or a histogram: something values are recorded into. */
export interface OtelCounter {
  /** Add `value` (>= 0) under `attributes`. */
  add(value: number, attributes?: OtelAttributes): void;
}

/** A histogram. */
export interface OtelHistogram {
  /** Record one measurement under `attributes`. */
  record(value: number, attributes?: OtelAttributes): void;
}

/** Instrument options we pass: description and UCUM unit. */
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

/** The part of an OpenTelemetry `Meter` this library calls. */
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
 */
export interface OtelMeterProvider {
  /** Return the meter named after the instrumentation library. */
  getMeter(name: string, version?: string): OtelMeter;
}

/** A span's status: 0 unset, 1 ok, 2 error (OpenTelemetry `SpanStatusCode`). */
export interface OtelSpanStatus {
  /** The status code. */
  code: 0 | 1 | 2;
  /** A message for an error status. */
  message?: string;
}

/** The part of an OpenTelemetry `Span` this library calls. */
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

/** Options of `startSpan`: kind (0 internal) and initial attributes. */
export interface OtelSpanOptions {
  /** The span kind (0: internal). */
  kind?: number;
  /** Initial attributes. */
  attributes?: OtelAttributes;
}

/**
 * An OpenTelemetry `Context` (immutable key-value map). The library builds its
 * own to parent child spans, so it never needs the API's context functions.
 */
export interface OtelContext {
  /** The value under `key`. */
  getValue(key: symbol): unknown;
  /** A copy with `key` set. */
  setValue(key: symbol, value: unknown): OtelContext;
  /** A copy without `key`. */
  deleteValue(key: symbol): OtelContext;
}

/** The part of an OpenTelemetry `Tracer` this library calls. */
export interface OtelTracer {
  /** Start a span, a child of the span in `context` (else of the active context). */
  startSpan(name: string, options?: OtelSpanOptions, context?: OtelContext): OtelSpan;
}

/**
 * An OpenTelemetry `TracerProvider` (the `tracerProvider` option): the global one
 * from `trace.getTracerProvider()` of `@opentelemetry/api`, or an SDK provider.
 */
export interface OtelTracerProvider {
  /** Return the tracer named after the instrumentation library. */
  getTracer(name: string, version?: string): OtelTracer;
}
