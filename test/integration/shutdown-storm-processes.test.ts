/**
 * The shutdown storm with real parts (issue 38): a ScalerManager on a real
 * MachineLedger, its agents real child processes, 1,200 requests with churn,
 * 20% failing and 10% hanging spawns, about 200 in flight at shutdownAll().
 * Once shutdownAll resolved only the agents it reports may still run; once the
 * late spawns answered, no process it started is alive and the pool files hold
 * no row.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { parseDocument } from '../../src/ledger/document/codec.js';
import { pidAlive } from '../helpers/pid.js';
import {
  type FixtureProcess,
  finishFixture,
  startFixture,
  stopFixture,
} from '../helpers/processes.js';

let dir: string;
const started: FixtureProcess[] = [];

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'shutdown-storm-'));
});

afterEach(async () => {
  await Promise.all(started.splice(0).map((p) => stopFixture(p)));
  for (const pid of pids()) {
    try {
      process.kill(pid, 'SIGKILL'); // a process the worker left behind
    } catch {
      // gone
    }
  }
  rmSync(dir, { recursive: true, force: true });
});

function pids(): number[] {
  const file = join(dir, 'pids');
  if (!existsSync(file)) return [];
  return readFileSync(file, 'utf8').split('\n').filter(Boolean).map(Number);
}

function rows(): string[] {
  return ['a', 'b'].flatMap((pool) => {
    const location = join(dir, `${pool}.json`);
    if (!existsSync(location)) return [];
    return parseDocument(readFileSync(location, 'utf8'), { pool, location }).reservations.map(
      (row) => row.agentId,
    );
  });
}

describe('shutdownAll() storm with real processes and a MachineLedger', () => {
  it('leaves no process running and no row in the pool files', async () => {
    const worker = startFixture('shutdown-storm-worker.ts', [
      JSON.stringify({
        dir,
        requests: 1200,
        burst: 200,
        timeoutMs: 1500,
        lateMs: 6000,
        settleMs: 30_000,
      }),
    ]);
    started.push(worker);
    const resolved = await worker.waitFor('resolved', 90_000);
    expect(resolved.inFlight as number).toBeGreaterThanOrEqual(200);
    // When it resolved, only what it reported unconfirmed still ran.
    const unconfirmed = new Set(resolved.unconfirmed as string[]);
    expect((resolved.running as string[]).filter((id) => !unconfirmed.has(id))).toEqual([]);
    const done = await finishFixture(worker);
    expect(done).toMatchObject({ running: [], rows: [] });
    const all = pids();
    expect(all.length).toBeGreaterThan(100);
    expect(all.filter(pidAlive)).toEqual([]);
    expect(rows()).toEqual([]);
  }, 120_000);
});
