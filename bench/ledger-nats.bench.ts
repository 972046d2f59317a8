/**
 * `npm run bench -- ledger-nats`: reservations per second and reserve latency
 * with 1, 4 and 8 contending processes on one pool, for the file ledger (one
 * host), a single nats-server and a 3-node cluster (bucket with 3 replicas).
 * The servers run on loopback with temp stores, started and stopped here.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Kvm } from '@nats-io/kv';
import { connect } from '@nats-io/transport-node';
import { freePort, type NatsServer, startNatsServer } from '../test/helpers/nats-server.js';
import { type BenchTable, fmt, percentile } from './lib.js';

const DURATION_MS = 2500;
const PROCESSES = [1, 4, 8];
const worker = join(import.meta.dirname, 'ledger-nats-worker.ts');

interface WorkerResult {
  cycles: number;
  refused: number;
  conflicts: number;
  latencies: number[];
}

function startWorker(config: Record<string, unknown>) {
  const child = spawn(process.execPath, ['--import', 'tsx', worker, JSON.stringify(config)], {
    stdio: ['ignore', 'pipe', 'pipe'],
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
    child.on('exit', () => {
      const line = out.split('\n').find((l) => l.includes('"done"'));
      if (line) resolve(JSON.parse(line) as WorkerResult);
      else reject(new Error(`ledger worker failed: ${err}`));
    });
  });
  return { ready, done };
}

async function run(
  label: string,
  processes: number,
  backend: Record<string, unknown>,
): Promise<Record<string, string | number>> {
  const pool = `bench-${label.replace(/\W+/g, '-')}-${processes}-${Date.now()}`;
  // The start time is set once every worker is up (tsx start-up takes a while on 2 cores).
  const startAt = Date.now() + 1500 + processes * 600;
  const workers = Array.from({ length: processes }, (_, i) =>
    startWorker({
      ...backend,
      instanceId: `bench-${i}`,
      pool,
      maxCpu: processes,
      startAt,
      durationMs: DURATION_MS,
    }),
  );
  await Promise.all(workers.map((w) => w.ready));
  const late = Date.now() > startAt;
  const results = await Promise.all(workers.map((w) => w.done));
  const cycles = results.reduce((s, r) => s + r.cycles, 0);
  const conflicts = results.reduce((s, r) => s + r.conflicts, 0);
  const latencies = results.flatMap((r) => r.latencies);
  return {
    ledger: label,
    processes: `${processes}${late ? ' (late start)' : ''}`,
    'reservations/s': fmt((cycles * 1000) / DURATION_MS),
    'reserve p50 ms': fmt(percentile(latencies, 50), 2),
    'reserve p99 ms': fmt(percentile(latencies, 99), 2),
    'lost CAS races per reservation': backend.backend === 'nats' ? fmt(conflicts / cycles, 2) : '-',
  };
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
  const dir = mkdtempSync(join(tmpdir(), 'bench-file-ledger-'));
  try {
    for (const n of PROCESSES)
      rows.push(await run('file (one host, fsync)', n, { backend: 'file', dir }));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }

  const single = await startNatsServer();
  try {
    await prepare([single.url], 1);
    for (const n of PROCESSES) {
      rows.push(await run('nats, 1 server', n, { backend: 'nats', servers: [single.url] }));
    }
  } finally {
    await single.stop();
  }

  const routes = [await freePort(), await freePort(), await freePort()];
  const cluster: NatsServer[] = await Promise.all(
    routes.map((port, i) =>
      startNatsServer({ cluster: { name: 'bench', port, routes, serverName: `n${i}` } }),
    ),
  );
  try {
    const urls = cluster.map((s) => s.url);
    await prepare(urls, 3);
    for (const n of PROCESSES) {
      rows.push(await run('nats, 3-node cluster, R3', n, { backend: 'nats', servers: urls }));
    }
  } finally {
    await Promise.all(cluster.map((s) => s.stop()));
  }

  return [
    {
      title: 'pool ledgers: contending processes on one pool (reserve + release cycles)',
      rows,
      notes: [
        `Each process reserves 1 cpu and releases it in a loop for ${DURATION_MS} ms; the cap equals the`,
        'number of processes, so every request fits and the cost measured is contention on one pool.',
        'All servers and processes share this machine (loopback; the cluster pays Raft replication).',
      ],
    },
  ];
}
