/**
 * One pool shared by orchestrators on many hosts, on NATS JetStream KV:
 *
 * 1. two orchestrator instances (standing for two hosts) connect to the same bucket,
 * 2. both reserve agents against one pool until it is full; a refusal says why,
 * 3. one instance goes away without releasing; once its lease has ended the
 *    other reaps its rows and uses the room,
 * 4. the survivor releases everything and closes.
 *
 * Run against a NATS server with JetStream enabled:
 *   nats-server -js &
 *   NATS_URL=nats://127.0.0.1:4222 npx tsx examples/06-cluster-pool.ts
 * For a cluster, give every server: NATS_URL=nats://a:4222,nats://b:4222,nats://c:4222
 */
import { isScalerError } from 'scaler-primitives';
import { NatsPoolLedger } from 'scaler-primitives/ledger/nats';

const url = process.env.NATS_URL;
if (!url) {
  console.log(
    'This example needs a NATS server with JetStream. Start one and point NATS_URL at it:',
  );
  console.log('  nats-server -js &');
  console.log('  NATS_URL=nats://127.0.0.1:4222 npx tsx examples/06-cluster-pool.ts');
  process.exit(0);
}

const servers = url.split(',');
const GiB = 2 ** 30;
// A shared budget: 8 cores and 32 GiB of GPU hosts, drawn on by every orchestrator.
const pool = 'example-gpu';
const cap = { maxCpu: 8, maxMemoryBytes: 32 * GiB };

// One line, not a stack, when the server is not there.
const unreachable = (error: Error): never => {
  console.error(
    `Cannot reach a NATS server at ${url} (${error.message}); start one with \`nats-server -js\` (Debian: apt-get install nats-server) or unset NATS_URL.`,
  );
  process.exit(1);
};
const hostA = await NatsPoolLedger.connect({
  servers,
  instanceId: 'orchestrator-a',
  leaseMs: 3000,
}).catch(unreachable);
const hostB = await NatsPoolLedger.connect({
  servers,
  instanceId: 'orchestrator-b',
  leaseMs: 3000,
}).catch(unreachable);
for (const ledger of [hostA, hostB]) ledger.registerPool(pool, cap);
// Peers reap the rows of ended leases every second (the default is 30 s).
hostB.start(1000);

try {
  // Both hosts take agents of 2 cores / 8 GiB until the pool says no.
  let n = 0;
  for (;;) {
    const host = n % 2 === 0 ? hostA : hostB;
    const agent = `agent-${n}`;
    const result = await host.reserve(pool, agent, 2, 8 * GiB);
    if (!result.ok) {
      console.log(
        `${host.instanceId}: ${agent} refused, ${result.dimension} ${result.used} + ${result.requested} > ${result.max}`,
      );
      break;
    }
    console.log(`${host.instanceId}: ${agent} granted`);
    n++;
  }
  console.log('usage:', await hostB.getUsage(pool));

  // Host A goes away without releasing (here: close() ends its lease at once;
  // a crashed host's lease ends when its heartbeat is older than leaseMs).
  await hostA.close();
  const started = Date.now();
  while ((await hostB.getUsage(pool)).cpus > 4) {
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  console.log(`orchestrator-a's rows no longer count after ${Date.now() - started} ms`);
  console.log('reaped now:', await hostB.reapStale(pool));
  console.log(
    'orchestrator-b: agent-late granted:',
    await hostB.tryReserve(pool, 'agent-late', 2, 8 * GiB),
  );
  for (const row of await hostB.list(pool)) {
    console.log(
      `  ${row.agentId} held by ${row.instanceId}: ${row.cpus} cpu, ${row.memBytes / GiB} GiB`,
    );
  }
} catch (error) {
  if (isScalerError(error)) console.error(`ledger error ${error.code}: ${error.message}`);
  throw error;
} finally {
  await hostB.releaseAllForInstance();
  await hostB.close();
  await hostA.close();
}
