/**
 * One contending process for bench/ledger.bench.ts: waits for `go` on stdin,
 * runs reserve/release pairs for `durationMs` with our MachineLedger or the
 * kici orchestrator's (loaded from `kiciModule`), prints its counts, reserve
 * latencies and, for ours, where the time of each reserve went (measured
 * through the ledger's `fs` seam: waiting for the lock, and inside the lock:
 * read, write, fsync, rename, directory fsync, the queue file, the combining
 * channel, lock directory calls; how many mkdir attempts; whether a holder in
 * another process answered it) and when it took and released the lock.
 */
import * as nodeFs from 'node:fs';
import { createInterface } from 'node:readline';

const config = JSON.parse(process.argv[2]!) as {
  impl: 'ours' | 'before' | 'kici';
  kiciModule?: string;
  /** For 'before': the machine-ledger module of another checkout (an earlier commit). */
  ledgerModule?: string;
  dir: string;
  pool: string;
  id: string;
  durationMs: number;
  cap: { maxCpu: number };
  fsync: boolean;
  /** Measure where each reserve's time goes through the fs seam (costs some CPU). */
  trace: boolean;
  /**
   * How long to run pairs after `go` before the measured window (default 0):
   * V8 compiles the hot code in the first seconds of a process, which a
   * long-running controller pays once.
   */
  warmUpMs?: number;
};

interface Ledger {
  tryReserve(pool: string, agent: string, cpus: number, mem: number): Promise<boolean>;
  release(pool: string, agent: string): Promise<unknown>;
  registerPool(pool: string, cap: { maxCpu: number }): void;
  close?(): Promise<void>;
}

// Per reserve: the phases seen through the fs seam (ms), and counts.
const PHASES = [
  'read',
  'write',
  'fsync',
  'rename',
  'dirsync',
  'queue',
  'combine',
  'lockops',
] as const;
type PhaseName = (typeof PHASES)[number];
const phase = {
  lockAt: 0,
  unlockAt: 0,
  attempts: 0,
  ...Object.fromEntries(PHASES.map((name) => [name, 0])),
} as Record<PhaseName | 'lockAt' | 'unlockAt' | 'attempts', number>;
// Lock hand-over events (epoch ms, monotonic): when this process took and released the lock.
const lockEvents: Array<[number, number]> = [];
const epochNow = () => performance.timeOrigin + performance.now();

// What a path is: the pool file, a temp file of it, the queue file, the
// combining channel, the lock directory (or our token inside it).
function classify(path: unknown, op: string): PhaseName | undefined {
  if (typeof path !== 'string') return undefined;
  if (path.includes('.combine')) return 'combine';
  if (path.endsWith('.queue')) return 'queue';
  if (/\.lock\/[^/]+\/[^/]+\.ans\.tmp$/.test(path)) return 'combine';
  if (/\.lock\/[^/]+\/[^/]+\.json\.tmp$/.test(path)) return op === 'rename' ? 'rename' : 'write';
  if (/\.lock\/[^/]+\/[^/]+\.req$/.test(path)) return 'combine';
  if (path.endsWith('.json')) return 'read';
  if (/\.lock(\/[^/]+)?$/.test(path)) return 'lockops';
  return undefined;
}

function instrumentedFs(): typeof nodeFs {
  const fs = { ...nodeFs } as Record<string, unknown>;
  const fdKind = new Map<number, PhaseName>();
  const real = nodeFs as unknown as Record<string, (...a: unknown[]) => unknown>;
  const timedCall = (kind: PhaseName | undefined, fn: () => unknown) => {
    if (kind === undefined) return fn();
    const t = performance.now();
    try {
      return fn();
    } finally {
      phase[kind] += performance.now() - t;
    }
  };
  for (const name of ['lstatSync', 'readdirSync', 'unlinkSync', 'rmSync', 'utimesSync']) {
    fs[name] = (...args: unknown[]) =>
      timedCall(classify(args[0], name), () => real[name]!(...args));
  }
  // A token directory just placed in the lock: the next listing of the lock is
  // the ownership check (other listings are waiters looking at who holds it).
  let tokenPlaced = false;
  fs.mkdirSync = (...args: unknown[]) => {
    if (typeof args[0] === 'string' && args[0].endsWith('.lock')) phase.attempts++;
    const result = timedCall(classify(args[0], 'mkdir'), () => real.mkdirSync!(...args));
    if (typeof args[0] === 'string' && /\.lock\/[^/]+$/.test(args[0])) tokenPlaced = true;
    return result;
  };
  fs.readdirSync = (...args: unknown[]) => {
    const result = timedCall(classify(args[0], 'readdir'), () => real.readdirSync!(...args));
    // The ownership check right after our token: the lock is ours from here.
    if (typeof args[0] === 'string' && args[0].endsWith('.lock') && tokenPlaced) {
      tokenPlaced = false;
      phase.lockAt = performance.now();
      lockEvents.push([epochNow(), 0]);
    }
    return result;
  };
  fs.rmdirSync = (...args: unknown[]) => {
    const result = timedCall(classify(args[0], 'rmdir'), () => real.rmdirSync!(...args));
    if (typeof args[0] === 'string' && /\.lock\/[^/]+$/.test(args[0])) {
      phase.unlockAt = performance.now();
      const last = lockEvents[lockEvents.length - 1];
      if (last && last[1] === 0) last[1] = epochNow();
    }
    return result;
  };
  fs.renameSync = (...args: unknown[]) =>
    timedCall(classify(args[0], 'rename') ?? classify(args[1], 'rename'), () =>
      real.renameSync!(...args),
    );
  fs.openSync = (...args: unknown[]) => {
    const kind = classify(args[0], 'open');
    const fd = timedCall(kind, () => real.openSync!(...args)) as number;
    if (kind !== undefined) fdKind.set(fd, kind);
    else fdKind.delete(fd);
    return fd;
  };
  for (const name of [
    'readSync',
    'writeSync',
    'writeFileSync',
    'fstatSync',
    'ftruncateSync',
    'closeSync',
    'futimesSync',
  ]) {
    fs[name] = (...args: unknown[]) =>
      timedCall(typeof args[0] === 'number' ? fdKind.get(args[0]) : undefined, () =>
        real[name]!(...args),
      );
  }
  fs.fdatasync = (fd: number, cb: (e: Error | null) => void) => {
    const t = performance.now();
    nodeFs.fdatasync(fd, (error) => {
      phase.fsync += performance.now() - t;
      cb(error);
    });
  };
  fs.fsync = (fd: number, cb: (e: Error | null) => void) => {
    const t = performance.now();
    nodeFs.fsync(fd, (error) => {
      phase.dirsync += performance.now() - t;
      cb(error);
    });
  };
  return fs as unknown as typeof nodeFs;
}

