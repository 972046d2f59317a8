/**
 * One contending process for bench/ledger.bench.ts: waits for `go` on stdin,
 * runs reserve/release pairs for `durationMs`, prints its counts and reserve latencies.
 */
import { createInterface } from 'node:readline';
import { MachineLedger } from '../src/ledger/index.js';

const { dir, pool, id, durationMs } = JSON.parse(process.argv[2]!) as {
  dir: string;
  pool: string;
  id: string;
  durationMs: number;
};
const ledger = new MachineLedger({ instanceId: id, dir });
ledger.registerPool(pool, { maxCpu: 10_000 });
// Warm up (directory, lease, JIT) before the start line.
await ledger.reserve(pool, `${id}-warm`, 1, 1);
await ledger.release(pool, `${id}-warm`);
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
let pairs = 0;
let errors = 0;
const end = performance.now() + durationMs;
while (performance.now() < end) {
  const agent = `${id}-${pairs}`;
  const start = performance.now();
  try {
    await ledger.reserve(pool, agent, 1, 1);
    latencies.push(performance.now() - start);
    await ledger.release(pool, agent);
    pairs++;
  } catch {
    errors++;
  }
}
await ledger.close();
process.stdout.write(`${JSON.stringify({ pairs, errors, latencies })}\n`);
