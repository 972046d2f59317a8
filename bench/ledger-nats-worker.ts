/**
 * One contending process for `bench/ledger-nats.bench.ts`: reserve and release
 * in a loop from `startAt` for `durationMs`, then print one JSON line with the
 * number of cycles, the reserve latencies (ms), the lost CAS races and errors.
 *
 * Backends: `file` (MachineLedger), `nats` (NatsPoolLedger, with `combine`
 * on or off) and `cas`: the compare-and-set retry loop anyone would write by
 * hand on the same KV (read the key, check the cap, `update` at the revision
 * read, on a lost race read again), with the same document.
 */
import { Kvm } from '@nats-io/kv';
import { connect } from '@nats-io/transport-node';
import { isJetStreamRevisionConflict } from '../src/internal/nats-errors.js';
import { emptyDocument, parseDocument, serializeDocument } from '../src/ledger/document/codec.js';
import { checkFit } from '../src/ledger/document/fit.js';
import { addRow, removeRows } from '../src/ledger/document/rows.js';
import { MachineLedger } from '../src/ledger/file/machine-ledger.js';
import { NatsPoolLedger } from '../src/ledger/nats/nats-pool-ledger.js';
import { withNatsLedgerHooks } from '../src/ledger/nats/options.js';
import type { PoolLedger } from '../src/ledger/types.js';

interface Config {
  backend: 'file' | 'nats' | 'cas';
  combine?: boolean;
  dir?: string;
  servers?: string[];
  instanceId: string;
  pool: string;
  maxCpu: number;
  durationMs: number;
}

const config = JSON.parse(process.argv[2] ?? '{}') as Config;
let conflicts = 0;

/** The hand-written loop: a `PoolLedger`-shaped pair of reserve and release. */
async function handWritten(): Promise<
  Pick<PoolLedger, 'tryReserve' | 'release'> & { close(): Promise<void> }
> {
  const nc = await connect({ servers: config.servers });
  const kv = await new Kvm(nc).open('scaler-pools');
  const key = `pool.${config.pool}`;
  const source = { pool: config.pool, location: key };
  const cap = { maxCpu: config.maxCpu };
  async function change(
    decide: (doc: ReturnType<typeof emptyDocument>) => ReturnType<typeof emptyDocument> | undefined,
  ): Promise<boolean> {
    for (;;) {
      const entry = await kv.get(key);
      const doc =
        entry && entry.operation === 'PUT'
          ? parseDocument(entry.string(), source)
          : emptyDocument(cap);
      const next = decide(doc);
      if (next === undefined) return false;
      try {
        if (entry === null) await kv.create(key, serializeDocument(next));
        else await kv.update(key, serializeDocument(next), entry.revision);
        return true;
      } catch (error) {
        if (!isJetStreamRevisionConflict(error)) throw error;
        conflicts++;
      }
    }
  }
  return {
    tryReserve: (_pool, agentId, cpus, memBytes) =>
      change((doc) => {
        if (!checkFit(config.pool, doc.reservations, doc.cap, { cpus, memBytes }).ok)
          return undefined;
        return addRow(doc, {
          instanceId: config.instanceId,
          pid: process.pid,
          bootId: 'bench',
          agentId,
          cpus,
          memBytes,
          reservedAt: Date.now(),
        });
      }),
    release: (_pool, agentId) =>
      change((doc) => {
        const next = removeRows(doc, { agentId });
        return next.removed.length > 0 ? next.doc : undefined;
      }),
    close: () => nc.close(),
  };
}

const ledger =
  config.backend === 'cas'
    ? await handWritten()
    : config.backend === 'file'
      ? new MachineLedger({ instanceId: config.instanceId, dir: config.dir, leaseTtlMs: 60_000 })
      : await NatsPoolLedger.connect(
          withNatsLedgerHooks(
            {
              servers: config.servers,
              instanceId: config.instanceId,
              timeoutMs: 60_000,
              ...(config.combine !== undefined ? { combine: config.combine } : {}),
            },
            { onConflict: () => conflicts++ },
          ),
        );
if (config.backend !== 'cas') {
  const real = ledger as MachineLedger | NatsPoolLedger;
  real.registerPool(config.pool, { maxCpu: config.maxCpu });
  // Warm up the connection (and the lease) before the clock starts.
  await real.getUsage(config.pool);
}
process.stdout.write(`${JSON.stringify({ event: 'ready' })}\n`);

// The start time comes on stdin once every process is ready (start-up is slow on a busy machine).
const startAt = await new Promise<number>((resolve) => {
  let text = '';
  process.stdin.setEncoding('utf8').on('data', (chunk: string) => {
    text += chunk;
    if (text.includes('\n')) resolve(Number(text.trim()));
  });
});
await new Promise((resolve) => setTimeout(resolve, Math.max(0, startAt - Date.now())));
const latencies: number[] = [];
let cycles = 0;
let refused = 0;
let errors = 0;
const end = startAt + config.durationMs;
for (let i = 0; Date.now() < end; i++) {
  const agent = `${config.instanceId}-${i}`;
  const t0 = performance.now();
  try {
    const granted = await ledger.tryReserve(config.pool, agent, 1, 0);
    latencies.push(performance.now() - t0);
    if (granted) {
      await ledger.release(config.pool, agent);
      cycles++;
    } else {
      refused++;
    }
  } catch (error) {
    errors++;
    process.stderr.write(`${error instanceof Error ? error.message : String(error)}\n`);
  }
}
await ledger.close();
process.stdout.write(
  `${JSON.stringify({ event: 'done', cycles, refused, conflicts, errors, latencies })}\n`,
);
process.exit(0);
