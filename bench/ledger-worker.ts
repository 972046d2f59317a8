/**
 * One contending process for bench/ledger.bench.ts: waits for `go` on stdin,
 * runs reserve/release pairs for `durationMs` with our MachineLedger or the
 * kici orchestrator's (loaded from `kiciModule`), prints its counts, reserve
 * latencies and, for ours, where the time of each reserve went (measured
 * through the ledger's `fs` seam: waiting for the lock, and inside the lock:
 * read, write, fsync, rename).
 */
import * as nodeFs from 'node:fs';
import { createInterface } from 'node:readline';
import { MachineLedger } from '../src/ledger/index.js';

const config = JSON.parse(process.argv[2]!) as {
  impl: 'ours' | 'kici';
  kiciModule?: string;
  dir: string;
  pool: string;
  id: string;
  durationMs: number;
  cap: { maxCpu: number };
  fsync: boolean;
};

interface Ledger {
  tryReserve(pool: string, agent: string, cpus: number, mem: number): Promise<boolean>;
  release(pool: string, agent: string): Promise<unknown>;
  registerPool(pool: string, cap: { maxCpu: number }): void;
  close?(): Promise<void>;
}

// Per reserve: the phases seen through the fs seam (ms).
const phase = { lockAt: 0, read: 0, write: 0, fsync: 0, rename: 0, unlockAt: 0 };
const timed = (name: keyof typeof phase, fn: () => unknown) => {
  const t = performance.now();
  try {
    return fn();
  } finally {
    phase[name] += performance.now() - t;
  }
};
function instrumentedFs(): typeof nodeFs {
  const fs = { ...nodeFs } as Record<string, unknown>;
  const isTemp = (p: unknown) => typeof p === 'string' && /\.lock\/[^/]+\/[^/]+\.tmp$/.test(p);
  const isToken = (p: unknown) => typeof p === 'string' && /\.lock\/[^/]+$/.test(p);
  fs.readdirSync = (...args: unknown[]) => {
    const result = (nodeFs.readdirSync as (...a: unknown[]) => unknown)(...args);
    // The ownership check right after our token: the lock is ours from here.
    if (typeof args[0] === 'string' && args[0].endsWith('.lock')) phase.lockAt = performance.now();
    return result;
  };
  fs.readFileSync = (...args: unknown[]) =>
    typeof args[0] === 'string' && args[0].endsWith('.json')
      ? timed('read', () => (nodeFs.readFileSync as (...a: unknown[]) => unknown)(...args))
      : (nodeFs.readFileSync as (...a: unknown[]) => unknown)(...args);
  fs.openSync = (...args: unknown[]) =>
    isTemp(args[0])
      ? timed('write', () => (nodeFs.openSync as (...a: unknown[]) => unknown)(...args))
      : (nodeFs.openSync as (...a: unknown[]) => unknown)(...args);
  fs.writeFileSync = (...args: unknown[]) =>
    timed('write', () => (nodeFs.writeFileSync as (...a: unknown[]) => unknown)(...args));
  fs.fdatasync = (fd: number, cb: (e: Error | null) => void) => {
    const t = performance.now();
    nodeFs.fdatasync(fd, (error) => {
      phase.fsync += performance.now() - t;
      cb(error);
    });
  };
  fs.renameSync = (...args: unknown[]) =>
    isTemp(args[0])
      ? timed('rename', () => (nodeFs.renameSync as (...a: unknown[]) => unknown)(...args))
      : (nodeFs.renameSync as (...a: unknown[]) => unknown)(...args);
  fs.rmdirSync = (...args: unknown[]) => {
    const result = (nodeFs.rmdirSync as (...a: unknown[]) => unknown)(...args);
    if (typeof args[0] === 'string' && args[0].endsWith('.lock'))
      phase.unlockAt = performance.now();
    else if (isToken(args[0])) phase.unlockAt = performance.now();
    return result;
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
  ledger = new MachineLedger({
    instanceId: config.id,
    dir: config.dir,
    fsync: config.fsync,
    fs: instrumentedFs(),
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
const latencies: number[] = [];
const breakdown: number[][] = [];
let pairs = 0;
let granted = 0;
let errors = 0;
const end = performance.now() + config.durationMs;
while (performance.now() < end) {
  const agent = `${config.id}-${pairs}`;
  Object.assign(phase, { lockAt: 0, read: 0, write: 0, fsync: 0, rename: 0, unlockAt: 0 });
  const start = performance.now();
  try {
    const ok = await ledger.tryReserve(config.pool, agent, 1, 0);
    const done = performance.now();
    latencies.push(done - start);
    if (phase.lockAt > 0) {
      const waiting = phase.lockAt - start;
      const holding = (phase.unlockAt || done) - phase.lockAt;
      breakdown.push([waiting, holding, phase.read, phase.write, phase.fsync, phase.rename]);
    }
    if (ok) {
      granted++;
      await ledger.release(config.pool, agent);
    }
    pairs++;
  } catch {
    errors++;
  }
}
await ledger.close?.();
process.stdout.write(`${JSON.stringify({ pairs, granted, errors, latencies, breakdown })}\n`);
