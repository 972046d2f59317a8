/**
 * MachineLedger under contention, side by side with the kici orchestrator's
 * ledger (fetched at bench time from the published package into the temp dir,
 * never committed): 1, 8 and 16 processes each running reserve+release pairs
 * on one pool with a cap of 4 CPUs (1 CPU each), ours with fsync on, kici's as
 * it is (it never fsyncs). Runs alternate ours/kici within each repeat; the
 * table shows medians over repeats. An independent reader process reads the
 * pool file at each change of its directory (inotify) and checks every state
 * it reads against the cap. Also: one process sequential (fsync
 * on and off) and 32 concurrent callers in one process (group commit), and
 * where one contended reserve of ours spends its time.
 *
 * The breakdown comes from one more run of ours per process count, traced
 * through the fs seam (the throughput table is measured untraced); the table
 * also shows the CPU time (user + system, and of it system) per pair of each
 * side.
 *
 * `LEDGER_BENCH_SECONDS` (default 3) per run, `LEDGER_BENCH_REPEATS` (default 3).
 * `LEDGER_BENCH_WARM_UP_MS` (default 0): each contending process first runs the
 * same pairs for that long, uncounted, so the window measures code V8 has
 * compiled (a long-running controller's state) instead of a process's first
 * seconds, in which about a quarter of the CPU goes to compiling. Rates are
 * pairs over each process's measured window.
 * `LEDGER_BENCH_READER=spin` makes the reader read in a loop instead (one core of
 * two busy reading: the densest check, but it measures the reader too; the
 * figures before 2026-12-07 16:00 UTC in bench/RESULTS.md were taken so).
 * `LEDGER_BENCH_BEFORE=<checkout>` adds a third side: the MachineLedger of
 * another checkout (an earlier commit) in the same worker, interleaved.
 * `LEDGER_BENCH_DIR=<dir>` puts the ledger directories there instead of the
 * system temp dir: the filesystem decides much of the cost (the notes name it).
 */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { MachineLedger } from '../src/ledger/file/machine-ledger.js';
import { kiciLedgerModule } from '../test/helpers/kici-ledger.js';
import { type BenchTable, fmt, percentile } from './lib.js';

const SECONDS = Number(process.env.LEDGER_BENCH_SECONDS ?? 3);
const REPEATS = Number(process.env.LEDGER_BENCH_REPEATS ?? 3);
const DURATION_MS = SECONDS * 1000;
const WARM_UP_MS = Number(process.env.LEDGER_BENCH_WARM_UP_MS ?? 0);
const CAP = { maxCpu: 4 };
// `LEDGER_BENCH_FSYNC=0` runs ours without fsync, to separate waiting from disk time.
const FSYNC = process.env.LEDGER_BENCH_FSYNC !== '0';
const PROCESS_COUNTS = (process.env.LEDGER_BENCH_PROCESSES ?? '1,8,16').split(',').map(Number);
// `LEDGER_BENCH_IN_PROCESS=0` skips the one-process scenarios.
const IN_PROCESS = process.env.LEDGER_BENCH_IN_PROCESS !== '0';
const READER = process.env.LEDGER_BENCH_READER === 'spin' ? 'spin' : 'watch';
const BEFORE = process.env.LEDGER_BENCH_BEFORE;
const BASE_DIR = process.env.LEDGER_BENCH_DIR ?? tmpdir();
const BEFORE_MODULE =
  BEFORE === undefined ? undefined : join(BEFORE, 'src', 'ledger', 'file', 'machine-ledger.ts');
const BEFORE_COMMIT =
  BEFORE === undefined
    ? ''
    : execFileSync('git', ['-C', BEFORE, 'rev-parse', '--short', 'HEAD'], {
        encoding: 'utf8',
      }).trim();

// CPU (user + system) per reserve+release pair of ours at 8 processes before
// issue 41, the median of interleaved runs on the 2-core development machine
// (bench/RESULTS.md, 2026-12-07): what the CPU target is measured against.
const CPU_PER_PAIR_BEFORE = 1.8;

type Impl = 'ours' | 'before' | 'kici';

