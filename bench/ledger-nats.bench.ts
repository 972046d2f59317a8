/**
 * `npm run bench -- ledger-nats`: reservations per second and reserve latency
 * with 1 to 64 contending processes on one pool (the file ledger, one host: 1
 * to 8), for a single nats-server and a 3-node cluster (bucket with 3 replicas).
 * On NATS, side by side in the same run and alternating: the compare-and-set
 * loop anyone would write by hand on the same KV, and `NatsPoolLedger`. An
 * independent reader watches every revision of each pool key and counts the
 * ones over the cap; for the loop it also counts the reservations that held
 * (on a clustered nats-server before 2.9.21 a stored write can erase another's
 * row, and the loop's raw rate counts those too). The servers run on loopback with temp stores, started and
 * stopped here. `BENCH_NATS_COMBINE_OFF=1` adds rows for the ledger with
 * `combine: false` (every process writes for itself, as before 0.2).
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Kvm } from '@nats-io/kv';
import { connect } from '@nats-io/transport-node';
import { watchRevisions } from '../test/helpers/nats-ledger.js';
import { type NatsServer, startNatsCluster, startNatsServer } from '../test/helpers/nats-server.js';
import { type BenchTable, fmt, percentile } from './lib.js';

const DURATION_MS = 2500;
/**
 * Contention before the measured window, so that a row measures the steady state.
 * `BENCH_NATS_COLD=1` measures from every process's first call instead (no warm-up):
 * the combiner's election and the first calls of a fleet that starts at once.
 */
const COLD = process.env.BENCH_NATS_COLD === '1';
const WARM_UP_MS = COLD ? 0 : Number(process.env.BENCH_NATS_WARM_UP_MS ?? 1000);
// `BENCH_LEDGER_PROCESSES=8 BENCH_LEDGER_WHERE=single` narrows a run while tuning.
const PROCESSES = (process.env.BENCH_LEDGER_PROCESSES ?? '1,4,8,16,32,64').split(',').map(Number);
/** The file ledger's rows stop at 8 processes (`bench/ledger.bench.ts` measures it further). */
const FILE_PROCESSES = PROCESSES.filter((n) => n <= 8);
const WHERE = (process.env.BENCH_LEDGER_WHERE ?? 'file,single,cluster').split(',');
const worker = join(import.meta.dirname, 'ledger-nats-worker.ts');

interface WorkerResult {
  cycles: number;
  refused: number;
  conflicts: number;
  writes?: number;
  forwards?: number;
  cpuMs?: number;
  /** Of `cpuMs`, the threads other than the main one (V8's compiler and GC helpers, libuv's). */
  otherThreadsCpuMs?: number;
  /** Wake-ups (voluntary context switches) of all the process's threads in the window. */
  switches?: number;
  errors: number;
  latencies: number[];
  /** The hand-written loop: [cycle index, reserve revision, release revision or 0] per counted cycle. */
  held?: Array<[number, number, number]>;
}

function startWorker(config: Record<string, unknown>) {
  const child = spawn(process.execPath, ['--import', 'tsx', worker, JSON.stringify(config)], {
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
    out += chunk;
  });
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => {
    err += chunk;
  });
  const ready = new Promise<void>((resolve, reject) => {
    const check = setInterval(() => {
      if (out.includes('"ready"')) {
        clearInterval(check);
        resolve();
      } else if (child.exitCode !== null) {
        clearInterval(check);
        reject(new Error(`ledger worker failed: ${err}`));
      }
    }, 20);
  });
  const done = new Promise<WorkerResult>((resolve, reject) => {
    // 'close', not 'exit': 'exit' can come before the last of the worker's output has been read.
    child.on('close', () => {
      const line = out.split('\n').find((l) => l.includes('"done"'));
      if (line) resolve(JSON.parse(line) as WorkerResult);
      else reject(new Error(`ledger worker failed: ${err}`));
    });
  });
  const go = (startAt: number) => child.stdin.end(`${startAt}\n`);
  return { ready, done, go };
}

