/**
 * MachineLedger throughput and reserve latency: one process sequential (fsync
 * on, and off for comparison with the kici ledger's figure), 8 processes
 * contending on one pool, and one process with 32 concurrent callers (group commit).
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { MachineLedger } from '../src/ledger/index.js';
import { type BenchTable, fmt, percentile } from './lib.js';

const DURATION_MS = 3_000;

interface Run {
  scenario: string;
  pairs: number;
  seconds: number;
  latencies: number[];
  errors: number;
}

function row(run: Run): Record<string, string> {
  return {
    scenario: run.scenario,
    'pairs/s': fmt(run.pairs / run.seconds),
    'reserve p50 ms': fmt(percentile(run.latencies, 50), 2),
    'reserve p99 ms': fmt(percentile(run.latencies, 99), 2),
    'reserve max ms': fmt(Math.max(...run.latencies), 2),
    errors: String(run.errors),
  };
}

// `callers` concurrent loops of reserve+release in this process (1: sequential).
async function inProcess(callers: number, fsync: boolean, scenario: string): Promise<Run> {
  const dir = mkdtempSync(join(tmpdir(), 'ledger-bench-'));
  const ledger = new MachineLedger({ instanceId: 'bench', dir, fsync });
  ledger.registerPool('p', { maxCpu: 10_000 });
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
        await ledger.reserve('p', `c${c}-${i}`, 1, 1);
        latencies.push(performance.now() - t);
        await ledger.release('p', `c${c}-${i}`);
        pairs++;
      }
    }),
  );
  const seconds = (performance.now() - start) / 1000;
  await ledger.close();
  rmSync(dir, { recursive: true, force: true });
  return { scenario, pairs, seconds, latencies, errors: 0 };
}

async function contending(processes: number): Promise<Run> {
  const dir = mkdtempSync(join(tmpdir(), 'ledger-bench-'));
  const script = join(import.meta.dirname, 'ledger-worker.ts');
  const children: ChildProcess[] = [];
  const outputs: Array<Promise<string>> = [];
  const readies: Array<Promise<void>> = [];
  for (let i = 0; i < processes; i++) {
    const config = JSON.stringify({ dir, pool: 'p', id: `w${i}`, durationMs: DURATION_MS });
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
  await Promise.all(readies);
  const start = performance.now();
  for (const child of children) child.stdin!.end('go\n');
  const results = (await Promise.all(outputs)).map(
    (text) => JSON.parse(text) as { pairs: number; errors: number; latencies: number[] },
  );
  const seconds = (performance.now() - start) / 1000;
  rmSync(dir, { recursive: true, force: true });
  return {
    scenario: `${processes} processes contending, one pool, fsync on`,
    pairs: results.reduce((sum, r) => sum + r.pairs, 0),
    seconds,
    latencies: results.flatMap((r) => r.latencies),
    errors: results.reduce((sum, r) => sum + r.errors, 0),
  };
}

export default async function bench(): Promise<BenchTable[]> {
  const runs = [
    await inProcess(1, true, '1 process, sequential, fsync on'),
    await inProcess(1, false, '1 process, sequential, fsync off'),
    await contending(8),
    await inProcess(32, true, '1 process, 32 concurrent callers (group commit), fsync on'),
  ];
  const [seq, , contended, group] = runs as [Run, Run, Run, Run];
  const met = (ok: boolean) => (ok ? 'met' : 'NOT met');
  return [
    {
      title: `MachineLedger: reserve+release pairs (${DURATION_MS / 1000} s per scenario, tmpdir on this machine)`,
      rows: runs.map(row),
      notes: [
        `Target: sequential with fsync >= 400 pairs/s (kici ledger, no fsync): ${met(seq.pairs / seq.seconds >= 400)}.`,
        `Target: 8-process reserve p99 < 30 ms: ${met(percentile(contended.latencies, 99) < 30)}.`,
        `Target: group commit >= 3,000 reservations/s: ${met(group.pairs / group.seconds >= 3000)}.`,
      ],
    },
  ];
}