interface Run {
  impl: Impl;
  processes: number;
  reserves: number;
  /** The contending processes' measured window (their mean), s. */
  seconds: number;
  /** From `go` to the last process's answer (warm-up included), s. */
  elapsed: number;
  latencies: number[];
  errors: number;
  violations: number;
  reads: number;
  /** CPU time of the reader process (its whole life, start-up included), ms. */
  readerCpuMs: number;

  /** CPU time of the contending processes (user + system), ms. */
  cpuMs: number;
  /** Of it, system (kernel) time, ms. */
  cpuSysMs: number;
  breakdown: number[][];
  /** Per acquisition: ms the lock lay free since the previous release (any process of ours). */
  handover: number[];
}

interface InProcessRun {
  scenario: string;
  pairs: number;
  seconds: number;
  latencies: number[];
}

const median = (values: number[]) => percentile(values, 50);
// The filesystem under `dir` and its mount options (findmnt), or why it is not known.
function filesystemOf(dir: string): string {
  try {
    return execFileSync('findmnt', ['-n', '-o', 'FSTYPE,OPTIONS', '-T', dir], {
      encoding: 'utf8',
    }).trim();
  } catch {
    return 'filesystem not known (no findmnt)';
  }
}

const loadavg = () => readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ');

// `callers` concurrent loops of reserve+release in this process (1: sequential).
// With `extended`, every row also carries two extended resources, capped by the pool.
const TWO_EXTENDED = { 'nvidia.com/gpu': 1, 'example.com/fpga': 1 };

async function inProcess(
  callers: number,
  fsync: boolean,
  scenario: string,
  extended?: Record<string, number>,
): Promise<InProcessRun> {
  const dir = mkdtempSync(join(BASE_DIR, 'ledger-bench-'));
  const ledger = new MachineLedger({ instanceId: 'bench', dir, fsync });
  ledger.registerPool(
    'p',
    extended === undefined
      ? { maxCpu: 10_000 }
      : { maxCpu: 10_000, maxExtended: { 'nvidia.com/gpu': 10_000, 'example.com/fpga': 10_000 } },
  );
  const options = extended === undefined ? undefined : { extended };
  await ledger.reserve('p', 'warm', 1, 1);
  await ledger.release('p', 'warm');
  const latencies: number[] = [];
  let pairs = 0;
  const start = performance.now();
  const end = start + DURATION_MS;
  await Promise.all(
    Array.from({ length: callers }, async (_, c) => {
      for (let i = 0; performance.now() < end; i++) {
        const t = performance.now();
        await ledger.reserve('p', `c${c}-${i}`, 1, 1, options);
        latencies.push(performance.now() - t);
        await ledger.release('p', `c${c}-${i}`);
        pairs++;
      }
    }),
  );
  const seconds = (performance.now() - start) / 1000;
  await ledger.close();
  rmSync(dir, { recursive: true, force: true });
  return { scenario, pairs, seconds, latencies };
}