async function run(
  label: string,
  processes: number,
  backend: Record<string, unknown>,
): Promise<Record<string, string | number>> {
  const pool = `bench-${label.replace(/\W+/g, '-')}-${processes}-${Date.now()}`;
  const reader =
    backend.backend === 'file'
      ? undefined
      : await independentReader(backend, pool, processes, backend.backend === 'cas');
  const workers = Array.from({ length: processes }, (_, i) =>
    startWorker({
      ...backend,
      instanceId: `bench-${i}`,
      pool,
      maxCpu: processes,
      warmUpMs: WARM_UP_MS,
      cold: COLD,
      // `BENCH_NATS_CPU_PROF=<dir>`: CPU profiles of the steady window of the
      // pool's combiner and of one sender, written there.
      ...(process.env.BENCH_NATS_CPU_PROF ? { profileDir: process.env.BENCH_NATS_CPU_PROF } : {}),
      durationMs: DURATION_MS,
    }),
  );
  await Promise.all(workers.map((w) => w.ready));
  // Every worker is up (tsx start-up takes a while on 2 cores): start them together.
  const startAt = Date.now() + 200;
  for (const w of workers) w.go(startAt);
  const serverCpu = measureServers(startAt + WARM_UP_MS);
  const results = await Promise.all(workers.map((w) => w.done));
  const server = await serverCpu;
  const cycles = results.reduce((s, r) => s + r.cycles, 0);
  const conflicts = results.reduce((s, r) => s + r.conflicts, 0);
  const latencies = results.flatMap((r) => r.latencies);
  const errors = results.reduce((s, r) => s + (r.errors ?? 0), 0);
  const seen = await reader?.finish();
  const held =
    backend.backend === 'cas' && seen?.agentsByRevision
      ? heldCycles(results, seen.agentsByRevision)
      : undefined;
  if (process.env.BENCH_NATS_DEBUG === '1') {
    for (const [i, r] of results.entries()) {
      const { latencies: l, ...rest } = r;
      process.stderr.write(
        `${label} ${processes} #${i} ${JSON.stringify(rest)} p50 ${fmt(percentile(l, 50), 1)} max ${fmt(Math.max(...l), 1)}\n`,
      );
    }
  }
  const cpuMs = results.reduce((s, r) => s + (r.cpuMs ?? 0), 0);
  const switches = results.reduce((s, r) => s + (r.switches ?? 0), 0);
  const otherThreadsMs = results.reduce((s, r) => s + (r.otherThreadsCpuMs ?? 0), 0);
  measuredRuns.set(`${label}/${processes}`, {
    rate: (cycles * 1000) / DURATION_MS,
    ...(held ? { heldRate: (held.held * 1000) / DURATION_MS } : {}),
    p99: percentile(latencies, 99),
    violations: seen?.violations ?? 0,
  });
  const writes = results.reduce((s, r) => s + (r.writes ?? 0), 0);
  return {
    ledger: label,
    processes,
    'reservations/s': fmt((cycles * 1000) / DURATION_MS),
    'loop: of them held': held
      ? `${fmt((held.held * 1000) / DURATION_MS)} (${held.unseen} unseen)`
      : '-',
    'reserve p50 ms': fmt(percentile(latencies, 50), 2),
    'reserve p99 ms': fmt(percentile(latencies, 99), 2),
    'lost CAS races per reservation': backend.backend === 'file' ? '-' : fmt(conflicts / cycles, 2),
    'KV writes per reservation': backend.backend === 'nats' ? fmt(writes / cycles, 2) : '-',
    'CPU ms per reservation (processes + servers)': `${fmt(cpuMs / cycles, 2)} + ${backend.backend === 'file' ? '0' : fmt(server.cpuMs / cycles, 2)}`,
    "processes' CPU in other threads than main": `${fmt((100 * otherThreadsMs) / cpuMs)}%`,
    'wake-ups per reservation (processes + servers)': `${fmt(switches / cycles, 1)} + ${backend.backend === 'file' ? '0' : fmt(server.switches / cycles, 1)}`,
    errors,
    'violations seen / revisions read': seen ? `${seen.violations} of ${seen.revisions}` : '-',
  };
}

/** Figures by `<label>/<processes>`, for the target lines under the table. */
const measuredRuns = new Map<
  string,
  { rate: number; heldRate?: number; p99: number; violations: number }
>();

/**
 * The hand-written loop's counted cycles whose reservation really held: no revision the reader
 * saw from the reserve's revision up to the release's lacks the agent's row, none from the
 * release on holds it, and the release found the row. On a clustered nats-server before 2.9.21
 * (nats-server#4320) writes from one revision can all be stored, each erasing the others'
 * changes: such a cycle counts in the loop's raw rate but its row was gone (or came back).
 * `unseen`: held cycles whose reserve revision the reader did not see (skipped: history 1).
 */
