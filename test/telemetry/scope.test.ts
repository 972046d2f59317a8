import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { metrics, trace } from '@opentelemetry/api';
import type { OtelMeterProvider, OtelTracerProvider } from 'scaler-primitives/ledger';
import { describe, expect, expectTypeOf, it } from 'vitest';
import {
  INSTRUMENTATION_NAME,
  INSTRUMENTATION_VERSION,
  type OtelContext,
  type OtelTracer,
} from '../../src/internal/telemetry/index.js';
import { MetricsHarness, TracesHarness } from '../helpers/otel.js';

describe('the instrumentation scope', () => {
  it('is the package name and version', () => {
    const pkg = JSON.parse(readFileSync(join(import.meta.dirname, '../../package.json'), 'utf8'));
    expect(INSTRUMENTATION_NAME).toBe(pkg.name);
    expect(INSTRUMENTATION_VERSION).toBe(pkg.version);
  });

  it("accepts the API's global providers and the SDK's as they are (compile-time fit)", async () => {
    const m = new MetricsHarness();
    const t = new TracesHarness();
    // These assignments are the test: they stop compiling if our structural
    // types stop fitting the real ones.
    const providers: Array<[OtelMeterProvider, OtelTracerProvider]> = [
      [metrics.getMeterProvider(), trace.getTracerProvider()],
      [m.provider, t.provider],
    ];
    for (const [meterProvider, tracerProvider] of providers) {
      expect(typeof meterProvider.getMeter(INSTRUMENTATION_NAME).createCounter).toBe('function');
      expect(typeof tracerProvider.getTracer(INSTRUMENTATION_NAME).startSpan).toBe('function');
    }
    await m.shutdown();
    await t.shutdown();
  });

  it('refuses a provider of the wrong shape (compile-time, through the public names)', () => {
    const meter = { createCounter: () => ({ add: (_value: number) => {} }) };
    const tracer = { startSpan: () => ({ end: () => {} }) };
    // @ts-expect-error a meter without histograms and observables is not a MeterProvider's.
    const badMeterProvider: OtelMeterProvider = { getMeter: () => meter };
    // @ts-expect-error a span without setAttribute, setStatus, ... is not a TracerProvider's.
    const badTracerProvider: OtelTracerProvider = { getTracer: () => tracer };
    expect(typeof badMeterProvider.getMeter).toBe('function');
    expect(typeof badTracerProvider.getTracer).toBe('function');
  });

  it("the library's own Context fits what a tracer's startSpan takes (compile-time)", () => {
    expectTypeOf<OtelContext>().toExtend<NonNullable<Parameters<OtelTracer['startSpan']>[2]>>();
  });
});
