/**
 * Two orchestrators sharing one machine pool through the file ledger:
 *
 * 1. both register the pool with the same cap,
 * 2. they reserve for their agents until the pool is full; refusals say why,
 * 3. one of them goes away without releasing, and the other gets the capacity
 *    back because that instance's lease has ended,
 * 4. graceful shutdown: release everything this instance holds, then close.
 *
 * Run: npx tsx examples/03-ledger.ts
 * (uses a throwaway directory; in production leave `dir` unset to share
 * /var/lib/scaler-primitives/ledger with every orchestrator on the host;
 * kici orchestrators use scaler-primitives/kici, whose default is kici's own)
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { MachineLedger, type ReserveResult } from 'scaler-primitives/ledger';

const GiB = 2 ** 30;
const dir = mkdtempSync(join(tmpdir(), 'ledger-example-'));
const pool = 'build-host';
const cap = { maxCpu: 8, maxMemoryBytes: 16 * GiB };

const alpha = new MachineLedger({ instanceId: 'orchestrator-alpha', dir });
const beta = new MachineLedger({ instanceId: 'orchestrator-beta', dir });
alpha.registerPool(pool, cap);
beta.registerPool(pool, cap);

function show(who: string, agent: string, result: ReserveResult) {
  if (result.ok) {
    console.log(`${who}: reserved ${agent}`);
  } else {
    const [scale, unit] = result.dimension === 'cpu' ? [1, 'cores'] : [GiB, 'GiB'];
    const [used, requested, max] = [result.used, result.requested, result.max].map(
      (n) => n / scale,
    );
    console.log(
      `${who}: refused ${agent}: ${result.dimension} ${used} + ${requested} > ${max} ${unit}` +
        (result.neverFits ? ' (never fits this pool)' : ''),
    );
  }
}

show('alpha', 'a-1', await alpha.reserve(pool, 'a-1', 4, 4 * GiB));
show('beta ', 'b-1', await beta.reserve(pool, 'b-1', 2, 8 * GiB));
show('beta ', 'b-2', await beta.reserve(pool, 'b-2', 2, 8 * GiB)); // memory is full
show('beta ', 'b-3', await beta.reserve(pool, 'b-3', 12, GiB)); // more than the whole pool
console.log('usage seen by beta:', await beta.getUsage(pool));

// Concurrent calls from one process share one lock/read/write cycle (group commit).
const burst = await Promise.all(
  ['a-2', 'a-3', 'a-4'].map((agent) => alpha.tryReserve(pool, agent, 0.5, 0.5 * GiB)),
);
console.log('alpha burst granted:', burst);

// alpha closes without releasing: its lease ends, so its rows are stale for
// beta at once. (A SIGKILLed process cannot end its lease; its rows become
// stale when the lease is older than `leaseTtlMs`, 30 s by default.)
await alpha.close();
console.log('alpha is gone; live rows seen by beta:', (await beta.list(pool)).length);
console.log('reaped by beta:', await beta.reapStale(pool));
show('beta ', 'b-2', await beta.reserve(pool, 'b-2', 2, 4 * GiB));

for (const row of await beta.list(pool)) {
  console.log(
    `  ${row.agentId.padEnd(4)} ${row.instanceId.padEnd(18)} ${row.cpus} cores ${row.memBytes / GiB} GiB`,
  );
}

// Graceful shutdown.
await beta.releaseAllForInstance();
await beta.close();
console.log(
  'after shutdown:',
  await new MachineLedger({ instanceId: 'auditor', dir }).getUsage(pool),
);
rmSync(dir, { recursive: true, force: true });
