/**
 * Two ScalerManagers in two processes share one machine pool through the
 * file-backed MachineLedger: together they never hold more than the pool's cap,
 * and when both are done the pool is empty.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { parseDocument } from '../../src/ledger/document/codec.js';
import { type FixtureProcess, startFixture, stopFixture } from '../helpers/processes.js';

let dir: string;
const running: FixtureProcess[] = [];

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'manager-two-'));
});

afterEach(async () => {
  await Promise.all(running.splice(0).map((p) => stopFixture(p)));
  rmSync(dir, { recursive: true, force: true });
});

function readPool() {
  const location = join(dir, 'shared.json');
  return parseDocument(readFileSync(location, 'utf8'), { pool: 'shared', location });
}

function worker(
  instanceId: string,
  requests: number,
  extra: { rounds?: number; leaseTtlMs?: number; trigger?: string } = {},
): FixtureProcess {
  const fixture = startFixture('manager-worker.ts', [
    JSON.stringify({ dir, instanceId, requests, poolCpus: 5, ...extra }),
  ]);
  running.push(fixture);
  return fixture;
}

describe('two ScalerManagers, two processes, one machine pool', () => {
  it('grant exactly the pool cap between them and leave the pool empty when done', async () => {
    const a = worker('orch-a', 4);
    const b = worker('orch-b', 4);
    await Promise.all([a.waitFor('ready'), b.waitFor('ready')]);
    writeFileSync(join(dir, 'go'), '');
    const [heldA, heldB] = await Promise.all([a.waitFor('held'), b.waitFor('held')]);
    const kindsA = heldA.kinds as Record<string, number>;
    const kindsB = heldB.kinds as Record<string, number>;
    // 8 requests of 1 CPU against a 5-CPU pool: exactly 5 granted, 3 refused by the pool.
    expect((kindsA.spawned ?? 0) + (kindsB.spawned ?? 0)).toBe(5);
    expect((kindsA['at-capacity'] ?? 0) + (kindsB['at-capacity'] ?? 0)).toBe(3);
    const doc = readPool();
    expect(doc.reservations).toHaveLength(5);
    const byInstance = (id: string) => doc.reservations.filter((r) => r.instanceId === id).length;
    expect(byInstance('orch-a')).toBe(kindsA.spawned ?? 0);
    expect(byInstance('orch-b')).toBe(kindsB.spawned ?? 0);
    a.child.kill('SIGTERM');
    b.child.kill('SIGTERM');
    for (const p of [a, b]) {
      expect(await p.exited, p.stderr()).toEqual({ code: 0, signal: null });
    }
    const after = readPool();
    expect(after.reservations).toEqual([]);
  });

  it('the share of a SIGKILLed manager goes to the other process once its lease has expired', async () => {
    const a = worker('orch-a', 5, { leaseTtlMs: 1000, trigger: 'go-a' });
    const b = worker('orch-b', 5, { rounds: 2, leaseTtlMs: 1000, trigger: 'go-b' });
    await Promise.all([a.waitFor('ready'), b.waitFor('ready')]);
    // A takes the whole pool; then B finds it full.
    writeFileSync(join(dir, 'go-a'), '');
    expect((await a.waitFor('held')).kinds).toEqual({ spawned: 5 });
    writeFileSync(join(dir, 'go-b'), '');
    expect((await b.waitFor('held')).kinds).toEqual({ 'at-capacity': 5 });
    const aHeld = readPool().reservations.filter((r) => r.instanceId === 'orch-a').length;
    expect(aHeld).toBe(5);
    a.child.kill('SIGKILL');
    await a.exited;
    // Nothing released A's rows: they are still in the file. Once A's lease (1 s) plus
    // the margin (1 s) has passed, B (renewing its own lease all along) reaps them on
    // its next round and gets the capacity.
    expect(readPool().reservations.filter((r) => r.instanceId === 'orch-a')).toHaveLength(aHeld);
    await new Promise((resolve) => setTimeout(resolve, 2_500));
    writeFileSync(join(dir, 'go-2'), '');
    const second = await b.waitFor('held-2');
    expect((second.kinds as Record<string, number>).spawned ?? 0).toBe(aHeld);
    const rows = readPool().reservations;
    expect(rows.every((r) => r.instanceId === 'orch-b')).toBe(true);
    expect(rows).toHaveLength(5);
    b.child.kill('SIGTERM');
    expect(await b.exited, b.stderr()).toEqual({ code: 0, signal: null });
    expect(readPool().reservations).toEqual([]);
  });
});
