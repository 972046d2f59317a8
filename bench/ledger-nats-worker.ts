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
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { Session } from 'node:inspector';
import { join } from 'node:path';
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
  /** No warm-up call before ready: the window starts with every process's first call. */
  cold?: boolean;
  /** Contention before the measured window (the steady state, not the first calls). */
  warmUpMs: number;
  durationMs: number;
  /** Where to write CPU profiles of the steady window (the combiner's and one sender's). */
  profileDir?: string;
}

const config = JSON.parse(process.argv[2] ?? '{}') as Config;
let conflicts = 0;
let writes = 0;
let forwards = 0;
/** The hand-written loop: the revision its last successful write stored (0 when it wrote nothing). */
let lastWritten = 0;

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
    lastWritten = 0;
    for (;;) {
      const entry = await kv.get(key);
      const doc =
        entry && entry.operation === 'PUT'
          ? parseDocument(entry.string(), source)
          : emptyDocument(cap);
      const next = decide(doc);
      if (next === undefined) return false;
      try {
        lastWritten =
          entry === null
            ? await kv.create(key, serializeDocument(next))
            : await kv.update(key, serializeDocument(next), entry.revision);
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
            {
              onConflict: () => conflicts++,
              afterCommit: () => writes++,
              onForward: () => forwards++,
            },
          ),
        );
if (config.backend !== 'cas') {
  const real = ledger as MachineLedger | NatsPoolLedger;
  real.registerPool(config.pool, { maxCpu: config.maxCpu });
}
// Warm up before saying ready: the connection, the lease, the pool's combiner
// (elected by the first call) and the code paths of one reserve and release.
if (!config.cold && (await ledger.tryReserve(config.pool, `${config.instanceId}-warm-up`, 1, 0))) {
  await ledger.release(config.pool, `${config.instanceId}-warm-up`);
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
// Every process contends from `startAt`; only cycles started in the steady
// window (after `warmUpMs` of contention) are counted, with the CPU and the
// counters of that window only.
const windowStart = startAt + config.warmUpMs;
const end = windowStart + config.durationMs;
const latencies: number[] = [];
/**
 * The hand-written loop's counted cycles: [cycle index, revision of the reserve, revision of
 * the release (0: the release found no row to remove)], for the bench to check against the
 * revisions its reader saw (on a server with nats-server#4320 a stored write can erase another).
 */
const held: Array<[number, number, number]> = [];
let cycles = 0;
let refused = 0;
let errors = 0;
let cpuAtStart: NodeJS.CpuUsage | undefined;
/** Wake-ups (voluntary context switches) of all this process's threads at the window's start. */
let switchesAtStart = 0;
/** CPU clock ticks of the threads other than the main one (V8's compiler and GC helpers, libuv's) at the window's start. */
let otherTicksAtStart = 0;
/** CPU clock ticks (user + system, 10 ms) of this process's threads other than the main thread so far (live ones). */
function otherThreadTicks(): number {
  let sum = 0;
  for (const task of readdirSync('/proc/self/task')) {
    if (Number(task) === process.pid) continue;
    try {
      const stat = readFileSync(`/proc/self/task/${task}/stat`, 'utf8');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      sum += Number(fields[11]) + Number(fields[12]);
    } catch {
      // The thread ended meanwhile.
    }
  }
  return sum;
}
/** Voluntary context switches (a thread blocked, then woken: its wake-ups) of every live thread of this process so far; preemptions, which grow with the load, are left out. */
function contextSwitches(): number {
  let sum = 0;
  for (const task of readdirSync('/proc/self/task')) {
    try {
      const status = readFileSync(`/proc/self/task/${task}/status`, 'utf8');
      for (const m of status.matchAll(/^voluntary_ctxt_switches:\s+(\d+)/gm)) sum += Number(m[1]);
    } catch {
      // The thread ended meanwhile.
    }
  }
  return sum;
}
let profiler: { stop(): Promise<void> } | undefined;
/** Profile this process's main thread (`node --cpu-prof` covers start-up too, which dominates). */
async function startProfile(name: string): Promise<{ stop(): Promise<void> }> {
  const session = new Session();
  session.connect();
  const post = (method: string, params?: object) =>
    new Promise<unknown>((resolve, reject) =>
      session.post(method, params, (error, result) => (error ? reject(error) : resolve(result))),
    );
  await post('Profiler.enable');
  await post('Profiler.setSamplingInterval', { interval: 500 });
  await post('Profiler.start');
  return {
    async stop() {
      const { profile } = (await post('Profiler.stop')) as { profile: unknown };
      writeFileSync(join(config.profileDir!, `${name}.cpuprofile`), JSON.stringify(profile));
      session.disconnect();
    },
  };
}
for (let i = 0; Date.now() < end; i++) {
  if (cpuAtStart === undefined && Date.now() >= windowStart) {
    // The pool's combiner (the process that wrote during the warm-up) and one sender.
    if (config.profileDir && (writes >= 10 || config.instanceId === 'bench-1')) {
      profiler = await startProfile(`${config.instanceId}-${writes >= 10 ? 'writer' : 'sender'}`);
    }
    cpuAtStart = process.cpuUsage();
    switchesAtStart = contextSwitches();
    otherTicksAtStart = otherThreadTicks();
    conflicts = 0;
    writes = 0;
    forwards = 0;
  }
  const counted = cpuAtStart !== undefined;
  const agent = `${config.instanceId}-${i}`;
  const t0 = performance.now();
  try {
    const granted = await ledger.tryReserve(config.pool, agent, 1, 0);
    if (counted) latencies.push(performance.now() - t0);
    if (granted) {
      const reservedAt = lastWritten;
      await ledger.release(config.pool, agent);
      if (counted) cycles++;
      if (counted && config.backend === 'cas') held.push([i, reservedAt, lastWritten]);
    } else if (counted) {
      refused++;
    }
  } catch (error) {
    if (counted) errors++;
    process.stderr.write(`${error instanceof Error ? error.message : String(error)}\n`);
  }
}
const cpu = process.cpuUsage(cpuAtStart ?? process.cpuUsage());
const switches = cpuAtStart === undefined ? 0 : contextSwitches() - switchesAtStart;
const otherThreadsCpuMs =
  cpuAtStart === undefined ? 0 : (otherThreadTicks() - otherTicksAtStart) * 10;
await profiler?.stop();
const cpuMs = (cpu.user + cpu.system) / 1000;
await ledger.close();
process.stdout.write(
  `${JSON.stringify({ event: 'done', cycles, refused, conflicts, writes, forwards, cpuMs, otherThreadsCpuMs, switches, errors, latencies, held })}\n`,
);
process.exit(0);
