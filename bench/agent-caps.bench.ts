/**
 * agent-caps: codec throughput, and the latency of a host's read (one
 * JetStream direct get) against a nats-server this bench starts on loopback
 * when `nats-server` is on PATH.
 */
import { execFileSync } from 'node:child_process';
import {
  capsFromResources,
  decodeAgentCaps,
  encodeAgentCaps,
  renderDropIn,
} from '../src/agent-caps/index.js';
import { startNatsServer } from '../test/helpers/nats-server.js';
import { type BenchTable, fmt, opsPerSecond, percentile } from './lib.js';

const caps = { cpuQuota: '400%', memoryMax: '8G' };
const bytes = encodeAgentCaps(caps);
const withUnknown = new TextEncoder().encode(
  '{"cpu_quota":"400%","memory_max":"8G","io_weight":"10"}',
);

function codecTable(): BenchTable {
  const rows = [
    ['encodeAgentCaps (validates)', () => encodeAgentCaps(caps)],
    ['decodeAgentCaps (validates)', () => decodeAgentCaps(bytes)],
    ['decodeAgentCaps, unknown field', () => decodeAgentCaps(withUnknown)],
    ['decodeAgentCaps { raw: true }', () => decodeAgentCaps(bytes, { raw: true })],
    ['capsFromResources', () => capsFromResources({ cpus: 3.5, memBytes: 6 * 1024 ** 3 })],
    ['renderDropIn', () => renderDropIn(caps, { section: 'Scope' })],
  ] as const;
  return {
    title: 'agent-caps codec',
    rows: rows.map(([name, fn]) => ({ operation: name, 'ops/s': fmt(opsPerSecond(fn)) })),
  };
}

function hasNatsServer(): boolean {
  try {
    execFileSync('sh', ['-c', 'command -v nats-server'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

async function time(n: number, fn: () => Promise<unknown>): Promise<number[]> {
  for (let i = 0; i < 200; i++) await fn(); // warm-up
  const samples: number[] = [];
  for (let i = 0; i < n; i++) {
    const start = performance.now();
    await fn();
    samples.push(performance.now() - start);
  }
  return samples;
}

async function natsTable(): Promise<BenchTable> {
  const { connect } = await import('@nats-io/transport-node');
  const { openOrCreateCapsBucket, readAgentCaps, writeAgentCaps } = await import(
    '../src/agent-caps/nats/index.js'
  );
  const server = await startNatsServer();
  const nc = await connect({ servers: server.url });
  try {
    const kv = await openOrCreateCapsBucket(nc);
    await writeAgentCaps(kv, 'iris', caps);
    const n = 5000;
    const direct = await time(n, () => readAgentCaps(nc, 'iris'));
    const missing = await time(n, () => readAgentCaps(nc, 'nobody'));
    const leader = await time(n, () => kv.get('iris'));
    const row = (what: string, samples: number[]) => ({
      read: what,
      n: samples.length,
      'p50 ms': fmt(percentile(samples, 50), 3),
      'p99 ms': fmt(percentile(samples, 99), 3),
      'reads/s (sequential)': fmt(1000 / (samples.reduce((a, b) => a + b, 0) / samples.length)),
    });
    return {
      title: `agent-caps read latency (nats-server ${nc.info?.version ?? '?'} on loopback, one connection, file storage, R1)`,
      rows: [
        row('readAgentCaps: direct get, key set', direct),
        row('readAgentCaps: direct get, key missing', missing),
        row('kv.get via the stream leader (for comparison)', leader),
      ],
      notes: ['Sequential requests: latency, not the server\u2019s throughput.'],
    };
  } finally {
    await nc.close();
    await server.stop();
  }
}

export default async (): Promise<BenchTable[]> => {
  const tables = [codecTable()];
  if (hasNatsServer()) tables.push(await natsTable());
  else
    tables.push({
      title: 'agent-caps read latency',
      rows: [],
      notes: ['skipped: nats-server is not on PATH'],
    });
  return tables;
};
