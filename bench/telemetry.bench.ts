/**
 * The cost of OpenTelemetry: `requestScale` decisions (20 scalers x 5 label sets,
 * spawn + disconnect, in memory) and MachineLedger reserve+release pairs (one
 * process, fsync off, so the ledger's own work is not hidden behind the disk),
 * each without a provider, with a real SDK MeterProvider, and with a
 * MeterProvider and a tracer provider (spans through a SimpleSpanProcessor into
 * an exporter that drops them). Runs alternate (A B C, C B A, ...) and the
 * median is reported, so drift in machine load hits every variant alike.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  AggregationTemporality,
  InMemoryMetricExporter,
  MeterProvider,
  PeriodicExportingMetricReader,
} from '@opentelemetry/sdk-metrics';
import {
  BasicTracerProvider,
  SimpleSpanProcessor,
  type SpanExporter,
} from '@opentelemetry/sdk-trace-base';
import { MachineLedger } from '../src/ledger/index.js';
import type { TelemetryOptions } from '../src/manager/index.js';
import { type ScalerConfigInput, ScalerManager } from '../src/manager/index.js';
import { type BenchTable, fmt } from './lib.js';

const SCALERS = 20;
const SETS = 5;
const MS = 700;
const REPEATS = 7;

type Variant = 'none' | 'meter' | 'meter+tracer';
const VARIANTS: Variant[] = ['none', 'meter', 'meter+tracer'];

const dropSpans: SpanExporter = {
  export: (_spans, done) => done({ code: 0 }),
  shutdown: async () => {},
};

function providers(variant: Variant): { options: TelemetryOptions; close(): Promise<void> } {
  if (variant === 'none') return { options: {}, close: async () => {} };
  const reader = new PeriodicExportingMetricReader({
    exporter: new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE),
    exportIntervalMillis: 60_000,
  });
  const meterProvider = new MeterProvider({ readers: [reader] });
  const tracerProvider =
    variant === 'meter+tracer'
      ? new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(dropSpans)] })
      : undefined;
  return {
    options: tracerProvider ? { meterProvider, tracerProvider } : { meterProvider },
    close: async () => {
      await meterProvider.shutdown();
      await tracerProvider?.shutdown();
    },
  };
}

const config: ScalerConfigInput = {
  globalMaxAgents: 10_000,
  resourceCap: { maxCpu: 100_000 },
  defaults: { resources: { requests: { cpus: '250m', memory: '256Mi' } } },
  scalers: Array.from({ length: SCALERS }, (_, i) => ({
    name: `scaler-${i}`,
    type: 'container',
    maxAgents: 1000,
    resourceCap: { maxCpu: 10_000 },
    labelSets: Array.from({ length: SETS }, (_, j) => ({
      labels: ['linux', `group-${i}`, `set-${j}`],
      resources: { cpus: (j % 4) + 1, memory: `${j + 1}Gi` },
    })),
  })),
};
const JOB_LABELS = Array.from({ length: SCALERS * SETS }, (_, n) => [
  'linux',
  `group-${n % SCALERS}`,
  `set-${Math.floor(n / SCALERS) % SETS}`,
]);

async function decisions(variant: Variant): Promise<Sample> {
  const telemetry = providers(variant);
  const backend = { async spawn() {}, async destroy() {} };
  const manager = new ScalerManager({
    config,
    backends: Array.from({ length: SCALERS }, (_, i) => ({ name: `scaler-${i}`, backend })),
    ...telemetry.options,
  });
  let n = 0;
  const run = async (ms: number) => {
    const until = performance.now() + ms;
    const start = performance.now();
    const cpu = process.cpuUsage();
    let done = 0;
    while (performance.now() < until) {
      const i = n++;
      const result = await manager.requestScale(JOB_LABELS[i % JOB_LABELS.length]!, `job-${i}`);
      if (result.kind !== 'spawned') throw new Error(`unexpected ${result.kind}`);
      await manager.onAgentDisconnected(result.agentId);
      done++;
    }
    const used = process.cpuUsage(cpu);
    return {
      rate: done / ((performance.now() - start) / 1000),
      cpuUs: (used.user + used.system) / done,
    };
  };
  await run(100);
  const rate = await run(MS);
  await manager.shutdownAll();
  await telemetry.close();
  return rate;
}

async function ledgerPairs(variant: Variant): Promise<Sample> {
  const telemetry = providers(variant);
  const dir = mkdtempSync(join(tmpdir(), 'bench-otel-'));
  const ledger = new MachineLedger({
    instanceId: 'bench',
    dir,
    fsync: false,
    ...telemetry.options,
  });
  ledger.registerPool('host', { maxCpu: 1000 });
  let n = 0;
  const run = async (ms: number) => {
    const until = performance.now() + ms;
    const start = performance.now();
    const cpu = process.cpuUsage();
    let done = 0;
    while (performance.now() < until) {
      const id = `a-${n++}`;
      if (!(await ledger.reserve('host', id, 1, 0)).ok) throw new Error('refused');
      await ledger.release('host', id);
      done++;
    }
    const used = process.cpuUsage(cpu);
    return {
      rate: done / ((performance.now() - start) / 1000),
      cpuUs: (used.user + used.system) / done,
    };
  };
  await run(100);
  const rate = await run(MS);
  await ledger.close();
  await telemetry.close();
  rmSync(dir, { recursive: true, force: true });
  return rate;
}

/** Wall-clock rate, and CPU time of this process per operation (what telemetry adds to). */
interface Sample {
  rate: number;
  cpuUs: number;
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)]!;
}

