/**
 * Real processes contending on one pool file: no over-commit in any read, no
 * torn file, and SIGKILLed writers at random points leave a consistent ledger.
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { parseDocument } from '../../src/ledger/document/codec.js';
import { MachineLedger } from '../../src/ledger/file/machine-ledger.js';
import type { WorkerConfig } from '../fixtures/ledger-worker.js';
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
  dir = mkdtempSync(join(tmpdir(), 'ledger-contention-'));
});

afterEach(async () => {
  await Promise.all(running.splice(0).map((p) => stopFixture(p)));
  rmSync(dir, { recursive: true, force: true });
});

function worker(config: Partial<WorkerConfig> & { instanceId: string }): FixtureProcess {
  const full: WorkerConfig = {
    mode: 'churn',
    dir,
    pool: 'shared',
    cap,
    cpus: 1,
    memBytes: GiB,
    staleMs: 2000,
    leaseTtlMs: 1000,
    lockTimeoutMs: 20_000,
    ...config,
  };
  const fixture = startFixture('ledger-worker.ts', [JSON.stringify(full)]);
  running.push(fixture);
  return fixture;
}

function reader(): FixtureProcess {
  const fixture = startFixture('ledger-reader.ts', [join(dir, 'shared.json')]);
  running.push(fixture);
  return fixture;
}

describe('MachineLedger across processes', () => {
  it('8 contending workers never over-commit; every read parses; the file ends empty', async () => {
    const watcher = reader();
    await watcher.waitFor('ready');
    const workers = Array.from({ length: 8 }, (_, i) =>
      worker({ instanceId: `w${i}`, iterations: 150 }),
    );
    const results = await Promise.all(workers.map(finishFixture));
    watcher.child.kill('SIGTERM');
    const report = await finishFixture(watcher);

    for (const result of results) expect(result.errors).toEqual([]);
    const granted = results.reduce((sum, r) => sum + (r.granted as number), 0);
    const refused = results.reduce((sum, r) => sum + (r.refused as number), 0);
    expect(granted + refused).toBe(8 * 150);
    // Demand (8 workers x 1 cpu) is twice the cap: both answers must occur.
    expect(granted).toBeGreaterThan(0);
    expect(refused).toBeGreaterThan(0);
    expect(report.violations).toEqual([]);
    expect(report.reads as number).toBeGreaterThan(50);
    expect(report.maxRows as number).toBeGreaterThan(1);
    expect(report.maxRows as number).toBeLessThanOrEqual(4);
    const doc = parseDocument(readFileSync(join(dir, 'shared.json'), 'utf8'), {
      pool: 'shared',
      location: 'end',
    });
    expect(doc.reservations).toEqual([]);
    expect(doc.cap).toEqual(cap);
  });

  it('survives 20+ SIGKILLs at random points: the file is always whole and within the cap', async () => {
    const watcher = reader();
    await watcher.waitFor('ready');
    let serial = 0;
    const spawnOne = () => worker({ instanceId: `k${serial++}`, iterations: 0 });
    const live = Array.from({ length: 5 }, spawnOne);
    await Promise.all(live.map((w) => w.waitFor('ready')));
    let kills = 0;
    while (kills < 22) {
      await new Promise((resolve) => setTimeout(resolve, 40 + Math.random() * 160));
      // Kill only workers that are running their loop, so every kill lands mid-run.
      const ready = live.filter((w) => w.events.some((e) => e.event === 'ready'));
      if (ready.length === 0) continue;
      const victim = ready[Math.floor(Math.random() * ready.length)]!;
      const index = live.indexOf(victim);
      victim.child.kill('SIGKILL');
      await victim.exited;
      kills++;
      const replacement = spawnOne();
      live[index] = replacement;
    }
    // Let the survivors run a little, then stop them gracefully.
    await new Promise((resolve) => setTimeout(resolve, 300));
    await Promise.all(live.map((w) => w.waitFor('ready')));
    for (const w of live) w.child.kill('SIGTERM');
    const results = await Promise.all(live.map(finishFixture));
    for (const result of results) {
      // A survivor may see its lock taken over while a killed holder's stale lock
      // is broken; it must never see a corrupt file or fail otherwise.
      for (const error of result.errors as Array<{ code: string }>) {
        expect(error.code).not.toBe('ERR_LEDGER_CORRUPT');
      }
    }
    watcher.child.kill('SIGTERM');
    const report = await finishFixture(watcher);
    expect(report.violations).toEqual([]);
    expect(report.reads as number).toBeGreaterThan(50);

    // Rows of killed workers are reaped once their lease (1 s) plus the margin
    // (1 s) has passed, by an instance that has renewed its own lease that long.
    const ledger = new MachineLedger({
      instanceId: 'auditor',
      dir,
      staleMs: 2000,
      leaseTtlMs: 1000,
    });
    ledger.registerPool('shared', cap);
    await ledger.reapStale('shared');
    await new Promise((resolve) => setTimeout(resolve, 2_200));
    await ledger.reapStale('shared');
    const doc = JSON.parse(readFileSync(join(dir, 'shared.json'), 'utf8'));
    expect(doc.reservations).toEqual([]);
    await ledger.close();
    // Temp files from writers killed mid-write may remain; the pool file never is one.
    expect(readdirSync(dir).filter((f) => f.endsWith('.json'))).toEqual(['shared.json']);
  });
});
