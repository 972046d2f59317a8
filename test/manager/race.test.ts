/**
 * Hundreds of concurrent requestScale calls, with slow and failing backends, a
 * slow pool ledger and agents leaving mid-way, never exceed any limit; and when
 * every agent is gone, every usage is exactly zero.
 */
import fc from 'fast-check';
import {
  type ScalerConfigInput,
  ScalerManager,
  type SpawnRequest,
} from 'scaler-primitives/manager';
import { MemoryPoolLedger, TestClock } from 'scaler-primitives/testing';
import { describe, expect, it } from 'vitest';

const Gi = 2 ** 30;
const config: ScalerConfigInput = {
  globalMaxAgents: 12,
  resourceCap: { maxCpu: 10, maxMemory: '20Gi' },
  machinePools: { host: { maxCpu: 6, maxMemory: '12Gi' } },
  scalers: [
    {
      name: 'a',
      type: 'c',
      maxAgents: 5,
      machinePool: 'host',
      resourceCap: { maxCpu: 4 },
      labelSets: [{ labels: ['linux', 'x'] }, { labels: ['linux', 'y'] }],
    },
    {
      name: 'b',
      type: 'c',
      maxAgents: 6,
      machinePool: 'host',
      labelSets: [{ labels: ['linux', 'x'] }],
    },
    { name: 'c', type: 'c', maxAgents: 4, labelSets: [{ labels: ['linux', 'z'] }] },
  ],
};
const maxAgents: Record<string, number> = { a: 5, b: 6, c: 4 };

function tick(rng: () => number) {
  const r = rng();
  if (r < 0.3) return Promise.resolve();
  if (r < 0.6) return new Promise<void>((resolve) => setImmediate(resolve));
  return new Promise<void>((resolve) => setTimeout(resolve, Math.floor(r * 3)));
}

function mulberry32(seed: number) {
  let a = seed;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

async function runOnce(seed: number, requests: number) {
  const rng = mulberry32(seed);
  // Time stands still for the ledger (no lease ever lapses); the interleaving comes from `tick`.
  const ledger = new MemoryPoolLedger({
    instanceId: 'race',
    clock: new TestClock('2026-01-05T12:00:00Z'),
  });
  const originalReserve = ledger.reserve.bind(ledger);
  ledger.reserve = async (...args) => {
    await tick(rng);
    return originalReserve(...args);
  };
  const violations: string[] = [];
  const live = new Set<string>();
  let manager!: ScalerManager;
  const check = (where: string) => {
    const status = manager.getStatus();
    if (status.globalActiveCount > config.globalMaxAgents)
      violations.push(`${where}: global count`);
    if (status.globalUsage.cpus > 10 + 1e-9) violations.push(`${where}: global cpu`);
    if (status.globalUsage.memBytes > 20 * Gi) violations.push(`${where}: global mem`);
    for (const b of status.scalers) {
      if (b.activeCount > maxAgents[b.name]!) violations.push(`${where}: ${b.name} count`);
      if (b.resourceCap?.maxCpu !== undefined && b.usage.cpus > b.resourceCap.maxCpu + 1e-9) {
        violations.push(`${where}: ${b.name} cpu`);
      }
    }
    const rows = ledger.inspect('host').live;
    const poolCpus = rows.reduce((sum, row) => sum + row.cpus, 0);
    const poolMem = rows.reduce((sum, row) => sum + row.memBytes, 0);
    if (poolCpus > 6 + 1e-9 || poolMem > 12 * Gi) violations.push(`${where}: pool`);
  };
  const backend = (name: string) => ({
    async spawn(request: SpawnRequest) {
      check(`spawn ${name}`);
      await tick(rng);
      if (rng() < 0.1) throw new Error('flaky backend');
      live.add(request.agentId);
    },
    async destroy(id: string) {
      live.delete(id);
    },
  });
  manager = new ScalerManager({
    config,
    backends: [
      { name: 'a', backend: backend('a') },
      { name: 'b', backend: backend('b') },
      { name: 'c', backend: backend('c') },
    ],
    ledgers: { host: ledger },
  });
  const labelChoices = [['linux'], ['x'], ['y'], ['z'], ['linux', 'x'], ['w']];
  const kinds = new Map<string, number>();
  const calls = Array.from({ length: requests }, async (_, i) => {
    await tick(rng);
    const labels = labelChoices[Math.floor(rng() * labelChoices.length)]!;
    const cpus = [0.5, 1, 1.5, 2, 7][Math.floor(rng() * 5)]!;
    const memory = [`${Math.floor(rng() * 4)}Gi`, '512Mi'][Math.floor(rng() * 2)]!;
    const result = await manager.requestScale({
      jobId: `job-${i % (requests / 2)}`,
      labels: labels,
      resources: {
        requests: { cpus, memory },
      },
    });
    kinds.set(result.kind, (kinds.get(result.kind) ?? 0) + 1);
    check(`after ${result.kind}`);
    if (result.kind === 'spawned' && rng() < 0.5) {
      await tick(rng);
      await manager.onAgentDisconnected(result.agentId);
      check('after disconnect');
    }
  });
  await Promise.all(calls);
  for (const b of manager.getStatus().scalers)
    expect(b.activeCount).toBeLessThanOrEqual(maxAgents[b.name]!);
  await Promise.all([...live].map((id) => manager.onAgentDisconnected(id)));
  const status = manager.getStatus();
  const pool = await ledger.getUsage('host');
  await ledger.close();
  return { violations, kinds, status, pool };
}

describe('concurrent requestScale', () => {
  it('500 concurrent calls never exceed a count, a cap or the pool, and end at exactly zero', async () => {
    const { violations, kinds, status, pool } = await runOnce(42, 500);
    expect(violations).toEqual([]);
    // The run exercised every path it is meant to.
    for (const kind of [
      'spawned',
      'at-capacity',
      'never-fits',
      'no-match',
      'spawn-failed',
      'already-spawning',
    ]) {
      expect(kinds.get(kind) ?? 0, kind).toBeGreaterThan(0);
    }
    expect(status.globalActiveCount).toBe(0);
    expect(status.globalUsage).toEqual({ cpus: 0, memBytes: 0 });
    for (const b of status.scalers) expect(b.usage).toEqual({ cpus: 0, memBytes: 0 });
    expect(pool).toEqual({ cpus: 0, memBytes: 0 });
  });

  it('property: any seed keeps every limit', async () => {
    await fc.assert(
      fc.asyncProperty(fc.integer({ min: 1, max: 2 ** 31 - 1 }), async (seed) => {
        const { violations, status, pool } = await runOnce(seed, 200);
        expect(violations).toEqual([]);
        expect(status.globalUsage).toEqual({ cpus: 0, memBytes: 0 });
        expect(pool).toEqual({ cpus: 0, memBytes: 0 });
      }),
      { numRuns: 15 },
    );
  });
});