export default async function bench(): Promise<BenchTable[]> {
  const loadBefore = loadavg()[0]!.toFixed(2);
  const rates = { decisions: new Map<Variant, Sample[]>(), ledger: new Map<Variant, Sample[]>() };
  for (let repeat = 0; repeat < REPEATS; repeat++) {
    const order = repeat % 2 === 0 ? VARIANTS : [...VARIANTS].reverse();
    for (const variant of order) {
      const d = rates.decisions.get(variant) ?? [];
      d.push(await decisions(variant));
      rates.decisions.set(variant, d);
      const l = rates.ledger.get(variant) ?? [];
      l.push(await ledgerPairs(variant));
      rates.ledger.set(variant, l);
    }
  }
  const rows: BenchTable['rows'] = [];
  const notes: string[] = [];
  for (const [what, unit, map] of [
    ['requestScale + disconnect, in memory', 'decisions/s', rates.decisions],
    ['MachineLedger reserve + release, fsync off', 'pairs/s', rates.ledger],
  ] as const) {
    const base = median(map.get('none')!.map((x) => x.cpuUs));
    for (const variant of VARIANTS) {
      const samples = map.get(variant)!;
      const cpuUs = median(samples.map((x) => x.cpuUs));
      const overhead = (cpuUs / base - 1) * 100;
      rows.push({
        case: what,
        telemetry: variant,
        rate: `${fmt(median(samples.map((x) => x.rate)))} ${unit}`,
        'CPU µs/op': fmt(cpuUs, 1),
        'CPU overhead': variant === 'none' ? '-' : `${fmt(overhead, 1)}%`,
      });
      if (variant === 'meter') {
        notes.push(
          `Target: ${what}, meter attached, CPU overhead < 5%: ${fmt(overhead, 1)}%, ${overhead < 5 ? 'met' : 'NOT met'}.`,
        );
      }
    }
  }
  notes.push(
    `Machine: ${cpus().length} CPUs, load average ${loadBefore} before, ${loadavg()[0]!.toFixed(2)} after (other work on the machine makes figures noisy). Median of ${REPEATS} alternating runs of ${MS} ms. Overhead is judged on this process's CPU time per operation (process.cpuUsage), which the machine's load disturbs far less than the wall-clock rate.`,
  );
  return [
    {
      title: 'OpenTelemetry overhead (no provider vs MeterProvider vs MeterProvider + tracer)',
      rows,
      notes,
    },
  ];
}
