/**
 * The cost of OpenTelemetry on two hot paths: `requestScale` decisions (20
 * scalers x 5 label sets, spawn + disconnect, in memory: the worst case, no
 * I/O to hide behind) and MachineLedger reserve + release pairs (one process,
 * fsync off, on tmpfs where there is one, so the ledger's own work is not
 * hidden behind the disk).
 *
 * Variants: no provider; the `@opentelemetry/api` globals with no SDK
 * registered (what a host passing `metrics.getMeterProvider()` unconditionally
 * gets: noop instruments, non-recording spans); a real SDK MeterProvider (the
 * default instruments); a MeterProvider with the opt-in histogram of the path
 * (`spawnDurationHistogram`, `lockHistograms`); and a MeterProvider with a
 * tracer provider (spans through a SimpleSpanProcessor into an exporter that
 * drops them).
 *
 * Each variant's subject is built and warmed once; then each round gives every
 * variant MS ms, cut into SLICES stretches interleaved across the variants in
 * alternating order (A B C D, D C B A, ...), so a burst of load hits every
 * variant of the round alike. A full garbage collection (`gc()`, exposed at
 * start-up) runs before each round, so no round pays for the garbage of the one
 * before; the scavenges of a round's own garbage land in whichever stretch is
 * running, which spreads a variant's extra garbage-collection cost over its
 * neighbours (the heap table below shows allocation on its own). Overhead is
 * computed per round (variant / none in the same round, on this process's CPU
 * time per operation) and reported as the median of the rounds with their
 * spread, so a single disturbed round shows as spread instead of as overhead.
 * `requestScale` (about 20 µs an operation) gets twice the rounds of the ledger.
 *
 * A second table counts heap bytes allocated per operation: heapUsed before
 * and after chunks of operations, keeping only chunks no garbage collection
 * ran in (`v8.GCProfiler` reports every GC between start and stop).
 */
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { GCProfiler, setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { metrics, trace } from '@opentelemetry/api';
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
import type { LedgerTelemetryOptions } from '../src/ledger/telemetry.js';
import { type ScalerConfigInput, ScalerManager } from '../src/manager/index.js';
import type { ManagerTelemetryOptions } from '../src/manager/telemetry/telemetry.js';
import { type BenchTable, fmt, percentile } from './lib.js';

const SCALERS = 20;
const SETS = 5;
/** Measuring rounds of the ledger case (twice as many for requestScale); each measures every variant once. */
const ROUNDS = Number(process.env.TELEMETRY_BENCH_ROUNDS ?? 15);
/** Length of one variant's measurement in a round. */
const MS = Number(process.env.TELEMETRY_BENCH_MS ?? 200);
const WARM_MS = 300;
/** Stretches a variant's MS ms of a round are cut into. */
const SLICES = 8;
/** Operations per allocation chunk, and chunks per variant. */
const CHUNK = 100;
const CHUNKS = 30;
/**
 * The ledger's directory: tmpfs where there is one, so a busy disk neither hides
 * the telemetry's cost behind I/O waits nor blurs it with its own noise.
 */
const LEDGER_ROOT = existsSync('/dev/shm') ? '/dev/shm' : tmpdir();

/** A full collection between measurements (`--expose-gc` turned on at run time). */
setFlagsFromString('--expose-gc');
const collectGarbage = runInNewContext('gc') as () => void;

const VARIANTS = [
  'none',
  'api-noop',
  'meter',
  'meter+spawn-histogram',
  'meter+lock-histograms',
  'meter+tracer',
] as const;
type Variant = (typeof VARIANTS)[number];

const dropSpans: SpanExporter = {
  export: (_spans, done) => done({ code: 0 }),
  shutdown: async () => {},
};

function providers(variant: Variant): {
  options: ManagerTelemetryOptions & LedgerTelemetryOptions;
  close(): Promise<void>;
} {
  if (variant === 'none') return { options: {}, close: async () => {} };
  if (variant === 'api-noop') {
    // No SDK registered: the globals are the API's noop meter and proxy tracer.
    return {
      options: {
        meterProvider: metrics.getMeterProvider(),
        tracerProvider: trace.getTracerProvider(),
      },
      close: async () => {},
    };
  }
  const reader = new PeriodicExportingMetricReader({
    exporter: new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE),
    exportIntervalMillis: 3_600_000,
  });
  const meterProvider = new MeterProvider({ readers: [reader] });
  if (variant === 'meter+spawn-histogram') {
    return {
      options: { meterProvider, spawnDurationHistogram: true },
      close: () => meterProvider.shutdown(),
    };
  }
  if (variant === 'meter+lock-histograms') {
    return {
      options: { meterProvider, lockHistograms: true },
      close: () => meterProvider.shutdown(),
    };
  }
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

/** One thing measured: an operation repeated, and how to tear it down. */
interface Subject {
  step(): Promise<void>;
  close(): Promise<void>;
}

interface Case {
  title: string;
  unit: string;
  rounds: number;
  variants: readonly Variant[];
  make(variant: Variant): Subject;
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

const decisions: Case = {
  title: 'requestScale + disconnect, in memory',
  unit: 'decisions/s',
  rounds: ROUNDS * 2,
  // The lock histograms are the ledger's: this manager has no ledger.
  variants: VARIANTS.filter((v) => v !== 'meter+lock-histograms'),
  make(variant) {
    const telemetry = providers(variant);
    const backend = { async spawn() {}, async destroy() {} };
    const manager = new ScalerManager({
      config,
      backends: Array.from({ length: SCALERS }, (_, i) => ({ name: `scaler-${i}`, backend })),
      ...telemetry.options,
    });
    let n = 0;
    return {
      async step() {
        const i = n++;
        const result = await manager.requestScale({
          jobId: `job-${i}`,
          labels: JOB_LABELS[i % JOB_LABELS.length]!,
        });
        if (result.kind !== 'spawned') throw new Error(`unexpected ${result.kind}`);
        await manager.onAgentDisconnected(result.agentId);
      },
      async close() {
        await manager.shutdownAll();
        await telemetry.close();
      },
    };
  },
};

const ledgerPairs: Case = {
  title: `MachineLedger reserve + release, fsync off${LEDGER_ROOT === '/dev/shm' ? ', tmpfs' : ''}`,
  unit: 'pairs/s',
  rounds: ROUNDS,
  // The spawn histogram is the manager's: the ledger has no such option.
  variants: VARIANTS.filter((v) => v !== 'meter+spawn-histogram'),
  make(variant) {
    const telemetry = providers(variant);
    const dir = mkdtempSync(join(LEDGER_ROOT, 'bench-otel-'));
    const ledger = new MachineLedger({
      instanceId: 'bench',
      dir,
      fsync: false,
      ...telemetry.options,
    });
    ledger.registerPool('host', { maxCpu: 1000 });
    let n = 0;
    return {
      async step() {
        const id = `a-${n++}`;
        if (!(await ledger.reserve('host', id, 1, 0)).ok) throw new Error('refused');
        await ledger.release('host', id);
      },
      async close() {
        await ledger.close();
        await telemetry.close();
        rmSync(dir, { recursive: true, force: true });
      },
    };
  },
};

/** Wall-clock rate, and CPU time of this process per operation (what telemetry adds to). */
interface Sample {
  rate: number;
  cpuUs: number;
}

/** What one stretch of measuring saw. */
interface Slice {
  done: number;
  cpuUs: number;
  ms: number;
}

/** The one measuring loop: run `step` for about `ms` milliseconds. */
async function measure(step: () => Promise<void>, ms: number): Promise<Slice> {
  const start = performance.now();
  const until = start + ms;
  const cpu = process.cpuUsage();
  let done = 0;
  while (performance.now() < until) {
    await step();
    done++;
  }
  const used = process.cpuUsage(cpu);
  return { done, cpuUs: used.user + used.system, ms: performance.now() - start };
}

/** Heap bytes per operation over chunks no GC ran in; `undefined` if every chunk saw one. */
async function allocated(step: () => Promise<void>): Promise<number | undefined> {
  let bytes = 0;
  let ops = 0;
  for (let c = 0; c < CHUNKS; c++) {
    const profiler = new GCProfiler();
    profiler.start();
    const before = process.memoryUsage().heapUsed;
    for (let i = 0; i < CHUNK; i++) await step();
    const after = process.memoryUsage().heapUsed;
    if (profiler.stop().statistics.length === 0) {
      bytes += after - before;
      ops += CHUNK;
    }
  }
  return ops === 0 ? undefined : bytes / ops;
}

function median(values: number[]): number {
  return percentile(values, 50);
}

function signed(value: number): string {
  return `${value >= 0 ? '+' : ''}${fmt(value, 1)}%`;
}

interface Measured {
  samples: Map<Variant, Sample[]>;
  bytes: Map<Variant, number | undefined>;
}

async function run(what: Case): Promise<Measured> {
  const variants = what.variants;
  const subjects = new Map(variants.map((v) => [v, what.make(v)] as const));
  const samples = new Map<Variant, Sample[]>(variants.map((v) => [v, []]));
  const bytes = new Map<Variant, number | undefined>();
  try {
    for (const v of variants) await measure(subjects.get(v)!.step, WARM_MS);
    const reversed = [...variants].reverse();
    for (let round = 0; round < what.rounds; round++) {
      // A round gives each variant MS ms in SLICES short stretches, interleaved,
      // so a burst of load lands on every variant of the round alike.
      collectGarbage();
      const sums = new Map(variants.map((v) => [v, { done: 0, cpuUs: 0, ms: 0 }]));
      for (let slice = 0; slice < SLICES; slice++) {
        for (const v of (round + slice) % 2 === 0 ? variants : reversed) {
          const seen = await measure(subjects.get(v)!.step, MS / SLICES);
          const sum = sums.get(v)!;
          sum.done += seen.done;
          sum.cpuUs += seen.cpuUs;
          sum.ms += seen.ms;
        }
      }
      for (const [v, sum] of sums) {
        samples.get(v)!.push({ rate: sum.done / (sum.ms / 1000), cpuUs: sum.cpuUs / sum.done });
      }
    }
    for (const v of variants) bytes.set(v, await allocated(subjects.get(v)!.step));
  } finally {
    for (const subject of subjects.values()) await subject.close();
  }
  return { samples, bytes };
}

export default async function bench(): Promise<BenchTable[]> {
  const loadBefore = loadavg();
  const rows: BenchTable['rows'] = [];
  const allocRows: BenchTable['rows'] = [];
  const notes: string[] = [];
  for (const what of [decisions, ledgerPairs]) {
    const { samples, bytes } = await run(what);
    const base = samples.get('none')!;
    const noneBytes = bytes.get('none');
    for (const v of what.variants) {
      const mine = samples.get(v)!;
      // Per round: this variant against `none` measured in the same round.
      const overheads = mine.map((s, round) => (s.cpuUs / base[round]!.cpuUs - 1) * 100);
      const overhead = median(overheads);
      rows.push({
        case: what.title,
        telemetry: v,
        rate: `${fmt(median(mine.map((s) => s.rate)))} ${what.unit}`,
        'CPU µs/op': fmt(median(mine.map((s) => s.cpuUs)), 1),
        'CPU overhead (median)': v === 'none' ? '-' : signed(overhead),
        'spread (p25 .. p75)':
          v === 'none'
            ? '-'
            : `${signed(percentile(overheads, 25))} .. ${signed(percentile(overheads, 75))}`,
        'min .. max':
          v === 'none'
            ? '-'
            : `${signed(Math.min(...overheads))} .. ${signed(Math.max(...overheads))}`,
      });
      const b = bytes.get(v);
      allocRows.push({
        case: what.title,
        telemetry: v,
        'heap bytes/op': b === undefined ? 'n/a (GC in every chunk)' : fmt(b),
        'vs none':
          v === 'none' || b === undefined || noneBytes === undefined
            ? '-'
            : `${b - noneBytes >= 0 ? '+' : ''}${fmt(b - noneBytes)}`,
      });
      if (v === 'meter') {
        notes.push(
          `Target: ${what.title}, meter attached, CPU overhead < 5%: median ${signed(overhead)} over ${what.rounds} rounds, ${overhead < 5 ? 'met' : 'NOT met'}.`,
        );
      }
    }
  }
  const load = (l: number[]) => l.map((x) => x.toFixed(2)).join(' ');
  notes.push(
    `Machine: ${cpus().length} CPUs, load average (1/5/15 min) ${load(loadBefore)} before, ${load(loadavg())} after. ${ROUNDS * 2} rounds (requestScale) and ${ROUNDS} (ledger) of ${MS} ms per variant in ${SLICES} interleaved stretches, order alternating, a full GC before each round; overhead is per round on this process's CPU time per operation (process.cpuUsage), which the machine's load disturbs far less than the wall-clock rate. Spread columns are over the rounds.`,
  );
  return [
    {
      title:
        'OpenTelemetry overhead (no provider, API noop globals, MeterProvider, + opt-in histogram, + tracer)',
      rows,
      notes,
    },
    {
      title: 'OpenTelemetry heap allocation per operation',
      rows: allocRows,
      notes: [
        `heapUsed delta over chunks of ${CHUNK} operations (${CHUNKS} chunks per variant) in which no garbage collection ran, so the delta is what the operations allocated. "none" is the library's own allocation; without a provider no telemetry object exists, so the telemetry adds nothing to it.`,
      ],
    },
  ];
}