function heldCycles(
  results: WorkerResult[],
  agentsByRevision: Map<number, Set<string>>,
): { held: number; unseen: number } {
  const revisions = [...agentsByRevision.keys()].sort((a, b) => a - b);
  let held = 0;
  let unseen = 0;
  results.forEach((result, w) => {
    for (const [i, reservedAt, releasedAt] of result.held ?? []) {
      if (reservedAt === 0 || releasedAt === 0) continue;
      const agent = `bench-${w}-${i}`;
      let ok = true;
      // Revisions after the release: only the first few can hold a late copy of the row.
      for (const revision of revisions) {
        if (revision < reservedAt) continue;
        const has = agentsByRevision.get(revision)!.has(agent);
        if (revision < releasedAt ? !has : has) {
          ok = false;
          break;
        }
        if (revision > releasedAt + 64) break;
      }
      if (!ok) continue;
      held++;
      if (!agentsByRevision.has(reservedAt)) unseen++;
    }
  });
  return { held, unseen };
}

/** One line per target of issue 41, from the rows of this run (only those that ran). */
function targetNotes(): string[] {
  const notes: string[] = [];
  const met = (ok: boolean) => (ok ? 'met' : 'NOT met');
  for (const where of ['1 server', '3-node cluster, R3']) {
    const ours = (n: number) => measuredRuns.get(`NatsPoolLedger, ${where}/${n}`);
    const loop = measuredRuns.get(`hand-written CAS loop, ${where}/8`);
    const at8 = ours(8);
    if (at8 && loop) {
      const x = at8.rate / loop.rate;
      notes.push(
        `${where}, 8 processes: ${fmt(x, 1)}x the hand-written loop (target >= 5x): ${met(x >= 5)}`,
      );
      if (loop.heldRate !== undefined && loop.heldRate < loop.rate) {
        notes.push(
          `${where}, 8 processes: ${loop.heldRate > 0 ? `${fmt(at8.rate / loop.heldRate, 1)}x` : 'all of'} the loop's reservations that held (${fmt(loop.heldRate)} of ${fmt(loop.rate)}/s; the others were erased by a write from the same revision, nats-server#4320)`,
        );
      }
    }
    if (at8 && where.includes('R3')) {
      notes.push(
        `${where}, 8 processes: p99 ${fmt(at8.p99, 1)} ms (target <= 25 ms): ${met(at8.p99 <= 25)}`,
      );
    }
    const at64 = ours(64);
    if (at8 && at64) {
      const x = at64.rate / at8.rate;
      notes.push(
        `${where}, 64 processes: ${fmt(x, 2)}x the 8-process rate (target >= 0.8x): ${met(x >= 0.8)}`,
      );
    }
    const over = [...measuredRuns.entries()]
      .filter(([key]) => key.startsWith(`NatsPoolLedger, ${where}/`))
      .reduce((sum, [, run]) => sum + run.violations, 0);
    if (ours(8) || at64)
      notes.push(
        `${where}: revisions over the cap (NatsPoolLedger, all rows): ${over} (target 0): ${met(over === 0)}`,
      );
  }
  return notes;
}

/** The nats-server processes of the rows being run (their CPU is counted in the window). */
let serverPids: number[] = [];

/**
 * CPU ms (user + system) and context switches (of all their threads) of the servers in the
 * measured window starting at `from` (epoch ms).
 */
async function measureServers(from: number): Promise<{ cpuMs: number; switches: number }> {
  const ticks = () =>
    serverPids.reduce((sum, pid) => {
      try {
        const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
        const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
        return sum + Number(fields[11]) + Number(fields[12]);
      } catch {
        return sum;
      }
    }, 0);
  const switches = () => serverPids.reduce((sum, pid) => sum + contextSwitches(pid), 0);
  await new Promise((r) => setTimeout(r, Math.max(0, from - Date.now())));
  const before = { ticks: ticks(), switches: switches() };
  await new Promise((r) => setTimeout(r, DURATION_MS));
  // Clock ticks of 10 ms (USER_HZ 100).
  return { cpuMs: (ticks() - before.ticks) * 10, switches: switches() - before.switches };
}

/** Voluntary context switches (wake-ups; preemptions left out) of every live thread of process `pid` so far. */
function contextSwitches(pid: number): number {
  let sum = 0;
  try {
    for (const task of readdirSync(`/proc/${pid}/task`)) {
      try {
        const status = readFileSync(`/proc/${pid}/task/${task}/status`, 'utf8');
        for (const m of status.matchAll(/^voluntary_ctxt_switches:\s+(\d+)/gm)) sum += Number(m[1]);
      } catch {
        // The thread ended meanwhile.
      }
    }
  } catch {
    // The process is gone.
  }
  return sum;
}

/** Watch every revision of the pool key from a separate connection, checking it against the cap. */
async function independentReader(
  backend: Record<string, unknown>,
  pool: string,
  maxCpu: number,
  keepAgents: boolean,
) {
  const nc = await connect({ servers: backend.servers as string[] });
  const kv = await new Kvm(nc).open('scaler-pools');
  const report = await watchRevisions(kv, pool, { maxCpu }, { keepAgents });
  return {
    async finish() {
      await new Promise((r) => setTimeout(r, 300));
      report.stop();
      await nc.close();
      return {
        violations: report.violations.length,
        revisions: report.revisions.length,
        agentsByRevision: report.agentsByRevision,
      };
    },
  };
}

