/**
 * Telemetry shared by the instrumented modules: the structural OpenTelemetry
 * types, option checks, the instrumentation scope, and small helpers. A leaf:
 * imports only `errors`. Nothing here runs unless a provider was passed.
 */
import type {
  OtelAttributes,
  OtelMeter,
  OtelMeterProvider,
  OtelSpan,
  OtelSpanOptions,
  OtelTracer,
  OtelTracerProvider,
} from './api.js';

export type * from './api.js';
export { contextWithSpan, SPAN_KEY } from './context.js';

/** The instrumentation scope: meters and tracers are named after the package. */
export const INSTRUMENTATION_NAME = 'scaler-primitives';
/**
 * The package version, the instrumentation scope's version (a test keeps it
 * equal to package.json's; importing that file would ship all of it).
 */
export const INSTRUMENTATION_VERSION = '0.1.0';

/** Span status code of an error (OpenTelemetry `SpanStatusCode.ERROR`). */
export const STATUS_ERROR = 2;

/** Histogram boundaries in seconds for lock waits and holds (1 ms to 30 s). */
export const LOCK_BUCKETS = [
  0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30,
];
/** Histogram boundaries in seconds for spawns and waits (10 ms to 30 min). */
export const SLOW_BUCKETS = [
  0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800,
];

/**
 * The two provider options, as the internal helpers take them. The public
 * option interfaces (`LedgerTelemetryOptions`, the manager's `telemetry`)
 * declare the same two keys with their documentation.
 */
export interface TelemetryOptions {
  /** See `LedgerTelemetryOptions.meterProvider`. */
  meterProvider?: OtelMeterProvider;
  /** See `LedgerTelemetryOptions.tracerProvider`. */
  tracerProvider?: OtelTracerProvider;
}

/** The option keys of {@link TelemetryOptions}, for strict option checks. */
export const TELEMETRY_OPTION_KEYS = ['meterProvider', 'tracerProvider'] as const;

/**
 * The meter and tracer of the given providers, checked; both `undefined` when
 * neither was given (the caller then builds no telemetry at all).
 *
 * @throws TypeError when a provider lacks `getMeter` / `getTracer`.
 */
export function resolveProviders(options: TelemetryOptions): {
  meter: OtelMeter | undefined;
  tracer: OtelTracer | undefined;
} {
  checkProviders(options);
  const { meterProvider, tracerProvider } = options;
  return {
    meter: meterProvider?.getMeter(INSTRUMENTATION_NAME, INSTRUMENTATION_VERSION),
    tracer: tracerProvider?.getTracer(INSTRUMENTATION_NAME, INSTRUMENTATION_VERSION),
  };
}

/**
 * Check the provider options without using them.
 *
 * @throws TypeError when a provider lacks `getMeter` / `getTracer`.
 */
export function checkProviders(options: TelemetryOptions): void {
  const { meterProvider, tracerProvider } = options;
  if (meterProvider !== undefined && typeof meterProvider?.getMeter !== 'function') {
    throw new TypeError(
      `Expected \`meterProvider\` to be an OpenTelemetry MeterProvider (an object with getMeter()), got \`${describe(meterProvider)}\``,
    );
  }
  if (tracerProvider !== undefined && typeof tracerProvider?.getTracer !== 'function') {
    throw new TypeError(
      `Expected \`tracerProvider\` to be an OpenTelemetry TracerProvider (an object with getTracer()), got \`${describe(tracerProvider)}\``,
    );
  }
}

function describe(value: unknown): string {
  return value === null ? 'null' : typeof value;
}

/** The low-cardinality `error.type` of an error: its stable `code`, else its class name. */
export function errorType(error: unknown): string {
  if (typeof error === 'object' && error !== null) {
    const code = (error as { code?: unknown }).code;
    if (typeof code === 'string' && code.length <= 64) return code;
    const name = (error as { name?: unknown }).name;
    if (typeof name === 'string' && name.length <= 64) return name;
  }
  return '_OTHER';
}

/** Mark a span failed with `error`: the exception event and an error status. */
export function failSpan(span: OtelSpan, error: unknown): void {
  const exception = error instanceof Error ? error : String(error);
  span.recordException(exception);
  span.setStatus({
    code: STATUS_ERROR,
    message: error instanceof Error ? error.message : String(error),
  });
  span.setAttribute('error.type', errorType(error));
}

/** Options of an internal span with no attributes at start (they are set once it is known to record). */
export const INTERNAL_SPAN: OtelSpanOptions = Object.freeze({ kind: 0 });

/** Whether `span` records: the API's `isRecording()`, true for a span without it. */
export function isRecording(span: OtelSpan): boolean {
  return span.isRecording?.() !== false;
}

/** Copy attributes, leaving out undefined values (an SDK warns on them). */
export function attributes(input: OtelAttributes): OtelAttributes {
  const out: OtelAttributes = {};
  for (const [key, value] of Object.entries(input)) if (value !== undefined) out[key] = value;
  return out;
}
export { offerParentSpan, takeParentSpan, withdrawParentSpan } from './handoff.js';
export { KeyedCache, type KeyMaker, type KeyPart, Tally } from './tally.js';
