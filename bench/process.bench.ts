/**
 * `npm run bench -- process`: the cost of `ProcessBackend` with 50 real agents
 * (`sleep 300`, each under the backend's exit-recording shell, in its own
 * process group): spawn one, `list()` all, `list()` from a new instance over
 * the same directory (what a restarted controller does), destroy one, and
 * shut down the rest. A last row counts processes of the agents' groups still
 * alive after the shutdown (it must be 0).
 *
 * `PROCESS_BENCH_AGENTS` (default 50).
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import type { SpawnRequest } from '../src/manager/index.js';
import { ProcessBackend } from '../src/process/index.js';
import { type BenchTable, fmt, percentile } from './lib.js';

const AGENTS = Number(process.env.PROCESS_BENCH_AGENTS ?? 50);

function request(agentId: string): SpawnRequest {
  return {
    agentId,
    scaler: 'bench',
    jobId: `job-${agentId}`,
    warm: false,
    labels: ['bench'],
    labelSetIndex: 0,
    mandatoryLabels: [],
    resources: { requests: { cpus: 1, memBytes: 2 ** 30 }, limits: { cpus: 1, memBytes: 2 ** 30 } },
    emit: () => {},
  };
}

/** Pids of live, non-zombie processes whose process group is one of `groups`. */
function membersOf(groups: Set<number>): number[] {
  const found: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    let stat: string;
    try {
      stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
    } catch {
      continue;
    }
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    if (fields[0] !== 'Z' && groups.has(Number(fields[2]))) found.push(Number(entry));
  }
  return found;
}

async function timed(fn: () => Promise<unknown>): Promise<number> {
  const start = performance.now();
  await fn();
  return performance.now() - start;
}

function row(operation: string, samples: number[]) {
  return {
    operation,
    samples: samples.length,
    'p50 ms': fmt(percentile(samples, 50), 2),
    'p95 ms': fmt(percentile(samples, 95), 2),
    'max ms': fmt(Math.max(...samples), 2),
  };
}

export default async function bench(): Promise<BenchTable[]> {
  const dir = mkdtempSync(join(tmpdir(), 'process-bench-'));
  const backend = new ProcessBackend({ dir: join(dir, 'agents'), command: ['sleep', '300'] });
  const groups = new Set<number>();
  const load = loadavg()[0]!;
  try {
    const spawns: number[] = [];
    const cpuBefore = process.cpuUsage();
    for (let i = 0; i < AGENTS; i++)
      spawns.push(await timed(() => backend.spawn(request(`a${i}`))));
    const spawnCpu = process.cpuUsage(cpuBefore);
    for (const name of readdirSync(join(dir, 'agents')).filter((f) => f.endsWith('.json'))) {
      groups.add(
        (JSON.parse(readFileSync(join(dir, 'agents', name), 'utf8')) as { pid: number }).pid,
      );
    }
    const lists: number[] = [];
    let listed = 0;
    for (let i = 0; i < 10; i++) {
      lists.push(await timed(async () => (listed = (await backend.list()).length)));
    }
    const restartLists: number[] = [];
    let relisted = 0;
    for (let i = 0; i < 5; i++) {
      const fresh = new ProcessBackend({ dir: join(dir, 'agents'), command: ['sleep', '300'] });
      restartLists.push(await timed(async () => (relisted = (await fresh.list()).length)));
      fresh.close();
    }
    const destroys: number[] = [];
    for (let i = 0; i < 10; i++) destroys.push(await timed(() => backend.destroy(`a${i}`)));
    const shutdownMs = await timed(() => backend.shutdown());
    const left = membersOf(groups).length;
    return [
      {
        title: `ProcessBackend, ${AGENTS} agents (sleep 300), load average ${fmt(load, 1)} at start`,
        rows: [
          row('spawn one', spawns),
          row(`list() of ${listed}`, lists),
          row(`list() of ${relisted} by a new instance`, restartLists),
          row('destroy one', destroys),
          row(`shutdown of the other ${AGENTS - 10}`, [shutdownMs]),
        ],
        notes: [
          `Controller CPU per spawn: ${fmt((spawnCpu.user + spawnCpu.system) / 1000 / AGENTS, 2)} ms (user + system).`,
          `Processes of the agents' groups alive after shutdown: ${left} (must be 0).`,
        ],
      },
    ];
  } finally {
    await backend.shutdown().catch(() => {});
    rmSync(dir, { recursive: true, force: true });
  }
}
