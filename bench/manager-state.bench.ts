/**
 * `requestScale`/s with each state store, at 1 and 64 concurrent callers: a
 * spawn (its record committed before the backend is called) and the
 * disconnect that deletes it. No machine pool, so the store's cost shows: no
 * store (today's behaviour), MemoryStateStore, FileStateStore (fsync on and
 * off) and NatsStateStore on a local nats-server (when installed).
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  FileStateStore,
  MemoryStateStore,
  ScalerManager,
  type StateStore,
} from '../src/manager/index.js';
import { startNatsServer } from '../test/helpers/nats-server.js';
import { type BenchTable, fmt, percentile } from './lib.js';

function manager(stateStore: StateStore | undefined): ScalerManager {
  const backend = { async spawn() {}, async destroy() {} };
  return new ScalerManager({
    config: {
      globalMaxAgents: 10_000,
      scalers: [
        {
          name: 'vm',
          type: 'container',
          maxAgents: 10_000,
          labelSets: [{ labels: ['linux'], resources: { cpus: 1, memory: '1Gi' } }],
        },
      ],
    },
    backends: [{ name: 'vm', backend }],
    ...(stateStore ? { stateStore } : {}),
  });
}

async function measure(m: ScalerManager, concurrency: number, ms: number) {
  let n = 0;
  const latencies: number[] = [];
  const until = performance.now() + ms;
  const start = performance.now();
  const worker = async () => {
    while (performance.now() < until) {
      const i = n++;
      const t0 = performance.now();
      const result = await m.requestScale({ jobId: `job-${i}`, labels: ['linux'] });
      if (result.kind !== 'spawned') throw new Error(`unexpected ${result.kind}`);
      latencies.push(performance.now() - t0);
      await m.onAgentDisconnected(result.agentId);
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  const seconds = (performance.now() - start) / 1000;
  return { perSecond: n / seconds, p50: percentile(latencies, 50), p99: percentile(latencies, 99) };
}

function hasNatsServer(): boolean {
  try {
    execFileSync('nats-server', ['--version'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

export default async function (): Promise<BenchTable[]> {
  const rows: BenchTable['rows'] = [];
  const run = async (name: string, store: StateStore | undefined) => {
    const m = manager(store);
    await measure(m, 1, 150); // warm-up
    for (const concurrency of [1, 64]) {
      const r = await measure(m, concurrency, 1000);
      rows.push({
        case: `${name}, ${concurrency} concurrent`,
        'requestScale/s': fmt(r.perSecond),
        'p50 µs': fmt(r.p50 * 1000, 1),
        'p99 µs': fmt(r.p99 * 1000, 1),
      });
    }
    await m.shutdownAll();
  };
  await run('no store (in memory only)', undefined);
  await run('MemoryStateStore', new MemoryStateStore());
  for (const fsync of [true, false]) {
    const dir = mkdtempSync(join(tmpdir(), 'bench-state-'));
    try {
      await run(
        `FileStateStore (fsync ${fsync ? 'on' : 'off'})`,
        new FileStateStore({ dir, fsync }),
      );
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }
  if (hasNatsServer()) {
    const server = await startNatsServer();
    const { connect } = await import('@nats-io/transport-node');
    const { NatsStateStore } = await import('../src/manager/nats/index.js');
    const nc = await connect({ servers: server.url });
    try {
      await run('NatsStateStore (local nats-server)', await NatsStateStore.open(nc));
    } finally {
      await nc.close();
      await server.stop();
    }
  } else {
    rows.push({
      case: 'NatsStateStore: nats-server not installed',
      'requestScale/s': '',
      'p50 µs': '',
      'p99 µs': '',
    });
  }
  return [
    {
      title: 'manager: requestScale with a state store (spawn recorded durably, then released)',
      rows,
      notes: [
        'Each spawn waits for its record to be durable before the backend is called; concurrent',
        'spawns share commits (group commit), so 64 callers pay about one commit latency each,',
        'not 64. The capacity check itself never waits for the store.',
      ],
    },
  ];
}
