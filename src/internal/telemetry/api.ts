/**
 * The part of the OpenTelemetry API this library calls, as structural types of
 * its own: `@opentelemetry/api` is an optional peer, never imported at run time,
 * and these declarations keep the published types free of it. A real
 * `MeterProvider` / `TracerProvider` (from `@opentelemetry/api` or an SDK) fits them.
 *
 * The two provider interfaces are public (`scaler-primitives/ledger`) and spell
 * out every shape they use in place, so a user meets no type they cannot name.
 * The names the code uses (`OtelMeter`, `OtelSpan`, ...) are derived from them
 * below, so each shape is declared once.
 */

/**
 * An OpenTelemetry `MeterProvider`, as the `meterProvider` option of
 * `MachineLedger`, `NatsPoolLedger` and `ScalerManager` (its `telemetry` option)
 * takes it: the global one from `metrics.getMeterProvider()` of
 * `@opentelemetry/api`, or an SDK `MeterProvider`, passed as they are. Only
 * this structural part is called, so the package needs no import of the API;
 * a provider that does not fit it is a compile error.
 */
export interface OtelMeterProvider {
  /** Return the meter named after the instrumentation library. */
  getMeter(
    name: string,
    version?: string,
  ): {
    /** A monotonic counter: values (>= 0) are added under attributes. */
    createCounter(
      name: string,
      options?: {
        /** What the instrument measures. */
        description?: string;
        /** The UCUM unit (`s`, `By`, `{cpu}`, `{agent}`). */
        unit?: string;
        /** Advice to the SDK (its views may override it). */
        advice?: {
          /** Histogram bucket boundaries, ascending. */
          explicitBucketBoundaries?: number[];
        };
      },
    ): {
      /** Add `value` (>= 0) under `attributes`. */
      add(value: number, attributes?: Record<string, string | number | boolean | undefined>): void;
    };
    /** A histogram. */
    createHistogram(
      name: string,
      options?: {
        /** What the instrument measures. */
        description?: string;
        /** The UCUM unit (`s`, `By`, `{cpu}`, `{agent}`). */
        unit?: string;
        /** Advice to the SDK (its views may override it). */
        advice?: {
          /** Histogram bucket boundaries, ascending. */
          explicitBucketBoundaries?: number[];
        };
      },
    ): {
      /** Record one measurement under `attributes`. */
      record(
        value: number,
        attributes?: Record<string, string | number | boolean | undefined>,
      ): void;
    };
    /** A gauge read at collection. */
    createObservableGauge(
      name: string,
      options?: {
        /** What the instrument measures. */
        description?: string;
        /** The UCUM unit (`s`, `By`, `{cpu}`, `{agent}`). */
        unit?: string;
        /** Advice to the SDK (its views may override it). */
        advice?: {
          /** Histogram bucket boundaries, ascending. */
          explicitBucketBoundaries?: number[];
        };
      },
    ): {
      /** Add a callback run at each collection. */
      addCallback(
        callback: (result: {
          /** Report one value with its attributes. */
          observe(
            value: number,
            attributes?: Record<string, string | number | boolean | undefined>,
          ): void;
        }) => void | Promise<void>,
      ): void;
      /** Remove a callback added with `addCallback`. */
      removeCallback(
        callback: (result: {
          /** Report one value with its attributes. */
          observe(
            value: number,
            attributes?: Record<string, string | number | boolean | undefined>,
          ): void;
        }) => void | Promise<void>,
      ): void;
    };
    /** A monotonic count read at collection. */
    createObservableCounter(
      name: string,
      options?: {
        /** What the instrument measures. */
        description?: string;
        /** The UCUM unit (`s`, `By`, `{cpu}`, `{agent}`). */
        unit?: string;
        /** Advice to the SDK (its views may override it). */
        advice?: {
          /** Histogram bucket boundaries, ascending. */
          explicitBucketBoundaries?: number[];
        };
      },
    ): {
      /** Add a callback run at each collection. */
      addCallback(
        callback: (result: {
          /** Report one value with its attributes. */
          observe(
            value: number,
            attributes?: Record<string, string | number | boolean | undefined>,
          ): void;
        }) => void | Promise<void>,
      ): void;
      /** Remove a callback added with `addCallback`. */
      removeCallback(
        callback: (result: {
          /** Report one value with its attributes. */
          observe(
            value: number,
            attributes?: Record<string, string | number | boolean | undefined>,
          ): void;
        }) => void | Promise<void>,
      ): void;
    };
    /** An additive count read at collection. */
    createObservableUpDownCounter(
      name: string,
      options?: {
        /** What the instrument measures. */
        description?: string;
        /** The UCUM unit (`s`, `By`, `{cpu}`, `{agent}`). */
        unit?: string;
        /** Advice to the SDK (its views may override it). */
        advice?: {
          /** Histogram bucket boundaries, ascending. */
          explicitBucketBoundaries?: number[];
        };
      },
    ): {
      /** Add a callback run at each collection. */
      addCallback(
        callback: (result: {
          /** Report one value with its attributes. */
          observe(
            value: number,
            attributes?: Record<string, string | number | boolean | undefined>,
          ): void;
        }) => void | Promise<void>,
      ): void;
      /** Remove a callback added with `addCallback`. */
      removeCallback(
        callback: (result: {
          /** Report one value with its attributes. */
          observe(
            value: number,
            attributes?: Record<string, string | number | boolean | undefined>,
          ): void;
        }) => void | Promise<void>,
      ): void;
    };
  };
}