let ledger: Ledger;
if (config.impl === 'kici') {
  const mod = (await import(config.kiciModule!)) as {
    MachineLedger: new (o: { instanceId: string; explicitDir: string }) => Ledger;
  };
  ledger = new mod.MachineLedger({ instanceId: config.id, explicitDir: config.dir });
} else {
  const { MachineLedger } = (await import(
    config.impl === 'before' ? config.ledgerModule! : '../src/ledger/file/machine-ledger.js'
  )) as typeof import('../src/ledger/file/machine-ledger.js');
  ledger = new MachineLedger({
    instanceId: config.id,
    dir: config.dir,
    fsync: config.fsync,
    ...(config.trace ? { fs: instrumentedFs() } : {}),
  });
}
ledger.registerPool(config.pool, config.cap);
// Warm up (directory, lease, JIT) before the start line.
if (await ledger.tryReserve(config.pool, `${config.id}-warm`, 1, 0)) {
  await ledger.release(config.pool, `${config.id}-warm`);
}
process.stdout.write('ready\n');
await new Promise<void>((resolve) => {
  const lines = createInterface({ input: process.stdin });
  lines.once('line', () => {
    lines.close();
    process.stdin.destroy();
    resolve();
  });
});
// Reserve+release pairs for `durationMs`, recording each reserve's latency and
// (traced) where its time went.
async function runPairs(durationMs: number, prefix: string) {
  const run = {
    latencies: [] as number[],
    breakdown: [] as number[][],
    pairs: 0,
    granted: 0,
    errors: 0,
  };
  const end = performance.now() + durationMs;
  while (performance.now() < end) {
    const agent = `${config.id}-${prefix}${run.pairs}`;
    for (const key of Object.keys(phase)) phase[key as keyof typeof phase] = 0;
    const start = performance.now();
    try {
      const ok = await ledger.tryReserve(config.pool, agent, 1, 0);
      const done = performance.now();
      run.latencies.push(done - start);
      if (config.impl === 'ours' && config.trace) {
        // Answered by another process's holder: the whole call was waiting.
        const locked = phase.lockAt > 0;
        const waiting = locked ? phase.lockAt - start : done - start;
        const holding = locked ? (phase.unlockAt || done) - phase.lockAt : 0;
        run.breakdown.push([
          done - start,
          waiting,
          holding,
          ...PHASES.map((name) => phase[name]),
          phase.attempts,
          locked ? 0 : 1,
        ]);
      }
      if (ok) {
        run.granted++;
        await ledger.release(config.pool, agent);
      }
      run.pairs++;
    } catch {
      run.errors++;
    }
  }
  return run;
}
// Warm-up: the same contended pairs, not counted.
await runPairs(config.warmUpMs ?? 0, 'w');
lockEvents.length = 0;
const cpuStart = process.cpuUsage();
const windowStart = performance.now();
const { latencies, breakdown, pairs, granted, errors } = await runPairs(config.durationMs, '');
const windowMs = performance.now() - windowStart;
const cpu = process.cpuUsage(cpuStart);
const cpuMs = (cpu.user + cpu.system) / 1000;
const cpuSysMs = cpu.system / 1000;
await ledger.close?.();
process.stdout.write(
  `${JSON.stringify({ pairs, granted, errors, cpuMs, cpuSysMs, windowMs, latencies, breakdown, lockEvents })}\n`,
);
