/**
 * The real OpenTelemetry SDKs wired to in-memory exporters: a MeterProvider whose
 * metrics a test collects on demand, and a tracer provider whose finished spans
 * it reads.
 */
import {
  AggregationTemporality,
  type DataPoint,
  type Histogram,
  InMemoryMetricExporter,
  MeterProvider,
  type MetricData,
  PeriodicExportingMetricReader,
} from '@opentelemetry/sdk-metrics';
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  type ReadableSpan,
  SimpleSpanProcessor,
} from '@opentelemetry/sdk-trace-base';

/** One point of a metric: its attributes and value (a histogram's is its summary). */
export interface Point {
  attributes: Record<string, unknown>;
  value: number | Histogram;
}

/** A MeterProvider with an in-memory exporter, collected on demand. */
export class MetricsHarness {
  readonly exporter = new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE);
  readonly reader = new PeriodicExportingMetricReader({
    exporter: this.exporter,
    exportIntervalMillis: 3_600_000,
  });
  readonly provider = new MeterProvider({ readers: [this.reader] });

  /** Collect now: every metric the provider holds, by name. */
  async collect(): Promise<Map<string, MetricData>> {
    this.exporter.reset();
    await this.reader.forceFlush();
    const out = new Map<string, MetricData>();
    for (const resource of this.exporter.getMetrics()) {
      for (const scope of resource.scopeMetrics) {
        for (const metric of scope.metrics) out.set(metric.descriptor.name, metric);
      }
    }
    return out;
  }

  async shutdown(): Promise<void> {
    await this.provider.shutdown();
  }
}

/** The points of `name` in a collection (empty when absent). */
export function points(metrics: Map<string, MetricData>, name: string): Point[] {
  const metric = metrics.get(name);
  if (metric === undefined) return [];
  return (metric.dataPoints as DataPoint<number | Histogram>[]).map((p) => ({
    attributes: { ...p.attributes },
    value: p.value,
  }));
}

/** The value of the point of `name` whose attributes include `match`. */
export function pointValue(
  metrics: Map<string, MetricData>,
  name: string,
  match: Record<string, unknown> = {},
): number | Histogram | undefined {
  return points(metrics, name).find((p) =>
    Object.entries(match).every(([k, v]) => p.attributes[k] === v),
  )?.value;
}

/** A tracer provider recording into memory. */
export class TracesHarness {
  readonly exporter = new InMemorySpanExporter();
  readonly provider = new BasicTracerProvider({
    spanProcessors: [new SimpleSpanProcessor(this.exporter)],
  });

  spans(): ReadableSpan[] {
    return this.exporter.getFinishedSpans();
  }

  named(name: string): ReadableSpan[] {
    return this.spans().filter((s) => s.name === name);
  }

  /** The parent span id of a span (SDK 2.x: `parentSpanContext`). */
  parentOf(span: ReadableSpan): string | undefined {
    return span.parentSpanContext?.spanId;
  }

  async shutdown(): Promise<void> {
    await this.provider.shutdown();
  }
}
