/**
 * A mixed fleet: processes running the kici orchestrator's own ledger (0.9.1,
 * fetched at test time from the published package) and processes running ours
 * share one pool through the same lock directory and file format. Nobody
 * over-commits, no granted row is lost, and neither side starves.
 *
 * Starving means not being granted, ever; a refusal while the pool is full is
 * the right answer, and how many there are depends on timing (a kici worker
 * waiting out its lock backoff to release keeps its row meanwhile, so a fixed
 * number of tries can end mostly refused on our side). So every worker wants a
 * fixed number of grants and retries its refusals: each must get them all
 * within a bounded number of tries.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { parseDocument } from '../../src/ledger/document/codec.js';
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
  it('4 + 4 processes: 0 over-commit, 0 lost rows, every worker gets all its grants, the file ends empty', async () => {
    const module = kiciLedgerModule();
    const reader = startFixture('ledger-reader.ts', [join(dir, 'shared.json')]);
    running.push(reader);
    await reader.waitFor('ready');
    // Each worker wants `grants` grants, retrying refusals, in at most `iterations` tries.
    const grants = 15;
    const iterations = 4000;
    const start = (script: string, config: object) => {
      const fixture = startFixture(script, [JSON.stringify(config)]);
      running.push(fixture);
      return fixture;
    };
    // All eight start together once every one is up (starting under tsx takes
    // a second or more each, so the first ones started would otherwise run alone).
    const goFile = join(dir, 'go');
    const common = { dir, pool: 'shared', cap, cpus: 1, memBytes: GiB, iterations, grants, goFile };
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
    // Neither side starves: every worker of each side got all the grants it wanted.
    const counts = (results: typeof kiciResults) =>
      results.map(({ granted, refused }) => ({ granted, refused }));
    const context = JSON.stringify({ kici: counts(kiciResults), ours: counts(ourResults) });
    for (const result of [...kiciResults, ...ourResults]) {
      expect(result.granted, context).toBe(grants);
      expect((result.granted as number) + (result.refused as number), context).toBeLessThan(
        iterations,
      );
    }
    const doc = parseDocument(readFileSync(join(dir, 'shared.json'), 'utf8'), {
      pool: 'shared',
      location: 'end',
    });
    expect(doc.reservations).toEqual([]);
  }, 180_000);
});
