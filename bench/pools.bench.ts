/**
 * `npm run bench -- pools`: what a reservation in two pools costs next to one in
 * one pool (issue 33: at most 2.2x on the same ledgers, one extra round trip and
 * no more).
 *
 * At the ledger level, one cycle is what the manager does for an agent: reserve
 * in each pool in name order, then release in each. Pool `a` caps CPU and
 * memory; pool `b` caps GPUs and lists 64 device ids, so every grant in `b` is
 * also a device assignment. Two pairs of ledgers: two `MachineLedger`s (fsync
 * on, separate temp dirs), and a `MachineLedger` plus a `NatsPoolLedger` on a
 * nats-server started here (skipped with a note when `nats-server` is missing).
 * Each case runs sequentially (1 caller) and with 16 concurrent callers in one
 * process; the cost of a cycle is wall time / cycles. Cases alternate within a
 * repeat; the table shows medians over repeats.
 *
 * Through the manager: `requestScale`, then `drain` (the agent destroyed) or
 * `onAgentDisconnected`, for entries with `machinePool: 'a'`, `machinePool: 'b'`
 * and `machinePools: ['a', 'b']`, on the same ledgers, with a FakeBackend.
 *
 * `POOLS_BENCH_MS` (default 1000) per run, `POOLS_BENCH_REPEATS` (default 5).
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { MachineLedger } from '../src/ledger/index.js';
import { NatsPoolLedger } from '../src/ledger/nats/index.js';
import type { PoolLedger } from '../src/ledger/types.js';
import { type ScalerConfigInput, ScalerManager } from '../src/manager/index.js';
import { FakeBackend } from '../src/testing/index.js';
import { type NatsServer, startNatsServer } from '../test/helpers/nats-server.js';
import { type BenchTable, fmt, percentile } from './lib.js';

const RUN_MS = Number(process.env.POOLS_BENCH_MS ?? 1000);
const REPEATS = Number(process.env.POOLS_BENCH_REPEATS ?? 5);
const CONCURRENT = 16;
const GIB = 2 ** 30;
const DEVICE_IDS = Array.from({ length: 64 }, (_, i) => String(i));
/** Pool `a`: this host's CPU and memory. */
const CAP_A = { maxCpu: 10_000, maxMemoryBytes: 10_000 * GIB };
/** Pool `b`: a GPU budget with device ids. */
const CAP_B = {
  maxExtended: { 'nvidia.com/gpu': DEVICE_IDS.length },
  devices: { 'nvidia.com/gpu': DEVICE_IDS },
};
const GPU = { 'nvidia.com/gpu': 1 };

interface Measured {
  /** Mean ms of one cycle as a caller sees it. */
  mean: number;
  /** Median ms of one cycle. */
  p50: number;
}

/** One reserve + release cycle, as a function of a unique agent id. */
type Cycle = (agent: string) => Promise<void>;

/**
 * Run `callers` loops for RUN_MS, each loop taking the cycles in turn (one of
 * each kind, then again), so every kind runs under the same load at the same
 * time: the disk and the machine are shared, and fsync times drift.
 */
async function interleaved(cycles: Cycle[], callers: number, tag: string): Promise<Measured[]> {
  for (const [k, cycle] of cycles.entries()) await cycle(`${tag}-warm-${k}`);
  const latencies = cycles.map((): number[] => []);
  const end = performance.now() + RUN_MS;
  await Promise.all(
    Array.from({ length: callers }, async (_, c) => {
      for (let i = 0; performance.now() < end; i++) {
        const k = (i + c) % cycles.length;
        const t = performance.now();
        await cycles[k]!(`${tag}-${c}-${i}`);
        latencies[k]!.push(performance.now() - t);
      }
    }),
  );
  return latencies.map((list) => ({
    mean: list.reduce((s, v) => s + v, 0) / list.length,
    p50: percentile(list, 50),
  }));
}

function granted(result: { ok: boolean }, where: string): void {
  if (!result.ok) throw new Error(`refused in ${where}: ${JSON.stringify(result)}`);
}

/** Reserve in `a` only, then release. */
function oneInA(a: PoolLedger): Cycle {
  return async (agent) => {
    granted(await a.reserve('a', agent, 0.25, 0.25 * GIB), 'a');
    await a.release('a', agent);
  };
}

/** Reserve in `b` only (one GPU, a device assigned), then release. */
function oneInB(b: PoolLedger): Cycle {
  return async (agent) => {
    granted(await b.reserve('b', agent, 0, 0, { extended: GPU }), 'b');
    await b.release('b', agent);
  };
}

