/**
 * Parent a span without `@opentelemetry/api` at run time. The API keeps the
 * current span in a `Context` under the key `Symbol.for('OpenTelemetry Context
 * Key SPAN')` (a registry symbol, so every copy of the API agrees on it), and
 * SDK tracers read the parent from the context passed to `startSpan`. This is
 * the API's immutable `BaseContext`, small enough to keep here.
 */
import type { OtelContext, OtelSpan } from './api.js';

/** The key the OpenTelemetry API stores the current span under. */
export const SPAN_KEY: symbol = Symbol.for('OpenTelemetry Context Key SPAN');

class TraceContext implements OtelContext {
  readonly #values: ReadonlyMap<symbol, unknown>;

  constructor(values: ReadonlyMap<symbol, unknown>) {
    this.#values = values;
  }

  getValue(key: symbol): unknown {
    return this.#values.get(key);
  }

  setValue(key: symbol, value: unknown): OtelContext {
    const values = new Map(this.#values);
    values.set(key, value);
    return new TraceContext(values);
  }

  deleteValue(key: symbol): OtelContext {
    const values = new Map(this.#values);
    values.delete(key);
    return new TraceContext(values);
  }
}

/** A context holding only the current span: one object, no map (built once per parent). */
class SpanContext implements OtelContext {
  readonly #span: OtelSpan;

  constructor(span: OtelSpan) {
    this.#span = span;
  }

  getValue(key: symbol): unknown {
    return key === SPAN_KEY ? this.#span : undefined;
  }

  setValue(key: symbol, value: unknown): OtelContext {
    return new TraceContext(new Map<symbol, unknown>([[SPAN_KEY, this.#span]])).setValue(
      key,
      value,
    );
  }

  deleteValue(key: symbol): OtelContext {
    return key === SPAN_KEY ? new TraceContext(new Map()) : this;
  }
}

/** A context whose current span is `span`: pass it to `startSpan` to make a child. */
export function contextWithSpan(span: OtelSpan): OtelContext {
  return new SpanContext(span);
}
