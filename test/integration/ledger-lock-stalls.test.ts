/**
 * The stale-lock takeover under injected stalls: real worker processes whose
 * ledger `fs` blocks the whole process (before or after any lock or commit
 * call, for longer than the lock's stale window) contend on one pool with a
 * cap of 2 CPUs. Locks are taken over all the time; nobody may ever hold a
 * grant that another holder's write erased, and no state may exceed the cap.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  type FixtureProcess,
  finishFixture,
  startFixture,
  stopFixture,
} from '../helpers/processes.js';

let dir: string;
const running: FixtureProcess[] = [];
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'ledger-stalls-'));
});
afterEach(async () => {
  await Promise.all(running.splice(0).map((p) => stopFixture(p)));
  rmSync(dir, { recursive: true, force: true });
});

// Every step of acquiring, taking over, writing and releasing the lock.
const TAKEOVER_STEPS = [
  'after mkdirSync:lock',
  'after lstatSync:lock',
  'before renameSync:lock',
  'before rmSync:moved',
  'before mkdirSync:token',
  'after mkdirSync:token',
  'after readdirSync:lock',
  'after openSync:pool', // the read: open (O_NOFOLLOW), fstat, read on the descriptor
  'after openSync:temp',
  'after fdatasync:temp',
  'before renameSync:temp',
  'before rmdirSync:token',
  'before rmdirSync:lock',
];

describe('MachineLedger lock takeover under injected stalls', () => {
  it('4 stalling processes, cap 2: takeovers happen at every step, 0 over-commit, 0 lost grants', async () => {
    const reader = startFixture('ledger-reader.ts', [join(dir, 'p.json')]);
    running.push(reader);
    await reader.waitFor('ready');
    const journal = join(dir, 'journal.log');
    const base = Math.floor(Math.random() * 2 ** 31);
    const workers = Array.from({ length: 4 }, (_, i) => {
      const config = {
        dir,
        pool: 'p',
        id: `s${i}`,
        cap: { maxCpu: 2 },
        lockStaleMs: 60,
        durationMs: 10_000,
        seed: base + i,
        journal,
        longP: 0.004,
        targets: TAKEOVER_STEPS,
        shortP: 0.1,
      };
      const fixture = startFixture('ledger/stall-worker.ts', [JSON.stringify(config)]);
      running.push(fixture);
      return fixture;
    });
    const results = await Promise.all(workers.map(finishFixture));
    reader.child.kill('SIGTERM');
    const report = await finishFixture(reader);
    const counts = results.map(({ granted, refused, takeovers, errors }) => ({
      granted,
      refused,
      takeovers,
      errors,
    }));
    const context = `seeds ${base}..${base + 3}: ${JSON.stringify(counts)}`;

    for (const result of results) expect(result.violations, context).toEqual([]);
    expect(report.violations, context).toEqual([]);
    // The journal: at no point were more than 2 grants outstanding.
    let outstanding = 0;
    let most = 0;
    for (const line of readFileSync(journal, 'utf8').split('\n')) {
      if (line.startsWith('+')) outstanding++;
      if (line.startsWith('-')) outstanding--;
      most = Math.max(most, outstanding);
    }
    expect(most, context).toBeLessThanOrEqual(2);
    // The schedules did what they are for.
    const granted = results.reduce((sum, r) => sum + (r.granted as number), 0);
    const takeovers = results.reduce((sum, r) => sum + (r.takeovers as number), 0);
    const refused = results.reduce((sum, r) => sum + (r.refused as number), 0);
    expect(granted, context).toBeGreaterThan(10);
    // The cap was binding: some reservations were refused for it.
    expect(refused, context).toBeGreaterThan(0);
    expect(takeovers, context).toBeGreaterThan(5);
    const stalled = new Set(results.flatMap((r) => Object.keys(r.stalls as object)));
    const missed = TAKEOVER_STEPS.filter((step) => !stalled.has(step));
    expect(missed, 'steps that never saw a long stall').toEqual([]);
  }, 120_000);
});