/** Run the hand-written loop and the ledger for `processes`, alternating which goes first. */
async function pair(
  rows: Array<Record<string, string | number>>,
  where: string,
  processes: number,
  servers: string[],
  round: number,
): Promise<void> {
  const variants: Array<[string, Record<string, unknown>]> = [
    [`hand-written CAS loop, ${where}`, { backend: 'cas', servers }],
    [`NatsPoolLedger, ${where}`, { backend: 'nats', servers }],
  ];
  if (process.env.BENCH_NATS_COMBINE_OFF === '1') {
    variants.push([
      `NatsPoolLedger combine off, ${where}`,
      { backend: 'nats', servers, combine: false },
    ]);
  }
  // `BENCH_NATS_ONLY=NatsPoolLedger` keeps the variants whose label starts with it (tuning).
  const only = process.env.BENCH_NATS_ONLY;
  if (only) variants.splice(0, variants.length, ...variants.filter(([l]) => l.startsWith(only)));
  if (round % 2 === 1) variants.reverse();
  const measured = new Map<string, Record<string, string | number>>();
  for (const [label, backend] of variants)
    measured.set(label, await run(label, processes, backend));
  for (const [label] of [...variants].sort((a, b) => a[0].localeCompare(b[0])))
    rows.push(measured.get(label)!);
}

async function prepare(urls: string[], replicas: number): Promise<void> {
  const nc = await connect({ servers: urls });
  try {
    for (let attempt = 0; ; attempt++) {
      try {
        await new Kvm(nc).create('scaler-pools', { replicas, history: 1, allow_direct: false });
        return;
      } catch (error) {
        if (attempt > 100) throw error;
        await new Promise((r) => setTimeout(r, 200));
      }
    }
  } finally {
    await nc.close();
  }
}

export default async function bench(): Promise<BenchTable[]> {
  const rows: Array<Record<string, string | number>> = [];
  if (WHERE.includes('file')) {
    const dir = mkdtempSync(join(tmpdir(), 'bench-file-ledger-'));
    try {
      for (const n of FILE_PROCESSES)
        rows.push(await run('file (one host, fsync)', n, { backend: 'file', dir }));
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }
  if (WHERE.includes('single')) await single(rows);
  if (WHERE.includes('cluster')) await cluster(rows);
  return [
    {
      title: 'pool ledgers: contending processes on one pool (reserve + release cycles)',
      rows,
      notes: [...NOTES, ...targetNotes()],
    },
  ];
}

async function single(rows: Array<Record<string, string | number>>): Promise<void> {
  const server = await startNatsServer();
  try {
    await prepare([server.url], 1);
    serverPids = [server.process.pid!];
    for (const [i, n] of PROCESSES.entries()) await pair(rows, '1 server', n, [server.url], i);
  } finally {
    await server.stop();
  }
}

async function cluster(rows: Array<Record<string, string | number>>): Promise<void> {
  const servers: NatsServer[] = await startNatsCluster('bench');
  try {
    const urls = servers.map((s) => s.url);
    await prepare(urls, 3);
    serverPids = servers.map((s) => s.process.pid!);
    for (const [i, n] of PROCESSES.entries())
      await pair(rows, '3-node cluster, R3', n, urls, i + 1);
  } finally {
    await Promise.all(servers.map((s) => s.stop()));
  }
}

const NOTES = [
  `Each process reserves 1 cpu and releases it in a loop; the cap equals the`,
  'number of processes, so every request fits and the cost measured is contention on one pool.',
  'All servers and processes share this machine (loopback; the cluster pays Raft replication).',
  'The hand-written loop and the ledger run one after the other for each row pair, the order',
  'alternating; an independent reader checks every revision it sees against the cap.',
  "Loop: of them held: the loop's cycles whose row is in every revision the reader saw from the",
  "reserve's to the release's, and in none after (unseen: its reserve's revision was skipped).",
  'A cycle whose row a write from the same revision erased (nats-server#4320, R3) does not count.',
  `Every process warms up (one reserve and release) before the start; all then contend for`,
  `${WARM_UP_MS} ms before a measured window of ${DURATION_MS} ms: rates, latencies, lost races, KV writes and`,
  'CPU (user + system of the processes; of the servers, from /proc) and wake-ups (voluntary context',
  'switches of all their threads, from /proc) are of that window only.',
];
