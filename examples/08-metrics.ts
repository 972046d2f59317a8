/**
 * OpenTelemetry metrics and spans from a short scenario: a manager with one
 * scaler on a machine pool (file ledger in a throwaway directory), three jobs
 * for a pool that fits two, a backend failure, then one collection printed by
 * the SDK's ConsoleMetricExporter and the span tree of the first request.
 *
 * Run: npx tsx examples/08-metrics.ts
 * Needs the optional peer `@opentelemetry/api` plus `@opentelemetry/sdk-metrics`
 * and `@opentelemetry/sdk-trace-base` (the library itself imports none of them).
 * For Prometheus, swap the reader for `new PrometheusExporter({ port: 9464 })`
 * from `@opentelemetry/exporter-prometheus` (docs/observability.md).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  AggregationTemporality,
  ConsoleMetricExporter,
  MeterProvider,
  PeriodicExportingMetricReader,
  type PushMetricExporter,
} from '@opentelemetry/sdk-metrics';
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  SimpleSpanProcessor,
} from '@opentelemetry/sdk-trace-base';
import { MachineLedger } from 'scaler-primitives/ledger';
import { ScalerManager } from 'scaler-primitives/manager';

// The console exporter prints each collection; this prints only the one we ask for.
const console_ = new ConsoleMetricExporter({
  temporalitySelector: () => AggregationTemporality.CUMULATIVE,
});
let print = false;
const exporter: PushMetricExporter = {
  export: (metrics, done) => (print ? console_.export(metrics, done) : done({ code: 0 })),
  forceFlush: () => console_.forceFlush(),
  shutdown: () => console_.shutdown(),
  selectAggregationTemporality: () => AggregationTemporality.CUMULATIVE,
};
const reader = new PeriodicExportingMetricReader({
  exporter,
  exportIntervalMillis: 3_600_000, // we collect once, by hand
});
const meterProvider = new MeterProvider({ readers: [reader] });
const spans = new InMemorySpanExporter();
const tracerProvider = new BasicTracerProvider({
  spanProcessors: [new SimpleSpanProcessor(spans)],
});

const dir = mkdtempSync(join(tmpdir(), 'metrics-example-'));
const ledger = new MachineLedger({ instanceId: 'example', dir, meterProvider, tracerProvider });

let failNext = false;
const backend = {
  async spawn() {
    await new Promise((resolve) => setTimeout(resolve, 20)); // a quick "VM"
    if (failNext) {
      failNext = false;
      throw new Error('cloud API: quota exceeded');
    }
  },
  async destroy() {},
};

const manager = new ScalerManager({
  config: {
    globalMaxAgents: 10,
    machinePools: { 'build-host': { maxCpu: 4, maxMemory: '8Gi' } },
    scalers: [
      {
        name: 'vm',
        type: 'firecracker',
        maxAgents: 5,
        machinePool: 'build-host',
        labelSets: [{ labels: ['linux'], resources: { cpus: 2, memory: '2Gi' } }],
      },
    ],
  },
  backends: [{ name: 'vm', backend }],
  ledgers: { 'build-host': ledger },
  // spawnDurationHistogram is opt-in: one histogram record per spawn (docs/observability.md)
  telemetry: { meterProvider, tracerProvider, spawnDurationHistogram: true },
});

for (const job of ['job-1', 'job-2', 'job-3']) {
  const result = await manager.requestScale({ jobId: job, labels: ['linux'] });
  console.log(`${job}: ${result.kind}${'agentId' in result ? ` (${result.agentId})` : ''}`);
}
const agents = manager.getStatus().scalers[0]!;
console.log(`vm: ${agents.spawningCount} spawning`);
// One agent registers, one goes away: job-3 gets its capacity, then a backend fails.
const [first, second] = spans
  .getFinishedSpans()
  .filter((s) => s.name === 'scaler.request_scale')
  .map((s) => String(s.attributes['scaler.agent.id']));
manager.onAgentRegistered(first!, ['linux']);
await manager.onAgentDisconnected(second!);
console.log(
  `job-3 again: ${(await manager.requestScale({ jobId: 'job-3', labels: ['linux'] })).kind}`,
);
failNext = true;
await manager.onAgentDisconnected(first!);
console.log(`job-4: ${(await manager.requestScale({ jobId: 'job-4', labels: ['linux'] })).kind}`);

console.log('\n--- metrics (ConsoleMetricExporter) ---');
print = true;
await reader.forceFlush();
print = false;

console.log('\n--- the span tree of the first request ---');
const all = spans.getFinishedSpans();
const root = all.find((s) => s.name === 'scaler.request_scale')!;
const show = (span: (typeof all)[number], depth: number) => {
  const events = span.events.map((e) => ` [${e.name}]`).join('');
  console.log(`${'  '.repeat(depth)}${span.name} ${JSON.stringify(span.attributes)}${events}`);
  for (const child of all.filter(
    (s) => s.parentSpanContext?.spanId === span.spanContext().spanId,
  )) {
    show(child, depth + 1);
  }
};
show(root, 0);

await manager.shutdownAll();
await ledger.releaseAllForInstance();
await ledger.close();
await meterProvider.shutdown();
await tracerProvider.shutdown();
rmSync(dir, { recursive: true, force: true });