/**
 * An OpenTelemetry `TracerProvider`, as the `tracerProvider` option of
 * `MachineLedger`, `NatsPoolLedger` and `ScalerManager` (its `telemetry` option)
 * takes it: the global one from `trace.getTracerProvider()` of
 * `@opentelemetry/api`, or an SDK tracer provider, passed as they are. Only
 * this structural part is called; a provider that does not fit it is a
 * compile error.
 */
export interface OtelTracerProvider {
  /** Return the tracer named after the instrumentation library. */
  getTracer(
    name: string,
    version?: string,
  ): {
    /** Start a span, a child of the span in `context` (else of the active context). */
    startSpan(
      name: string,
      options?: {
        /** The span kind (0: internal). */
        kind?: number;
        /** Initial attributes. */
        attributes?: Record<string, string | number | boolean | undefined>;
      },
      context?: {
        /** The value under `key`. */
        getValue(key: symbol): unknown;
        /** A copy with `key` set (an OpenTelemetry `Context`). */
        setValue(key: symbol, value: unknown): unknown;
        /** A copy without `key` (an OpenTelemetry `Context`). */
        deleteValue(key: symbol): unknown;
      },
    ): {
      /** Set one attribute. */
      setAttribute(key: string, value: string | number | boolean): unknown;
      /** Add a timestamped event. */
      addEvent(
        name: string,
        attributes?: Record<string, string | number | boolean | undefined>,
      ): unknown;
      /** Set the status: code 0 unset, 1 ok, 2 error (OpenTelemetry `SpanStatusCode`). */
      setStatus(status: {
        /** The status code. */
        code: 0 | 1 | 2;
        /** A message for an error status. */
        message?: string;
      }): unknown;
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
    };
  };
}

// The internal names, derived from the two provider interfaces.

/** The part of an OpenTelemetry `Meter` this library calls. */
export type OtelMeter = ReturnType<OtelMeterProvider['getMeter']>;
/** A counter: something values are added to. */
export type OtelCounter = ReturnType<OtelMeter['createCounter']>;
/** A histogram. */
export type OtelHistogram = ReturnType<OtelMeter['createHistogram']>;
/** An observable instrument (gauge, counter, up-down counter). */
export type OtelObservable = ReturnType<OtelMeter['createObservableGauge']>;
/** Instrument options we pass: description, UCUM unit and bucket advice. */
export type OtelInstrumentOptions = NonNullable<Parameters<OtelMeter['createHistogram']>[1]>;
/** A callback of an observable instrument, called at each collection. */
export type OtelObservableCallback = Parameters<OtelObservable['addCallback']>[0];
/** What an observable callback reports into. */
export type OtelObservableResult = Parameters<OtelObservableCallback>[0];
/** Attribute values we record: strings, numbers and booleans only. */
export type OtelAttributes = NonNullable<Parameters<OtelCounter['add']>[1]>;

/** The part of an OpenTelemetry `Tracer` this library calls. */
export type OtelTracer = ReturnType<OtelTracerProvider['getTracer']>;
/** The part of an OpenTelemetry `Span` this library calls. */
export type OtelSpan = ReturnType<OtelTracer['startSpan']>;
/** Options of `startSpan`: kind (0 internal) and initial attributes. */
export type OtelSpanOptions = NonNullable<Parameters<OtelTracer['startSpan']>[1]>;
/** A span's status: 0 unset, 1 ok, 2 error (OpenTelemetry `SpanStatusCode`). */
export type OtelSpanStatus = Parameters<OtelSpan['setStatus']>[0];

/**
 * An OpenTelemetry `Context` (immutable key-value map), as the library builds
 * it to parent child spans. Its copies are contexts again, where the public
 * `startSpan` parameter only says `unknown`: this type fits that one (a type
 * test checks it), and the tracers' `startSpan` take it.
 */
export interface OtelContext {
  /** The value under `key`. */
  getValue(key: symbol): unknown;
  /** A copy with `key` set. */
  setValue(key: symbol, value: unknown): OtelContext;
  /** A copy without `key`. */
  deleteValue(key: symbol): OtelContext;
}
