/**
 * One contending process for `bench/ledger-nats.bench.ts`: reserve and release
 * in a loop from `startAt` for `durationMs`, then print one JSON line with the
 * number of cycles, the reserve latencies (ms) and the lost CAS races.
 */
import { MachineLedger } from '../src/ledger/index.js';
import { NatsPoolLedger } from '../src/ledger/nats/index.js';
import type { PoolLedger } from '../src/ledger/types.js';

interface Config {
  backend: 'file' | 'nats';
  dir?: string;
  servers?: string[];
  instanceId: string;
  pool: string;
  maxCpu: number;
  startAt: number;
  durationMs: number;
}

const config = JSON.parse(process.argv[2] ?? '{}') as Config;
let conflicts = 0;
const ledger: PoolLedger =
  config.backend === 'file'
    ? new MachineLedger({ instanceId: config.instanceId, dir: config.dir, leaseTtlMs: 60_000 })
    : await NatsPoolLedger.connect({
        servers: config.servers,
        instanceId: config.instanceId,
        timeoutMs: 60_000,
        hooks: { onConflict: () => conflicts++ },
      });
ledger.registerPool(config.pool, { maxCpu: config.maxCpu });
// Warm up the connection (and the lease) before the clock starts.
await ledger.getUsage(config.pool);
process.stdout.write(`${JSON.stringify({ event: 'ready' })}\n`);

await new Promise((resolve) => setTimeout(resolve, Math.max(0, config.startAt - Date.now())));
const latencies: number[] = [];
let cycles = 0;
let refused = 0;
const end = config.startAt + config.durationMs;
for (let i = 0; Date.now() < end; i++) {
  const agent = `${config.instanceId}-${i}`;
  const t0 = performance.now();
  const granted = await ledger.tryReserve(config.pool, agent, 1, 0);
  latencies.push(performance.now() - t0);
  if (granted) {
    await ledger.release(config.pool, agent);
    cycles++;
  } else {
    refused++;
  }
}
await ledger.close();
process.stdout.write(
  `${JSON.stringify({ event: 'done', cycles, refused, conflicts, latencies })}\n`,
);
process.exit(0);