function startReader(file: string): {
  ready: Promise<void>;
  stop: () => Promise<{ violationCount: number; reads: number; cpuMs: number }>;
} {
  const script = join(import.meta.dirname, '..', 'test', 'fixtures', 'ledger-reader.ts');
  const args = READER === 'watch' ? [file, '--watch'] : [file];
  const child = spawn(process.execPath, ['--import', 'tsx', script, ...args], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let out = '';
  let markReady: () => void = () => {};
  const ready = new Promise<void>((resolve) => {
    markReady = resolve;
  });
  child.stdout!.on('data', (chunk: Buffer) => {
    out += chunk.toString();
    if (out.includes('"ready"')) markReady();
  });
  const exited = new Promise<void>((resolve) => child.on('exit', () => resolve()));
  return {
    ready,
    async stop() {
      child.kill('SIGTERM');
      await exited;
      const done = out
        .split('\n')
        .filter(Boolean)
        .map(
          (line) =>
            JSON.parse(line) as {
              event: string;
              violationCount: number;
              reads: number;
              cpuMs: number;
            },
        )
        .find((event) => event.event === 'done');
      return done ?? { violationCount: Number.NaN, reads: 0, cpuMs: Number.NaN };
    },
  };
}

async function contending(
  impl: Impl,
  processes: number,
  kiciModule: string,
  trace = false,
): Promise<Run> {
  const dir = mkdtempSync(join(BASE_DIR, 'ledger-bench-'));
  const script = join(import.meta.dirname, 'ledger-worker.ts');
  const children: ChildProcess[] = [];
  const outputs: Array<Promise<string>> = [];
  const readies: Array<Promise<void>> = [];
  for (let i = 0; i < processes; i++) {
    const config = JSON.stringify({
      impl,
      kiciModule,
      ledgerModule: BEFORE_MODULE,
      dir,
      pool: 'p',
      id: `w${i}`,
      durationMs: DURATION_MS,
      cap: CAP,
      fsync: FSYNC,
      trace,
      warmUpMs: WARM_UP_MS,
    });
    const child = spawn(process.execPath, ['--import', 'tsx', script, config], {
      stdio: ['pipe', 'pipe', 'inherit'],
    });
    children.push(child);
    let out = '';
    readies.push(
      new Promise((resolve) => {
        child.stdout!.on('data', (chunk: Buffer) => {
          out += chunk.toString();
          if (out.includes('ready\n')) resolve();
        });
      }),
    );
    outputs.push(
      new Promise((resolve) =>
        child.on('exit', () => resolve(out.slice(out.indexOf('ready\n') + 6))),
      ),
    );
  }
  const reader = startReader(join(dir, 'p.json'));
  await Promise.all([...readies, reader.ready]);
  const start = performance.now();
  for (const child of children) child.stdin!.end('go\n');
  const results = (await Promise.all(outputs)).map(
    (text) =>
      JSON.parse(text) as {
        pairs: number;
        errors: number;
        cpuMs: number;
        cpuSysMs: number;
        windowMs: number;
        latencies: number[];
        breakdown: number[][];
        lockEvents?: Array<[number, number]>;
      },
  );
  // Hand-over: how long the lock lay free between one of our holders releasing
  // it and the next taking it (only between our processes; gaps over 1 s are
  // idle time, not hand-overs).
  const events = results.flatMap((r) => r.lockEvents ?? []).sort((a, b) => a[0] - b[0]);
  const handover: number[] = [];
  for (let i = 1; i < events.length; i++) {
    const gap = events[i]![0] - events[i - 1]![1];
    if (events[i - 1]![1] > 0 && gap >= 0 && gap < 1000) handover.push(gap);
  }
  const elapsed = (performance.now() - start) / 1000;
  const seconds = results.reduce((sum, r) => sum + r.windowMs, 0) / results.length / 1000;
  const report = await reader.stop();
  rmSync(dir, { recursive: true, force: true });
  return {
    impl,
    processes,
    reserves: results.reduce((sum, r) => sum + r.pairs, 0),
    seconds,
    elapsed,
    latencies: results.flatMap((r) => r.latencies),
    errors: results.reduce((sum, r) => sum + r.errors, 0),
    cpuMs: results.reduce((sum, r) => sum + r.cpuMs, 0),
    cpuSysMs: results.reduce((sum, r) => sum + r.cpuSysMs, 0),
    violations: report.violationCount,
    reads: report.reads,
    readerCpuMs: report.cpuMs,

    breakdown: results.flatMap((r) => r.breakdown),
    handover,
  };
}

const IMPLS: Impl[] = BEFORE === undefined ? ['ours', 'kici'] : ['ours', 'before', 'kici'];
const LABELS: Record<Impl, string> = {
  ours: `ours (fsync ${FSYNC ? 'on' : 'off'})`,
  before: `ours at ${BEFORE_COMMIT} (fsync ${FSYNC ? 'on' : 'off'})`,
  kici: 'kici 0.9.1 (no fsync)',
};

export default async function bench(): Promise<BenchTable[]> {
  const loadBefore = loadavg();
  const kiciModule = kiciLedgerModule();
  const runs: Run[] = [];
  for (let repeat = 0; repeat < REPEATS; repeat++) {
    for (const processes of PROCESS_COUNTS) {
      // Each side goes first in turn.
      const order = IMPLS.map((_, i) => IMPLS[(i + repeat) % IMPLS.length]!);
      for (const impl of order) runs.push(await contending(impl, processes, kiciModule));
    }
  }
  // The breakdown comes from separate runs of ours traced through the fs seam:
  // the tracing costs CPU, so the throughput table above is measured without it.
  const traced: Run[] = [];
  for (const processes of PROCESS_COUNTS) {
    traced.push(await contending('ours', processes, kiciModule, true));
  }
  const inProcessRuns = !IN_PROCESS
    ? []
    : [
        await inProcess(1, true, '1 process, sequential, fsync on'),
        await inProcess(1, false, '1 process, sequential, fsync off'),
        await inProcess(
          1,
          false,
          '1 process, sequential, fsync off, 2 extended resources',
          TWO_EXTENDED,
        ),
        await inProcess(32, true, '1 process, 32 concurrent callers (group commit), fsync on'),
      ];
  const loadAfter = loadavg();

  const summary = (impl: Impl, processes: number) => {
    const mine = runs.filter((r) => r.impl === impl && r.processes === processes);
    const rates = mine.map((r) => r.reserves / r.seconds);
    return {
      rate: median(rates),
      low: Math.min(...rates),
      high: Math.max(...rates),
      p50: median(mine.map((r) => percentile(r.latencies, 50))),
      p99: median(mine.map((r) => percentile(r.latencies, 99))),
      max: Math.max(...mine.map((r) => Math.max(...r.latencies))),
      errors: mine.reduce((sum, r) => sum + r.errors, 0),
      violations: mine.reduce((sum, r) => sum + r.violations, 0),
      reads: mine.reduce((sum, r) => sum + r.reads, 0),
      readerCpu: median(mine.map((r) => r.readerCpuMs / 1000 / r.elapsed)),

      cpuPerPair:
        mine.reduce((sum, r) => sum + r.cpuMs, 0) /
        Math.max(
          1,
          mine.reduce((sum, r) => sum + r.reserves, 0),
        ),
      sysPerPair:
        mine.reduce((sum, r) => sum + r.cpuSysMs, 0) /
        Math.max(
          1,
          mine.reduce((sum, r) => sum + r.reserves, 0),
        ),
    };
  };
  const rows: Array<Record<string, string>> = [];
  for (const processes of PROCESS_COUNTS) {
    for (const impl of IMPLS) {
      const s = summary(impl, processes);
      rows.push({
        scenario: `${processes} process${processes === 1 ? '' : 'es'}, ${LABELS[impl]}`,
        'reserve/s': fmt(s.rate),
        'range/s': `${fmt(s.low)}-${fmt(s.high)}`,
        'p50 ms': fmt(s.p50, 2),
        'p99 ms': fmt(s.p99, 2),
        'max ms': fmt(s.max, 1),
        'CPU ms/pair': fmt(s.cpuPerPair, 2),
        'of it system': fmt(s.sysPerPair, 2),
        'reader states': fmt(s.reads),
        'reader CPU': `${fmt(100 * s.readerCpu)}%`,
        'over-cap': String(s.violations),
        errors: String(s.errors),
      });
    }
  }
  const ours8 = summary('ours', 8);
  const kici8 = summary('kici', 8);
  const ours16 = summary('ours', 16);
  const before8 = BEFORE === undefined ? undefined : summary('before', 8);
  const cpuBefore = before8?.cpuPerPair ?? CPU_PER_PAIR_BEFORE;
  const met = (ok: boolean) => (ok ? 'met' : 'NOT met');

  // Where one contended reserve of ours spends its time, per process count.
  const names = [
    'whole reserve',
    "waiting (lock, or a holder's answer)",
    'holding the lock',
    '  read',
    '  write',
    '  fsync (file)',
    '  rename',
    '  fsync (directory)',
    'queue file calls',
    'combining channel calls',
    'lock directory calls',
  ];
  const breakdownTables: BenchTable[] = PROCESS_COUNTS.map((processes) => {
    const mine = traced.filter((r) => r.processes === processes);
    const parts = mine.flatMap((r) => r.breakdown);
    const handover = mine.flatMap((r) => r.handover);
    const rate = mine.reduce((sum, r) => sum + r.reserves / r.seconds, 0) / mine.length;
    const stats = (values: number[], digits = 3) => ({
      'mean ms': fmt(values.reduce((sum, v) => sum + v, 0) / Math.max(1, values.length), digits),
      'p50 ms': fmt(percentile(values, 50), digits),
      'p99 ms': fmt(percentile(values, 99), digits),
      'max ms': fmt(values.length === 0 ? 0 : Math.max(...values), digits),
    });
    const rows = names.map((name, i) => ({ phase: name, ...stats(parts.map((p) => p[i]!)) }));
    rows.push({ phase: 'lock free between two of our holders (hand-over)', ...stats(handover) });
    const combined = parts.filter((p) => p[12] === 1).length;
    const attempts = parts.map((p) => p[11]!);
    const locked = parts.filter((p) => p[12] !== 1);
    return {
      title: `Where one reserve of ours goes, ${processes} process${processes === 1 ? '' : 'es'} (one traced run, ${fmt(rate)} reserve/s): waiting vs holding the lock`,
      rows,
      notes: [
        `${parts.length} reserves measured through the ledger's fs seam; ${combined} (${fmt((100 * combined) / Math.max(1, parts.length))}%) were applied by another process's holder (cross-process combining) and never took the lock.`,
        `mkdir attempts on the lock per reserve: mean ${fmt(attempts.reduce((a, b) => a + b, 0) / Math.max(1, attempts.length), 2)}, max ${fmt(attempts.length ? Math.max(...attempts) : 0)}; of those that took the lock, holding covers their own and the combined waiters' calls.`,
        `Holding includes ${fmt(locked.length)} lock cycles' read, write, fsyncs, rename and posting the waiters' answers; phases inside holding are summed per reserve.`,
      ],
    };
  });

  return [
    {
      title: `MachineLedger vs kici ledger: reserve+release pairs on one pool, cap ${CAP.maxCpu} CPUs, 1 CPU each (${SECONDS} s per run${WARM_UP_MS > 0 ? ` after ${fmt(WARM_UP_MS / 1000, 1)} s of warm-up` : ''}, median of ${REPEATS} alternating runs)`,
      rows,
      notes: [
        `Machine: ${cpus().length} CPUs, load average ${loadBefore} before, ${loadAfter} after (other work on the machine makes figures noisy).`,
        `Ledger directories under ${BASE_DIR}: ${filesystemOf(BASE_DIR)}.`,
        `Target (issue 41): 8 processes, throughput >= 2.0x kici: ${fmt(ours8.rate / kici8.rate, 2)}x, ${met(ours8.rate >= 2 * kici8.rate)}.`,
        `Target (issue 41): 8 processes, p99 <= 0.3x kici: ${fmt(ours8.p99 / kici8.p99, 2)}x, ${met(ours8.p99 <= 0.3 * kici8.p99)}.`,
        before8 === undefined && WARM_UP_MS > 0
          ? `Target (issue 41): 8 processes, CPU per pair at most half of before it: ${fmt(ours8.cpuPerPair, 2)} ms; compare with LEDGER_BENCH_BEFORE (the recorded ${CPU_PER_PAIR_BEFORE} ms is of processes without warm-up).`
          : `Target (issue 41): 8 processes, CPU per pair at most half of before it (${before8 === undefined ? `${CPU_PER_PAIR_BEFORE} ms, measured 2026-12-07` : `${fmt(cpuBefore, 2)} ms at ${BEFORE_COMMIT}, this run`}): ${fmt(ours8.cpuPerPair, 2)} ms (${fmt(ours8.cpuPerPair / cpuBefore, 2)}x), ${met(ours8.cpuPerPair <= cpuBefore / 2)}.`,
        `Target: 16 processes no lower than 8: ${fmt(ours16.rate)} vs ${fmt(ours8.rate)}/s, ${met(ours16.rate >= ours8.rate)}.`,
        `Target: 0 over-cap states seen by the reader: ${met(runs.every((r) => r.violations === 0))}.`,
        `Reader: ${READER === 'watch' ? 'reads the pool file at each change of its directory (inotify) and every 50 ms' : 'reads the pool file in a loop (one core busy reading)'}.`,
      ],
    },
    ...breakdownTables,
    ...(inProcessRuns.length === 0
      ? []
      : [
          {
            title: `MachineLedger in one process (${SECONDS} s per scenario)`,
            rows: inProcessRuns.map((run) => ({
              scenario: run.scenario,
              'pairs/s': fmt(run.pairs / run.seconds),
              'reserve p50 ms': fmt(percentile(run.latencies, 50), 2),
              'reserve p99 ms': fmt(percentile(run.latencies, 99), 2),
              'reserve max ms': fmt(Math.max(...run.latencies), 2),
            })),
          },
        ]),
  ];
}
