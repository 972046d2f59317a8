/**
 * Two churning ScalerManagers in two processes share one machine pool through
 * a real MachineLedger. A watcher counts the agents that really run (files that
 * exist from spawn start to destroy end): never more than the pool's CPUs, also
 * while one manager shuts down with requests in flight — which is when a pool
 * row released before its agent stopped would let the other process over-commit.
 */
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { parseDocument } from '../../src/ledger/document/codec.js';
import { type FixtureProcess, startFixture, stopFixture } from '../helpers/processes.js';

let dir: string;
const running: FixtureProcess[] = [];
const POOL_CPUS = 4;

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'manager-fleet-'));
  mkdirSync(join(dir, 'run'));
});

afterEach(async () => {
  await Promise.all(running.splice(0).map((p) => stopFixture(p)));
  rmSync(dir, { recursive: true, force: true });
});

function worker(instanceId: string): FixtureProcess {
  const fixture = startFixture('fleet-worker.ts', [
    JSON.stringify({ dir, instanceId, poolCpus: POOL_CPUS }),
  ]);
  running.push(fixture);
  return fixture;
}

describe('two churning managers, one machine pool, one shutting down mid-flight', () => {
  it('never run more agents than the pool holds, and leave nothing behind', async () => {
    const a = worker('orch-a');
    const b = worker('orch-b');
    await Promise.all([a.waitFor('ready'), b.waitFor('ready')]);
    let max = 0;
    let samples = 0;
    let watching = true;
    const watcher = (async () => {
      while (watching) {
        const count = readdirSync(join(dir, 'run')).length;
        samples++;
        if (count > max) max = count;
        await new Promise((resolve) => setTimeout(resolve, 1));
      }
    })();
    await new Promise((resolve) => setTimeout(resolve, 1500));
    a.child.kill('SIGTERM');
    const doneA = await a.waitFor('done', 30_000);
    await new Promise((resolve) => setTimeout(resolve, 500));
    b.child.kill('SIGTERM');
    const doneB = await b.waitFor('done', 30_000);
    watching = false;
    await watcher;
    for (const p of [a, b]) expect(await p.exited, p.stderr()).toEqual({ code: 0, signal: null });
    expect(samples).toBeGreaterThan(50);
    expect(doneA.spawned as number).toBeGreaterThan(5);
    expect(doneB.spawned as number).toBeGreaterThan(5);
    expect(max).toBeLessThanOrEqual(POOL_CPUS);
    expect(doneA.leftRunning).toBe(0);
    expect(doneB.leftRunning).toBe(0);
    expect(readdirSync(join(dir, 'run'))).toEqual([]);
    const location = join(dir, 'shared.json');
    const doc = parseDocument(readFileSync(location, 'utf8'), { pool: 'shared', location });
    expect(doc.reservations).toEqual([]);
  }, 60_000);
});
