/**
 * A mixed fleet: processes running the kici orchestrator's own ledger (0.9.1,
 * fetched at test time from the published package) and processes running ours
 * share one pool through the same lock directory and file format. Nobody
 * over-commits, no granted row is lost, and neither side starves.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { parseDocument } from '../../src/ledger/index.js';
import { kiciLedgerModule } from '../helpers/kici-ledger.js';
import {
  type FixtureProcess,
  finishFixture,
  startFixture,
  stopFixture,
} from '../helpers/processes.js';

const GiB = 2 ** 30;
const cap = { maxCpu: 4, maxMemoryBytes: 4 * GiB };
let dir: string;
const running: FixtureProcess[] = [];
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'ledger-mixed-'));
});
afterEach(async () => {
  await Promise.all(running.splice(0).map((p) => stopFixture(p)));
  rmSync(dir, { recursive: true, force: true });
});

describe('a mixed fleet of kici 0.9.1 and scaler-primitives ledgers on one pool', () => {
  it('4 + 4 processes: 0 over-commit, 0 lost rows, both sides granted, the file ends empty', async () => {
    const module = kiciLedgerModule();
    const reader = startFixture('ledger-reader.ts', [join(dir, 'shared.json')]);
    running.push(reader);
    await reader.waitFor('ready');
    const iterations = 40;
    const start = (script: string, config: object) => {
      const fixture = startFixture(script, [JSON.stringify(config)]);
      running.push(fixture);
      return fixture;
    };
    // All eight start together once every one is up (starting under tsx takes
    // a second or more each, so the first ones started would otherwise run alone).
    const goFile = join(dir, 'go');
    const common = { dir, pool: 'shared', cap, cpus: 1, memBytes: GiB, iterations, goFile };
    const kici = Array.from({ length: 4 }, (_, i) =>
      start('ledger/kici-worker.ts', { ...common, module, instanceId: `kici-${i}` }),
    );
    const ours = Array.from({ length: 4 }, (_, i) =>
      start('ledger-worker.ts', {
        ...common,
        mode: 'churn',
        instanceId: `ours-${i}`,
        lockTimeoutMs: 60_000,
      }),
    );
    await Promise.all([...kici, ...ours].map((worker) => worker.waitFor('ready')));
    writeFileSync(goFile, '');
    const kiciResults = await Promise.all(kici.map(finishFixture));
    const ourResults = await Promise.all(ours.map(finishFixture));
    reader.child.kill('SIGTERM');
    const report = await finishFixture(reader);

    for (const result of [...kiciResults, ...ourResults]) expect(result.errors).toEqual([]);
    expect(report.violations).toEqual([]);
    const total = (results: typeof kiciResults, key: string) =>
      results.reduce((sum, r) => sum + (r[key] as number), 0);
    expect(total(kiciResults, 'granted') + total(kiciResults, 'refused')).toBe(4 * iterations);
    expect(total(ourResults, 'granted') + total(ourResults, 'refused')).toBe(4 * iterations);
    // Neither side starves: each side gets at least a fifth of its demand granted.
    expect(total(kiciResults, 'granted')).toBeGreaterThan((4 * iterations) / 5);
    expect(total(ourResults, 'granted')).toBeGreaterThan((4 * iterations) / 5);
    const doc = parseDocument(readFileSync(join(dir, 'shared.json'), 'utf8'), {
      pool: 'shared',
      location: 'end',
    });
    expect(doc.reservations).toEqual([]);
  }, 180_000);
});
