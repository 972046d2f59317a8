import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { metrics, trace } from '@opentelemetry/api';
import { describe, expect, it } from 'vitest';
import {
  INSTRUMENTATION_NAME,
  INSTRUMENTATION_VERSION,
  type OtelMeterProvider,
  type OtelTracerProvider,
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
});