/** Reserve in `a` then `b` (name order, as the manager does), then release both. */
function both(a: PoolLedger, b: PoolLedger): Cycle {
  return async (agent) => {
    granted(await a.reserve('a', agent, 0.25, 0.25 * GIB), 'a');
    granted(await b.reserve('b', agent, 0, 0, { extended: GPU }), 'b');
    await a.release('a', agent);
    await b.release('b', agent);
  };
}

/** Medians over REPEATS interleaved runs of `cycles`. */
async function repeated(cycles: Cycle[], callers: number, tag: string): Promise<Measured[]> {
  const runs: Measured[][] = [];
  for (let r = 0; r < REPEATS; r++) runs.push(await interleaved(cycles, callers, `${tag}${r}`));
  const median = (values: number[]) => percentile(values, 50);
  return cycles.map((_, k) => ({
    mean: median(runs.map((run) => run[k]!.mean)),
    p50: median(runs.map((run) => run[k]!.p50)),
  }));
}

/** One line of the table: a one-pool cycle in each pool and the two-pool cycle. */
export interface PairRow {
  ledgers: string;
  callers: number;
  oneA: Measured;
  oneB: Measured;
  two: Measured;
}

/** The cost of a two-pool cycle over the dearer one-pool cycle (the 2.2x target). */
export const ratio = (row: PairRow) => row.two.mean / Math.max(row.oneA.mean, row.oneB.mean);

export function pairRow(row: PairRow): Record<string, string | number> {
  return {
    ledgers: row.ledgers,
    callers: row.callers,
    'one pool a, ms': fmt(row.oneA.mean, 3),
    'one pool b, ms': fmt(row.oneB.mean, 3),
    'pools a+b, ms': fmt(row.two.mean, 3),
    'p50 a / b / a+b ms': [row.oneA, row.oneB, row.two].map((m) => fmt(m.p50, 2)).join(' / '),
    'a+b / dearer one': fmt(ratio(row), 2),
    'same, p50s': fmt(row.two.p50 / Math.max(row.oneA.p50, row.oneB.p50), 2),
    'a+b / (a + b)': fmt(row.two.mean / (row.oneA.mean + row.oneB.mean), 2),
  };
}

async function pair(
  rows: PairRow[],
  ledgers: string,
  a: PoolLedger,
  b: PoolLedger,
  tag: string,
): Promise<void> {
  a.registerPool('a', CAP_A);
  b.registerPool('b', CAP_B);
  for (const callers of [1, CONCURRENT]) {
    const [oneA, oneB, two] = await repeated(
      [oneInA(a), oneInB(b), both(a, b)],
      callers,
      `${tag}${callers}-`,
    );
    rows.push({ ledgers, callers, oneA: oneA!, oneB: oneB!, two: two! });
  }
}

async function fileAndFile(rows: PairRow[], managed: PairRow[]): Promise<void> {
  const dirA = mkdtempSync(join(tmpdir(), 'bench-pools-a-'));
  const dirB = mkdtempSync(join(tmpdir(), 'bench-pools-b-'));
  const a = new MachineLedger({ instanceId: 'bench', dir: dirA });
  const b = new MachineLedger({ instanceId: 'bench', dir: dirB });
  try {
    await pair(rows, 'MachineLedger a, MachineLedger b', a, b, 'f');
    await throughManager(managed, 'MachineLedger a, MachineLedger b', a, b, 'mf');
  } finally {
    await a.close();
    await b.close();
    rmSync(dirA, { recursive: true, force: true });
    rmSync(dirB, { recursive: true, force: true });
  }
}

async function fileAndNats(rows: PairRow[], managed: PairRow[], server: NatsServer): Promise<void> {
  const dirA = mkdtempSync(join(tmpdir(), 'bench-pools-a-'));
  const a = new MachineLedger({ instanceId: 'bench', dir: dirA });
  const b = await NatsPoolLedger.connect({ servers: server.url, instanceId: 'bench' });
  try {
    await pair(rows, 'MachineLedger a, NatsPoolLedger b', a, b, 'n');
    await throughManager(managed, 'MachineLedger a, NatsPoolLedger b', a, b, 'mn');
  } finally {
    await b.close();
    await a.close();
    rmSync(dirA, { recursive: true, force: true });
  }
}

// ------------------------------------------------------------------ through the manager

