/**
 * Moving a kici orchestrator onto scaler-primitives one import at a time:
 *
 * 1. its scaler config file goes through `toScalerConfig`, which says what has no
 *    equivalent (errors until handled, warnings to read);
 * 2. its `MachineLedger` import switches to `scaler-primitives/kici`: same calls, same
 *    directory and pool files, so it keeps sharing pools with kici processes on the host;
 * 3. its nftables helpers keep their call shapes (`parseRuleHandles` shown here; the others
 *    need root and nft, see docs/migrating-from-kici.md).
 *
 * Run: npx tsx examples/13-kici-migration.ts
 * (uses a throwaway directory; in production leave `explicitDir` unset, or pass
 * `kiciLedgerDirFromEnv()` as kici's orchestrator does)
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  type KiciScalerConfig,
  MachineLedger,
  parseRuleHandles,
  toScalerConfig,
} from 'scaler-primitives/kici';

// 1. A kici scaler config, as its YAML file parses.
const kiciConfig: KiciScalerConfig = {
  version: 1,
  globalResourceCap: { maxCpu: 24, maxMemory: '48g' },
  machinePools: [{ name: 'build-host', cap: { maxCpu: 16, maxMemory: '32 g' } }],
  scalers: [
    {
      name: 'containers',
      type: 'container',
      maxAgents: 8,
      machinePool: 'build-host',
      roles: ['builder'],
      warmPool: { enabled: true, size: 2 },
      labelSets: [
        {
          labels: ['linux', 'docker'],
          image: 'ghcr.io/example/agent:1.4',
          resources: { cpus: 2, memory: '3.5g' },
        },
      ],
    },
  ],
};

let result = toScalerConfig(kiciConfig);
for (const issue of result.issues) {
  console.log(`${issue.severity.padEnd(7)} ${issue.path.join('.')}: ${issue.message}`);
}
// `roles` is an error until handled: here every job of this orchestrator is a builder job.
result = toScalerConfig(kiciConfig, { acknowledge: ['roles'] });
console.log(`\nok=${result.ok}; ScalerManager config:`);
console.log(JSON.stringify(result.config, null, 2));

// 2. The ledger, with kici's call shapes.
const dir = mkdtempSync(join(tmpdir(), 'kici-migration-'));
const ledger = new MachineLedger({ explicitDir: dir, instanceId: 'orchestrator-a' });
try {
  const pool = result.config!.machinePools['build-host']!;
  ledger.registerPool('build-host', pool);
  ledger.start();
  for (const agent of ['agent-1', 'agent-2', 'agent-3']) {
    const granted = await ledger.tryReserve('build-host', agent, 6, 8 * 2 ** 30);
    console.log(`\ntryReserve ${agent} (6 cpus, 8 GiB): ${granted}`);
  }
  console.log('usage', await ledger.getUsage('build-host'));
  await ledger.release('build-host', 'agent-1');
  console.log('after release', await ledger.getUsage('build-host'));
  await ledger.releaseAllForInstance();
  ledger.stop();
} finally {
  await ledger.close();
  rmSync(dir, { recursive: true, force: true });
}

// 3. Exact matching: `veth-ab` no longer matches `veth-abc`'s rules.
const listing = [
  'iifname "veth-abc" ip daddr 10.0.0.0/8 drop # handle 5',
  'iifname "veth-ab" ip daddr 10.0.0.0/8 drop # handle 6',
].join('\n');
console.log(
  `\nparseRuleHandles(listing, 'veth-ab') -> ${JSON.stringify(parseRuleHandles(listing, 'veth-ab'))}`,
);