const MANAGER_CONFIG: ScalerConfigInput = {
  globalMaxAgents: 10_000,
  machinePools: {
    a: { maxCpu: 10_000, maxMemory: '10000Gi' },
    b: { maxExtended: { 'nvidia.com/gpu': DEVICE_IDS.length }, devices: CAP_B.devices },
  },
  scalers: [
    { name: 'a', machinePool: 'a', labels: ['a'] },
    { name: 'b', machinePool: 'b', labels: ['b'] },
    { name: 'ab', machinePools: ['a', 'b'], labels: ['ab'] },
  ].map(({ labels, ...entry }) => ({
    ...entry,
    type: 'container',
    maxAgents: 1000,
    resourceCap: { maxCpu: 10_000, maxExtended: { 'nvidia.com/gpu': DEVICE_IDS.length } },
    labelSets: [{ labels, resources: { cpus: 0.25, memory: '256Mi' } }],
  })),
};

/**
 * Spawn for a job, then end the agent: `drain` (destroyed through the backend;
 * it resolves once the agent is gone and its rows are released) or `disconnect`
 * (`onAgentDisconnected`, which resolves once the rows are released in every pool).
 */
function spawnAndEnd(m: ScalerManager, label: string, gpus: number, end: End): Cycle {
  const resources = gpus > 0 ? { requests: { 'nvidia.com/gpu': gpus } } : undefined;
  return async (job) => {
    const result = await m.requestScale({ jobId: job, labels: [label], resources: resources });
    if (result.kind !== 'spawned') throw new Error(`${label}: ${JSON.stringify(result)}`);
    if (end === 'drain') await m.drain(result.agentId);
    else await m.onAgentDisconnected(result.agentId);
  };
}

type End = 'drain' | 'disconnect';

async function throughManager(
  rows: PairRow[],
  ledgers: string,
  a: PoolLedger,
  b: PoolLedger,
  tag: string,
): Promise<void> {
  const backend = new FakeBackend();
  const m = new ScalerManager({
    config: MANAGER_CONFIG,
    backends: ['a', 'b', 'ab'].map((name) => ({ name, backend })),
    ledgers: { a, b },
  });
  try {
    for (const end of ['drain', 'disconnect'] as const) {
      for (const callers of [1, CONCURRENT]) {
        const [oneA, oneB, two] = await repeated(
          [spawnAndEnd(m, 'a', 0, end), spawnAndEnd(m, 'b', 1, end), spawnAndEnd(m, 'ab', 1, end)],
          callers,
          `${tag}${end}${callers}-`,
        );
        rows.push({ ledgers: `${ledgers}, ${end}`, callers, oneA: oneA!, oneB: oneB!, two: two! });
      }
    }
  } finally {
    await m.shutdownAll();
  }
}

function hasNatsServer(): boolean {
  try {
    execFileSync('nats-server', ['--version'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

export default async function bench(): Promise<BenchTable[]> {
  const rows: PairRow[] = [];
  const managed: PairRow[] = [];
  const notes: string[] = [];
  await fileAndFile(rows, managed);
  if (hasNatsServer()) {
    const server = await startNatsServer();
    try {
      await fileAndNats(rows, managed, server);
    } finally {
      await server.stop();
    }
  } else {
    notes.push('nats-server not found: the MachineLedger + NatsPoolLedger rows were skipped.');
  }
  const target = (list: PairRow[]) => {
    const worst = Math.max(...list.map(ratio));
    return `Target: a+b costs at most 2.2x the dearer one-pool cycle on the same ledgers: worst ${fmt(worst, 2)}x, ${worst <= 2.2 ? 'met' : 'NOT met'}.`;
  };
  return [
    {
      title: 'pools: a reservation in two pools next to one pool (ledger level, reserve + release)',
      rows: rows.map(pairRow),
      notes: [
        target(rows),
        'A cycle reserves in every pool in name order, then releases in each (pool b assigns a',
        `GPU device id with every grant). Each caller takes the three cycles in turn for ${RUN_MS} ms,`,
        `so they run under the same load; ms is the mean cycle, medians of ${REPEATS} runs.`,
        '"a+b / (a + b)" near 1 means the two-pool cycle costs its two round trips and no more;',
        '"same, p50s" is the ratio of the medians (less moved by fsync stalls of other work).',
        ...notes,
      ],
    },
    {
      title: 'pools: through the manager (requestScale, then drain or disconnect; FakeBackend)',
      rows: managed.map(pairRow),
      notes: [
        target(managed),
        "Scalers with machinePool 'a', machinePool 'b' (one GPU) and machinePools ['a', 'b'] (one",
        'GPU) on one manager; a cycle spawns an agent for a job, then drains it (destroyed) or',
        'reports it disconnected; either resolves once its rows are released in every pool.',
        'Cycles in turn as above.',
        ...notes,
      ],
    },
  ];
}
