/**
 * A real worker process holding reservations is stopped (SIGSTOP) past its
 * lease window; a peer reaps its rows and takes the capacity. When the worker
 * resumes, its next call fails once with ERR_LEDGER_LEASE_EXPIRED naming the
 * lost agents, and the call after that works.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { MachineLedger } from '../../src/ledger/file/machine-ledger.js';
import type { WorkerConfig } from '../fixtures/ledger-worker.js';
import { type FixtureProcess, startFixture, stopFixture } from '../helpers/processes.js';

let dir: string;
const running: FixtureProcess[] = [];
const ledgers: MachineLedger[] = [];

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'ledger-lease-loss-'));
});

afterEach(async () => {
  await Promise.all(running.splice(0).map((p) => stopFixture(p)));
  await Promise.all(ledgers.splice(0).map((l) => l.close()));
  rmSync(dir, { recursive: true, force: true });
});

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const rows = () =>
  (
    JSON.parse(readFileSync(join(dir, 'p.json'), 'utf8')).reservations as Array<{ agentId: string }>
  ).map((r) => r.agentId);

describe('a stalled MachineLedger instance', () => {
  it('learns on its next call that a peer reaped its rows, once', async () => {
    const config: WorkerConfig = {
      mode: 'hold-then-call',
      dir,
      pool: 'p',
      cap: { maxCpu: 2 },
      instanceId: 'stalled',
      cpus: 1,
      memBytes: 0,
      agents: 2,
      staleMs: 2000,
      leaseTtlMs: 1000,
    };
    const worker = startFixture('ledger-worker.ts', [JSON.stringify(config)]);
    running.push(worker);
    expect((await worker.waitFor('held')).granted).toBe(2);
    expect(rows()).toEqual(['stalled-0', 'stalled-1']);

    worker.child.kill('SIGSTOP');
    const peer = new MachineLedger({ instanceId: 'peer', dir, staleMs: 2000, leaseTtlMs: 1000 });
    ledgers.push(peer);
    peer.registerPool('p', { maxCpu: 2 });
    // The worker's lease expires at most one window after it stopped.
    const stoppedAt = Date.now();
    let reaped = 0;
    while (reaped === 0 && Date.now() - stoppedAt < 5_000) {
      await sleep(100);
      reaped = await peer.reapStale('p');
    }
    expect(reaped).toBe(2);
    expect(await peer.reserve('p', 'peer-0', 1, 0)).toEqual({ ok: true });

    worker.child.kill('SIGCONT');
    worker.child.kill('SIGUSR2');
    const { answers } = (await worker.waitFor('called', 5_000)) as unknown as {
      answers: Array<{
        value?: unknown;
        error?: { code?: string; message: string; agentIds?: string[] };
      }>;
    };
    expect(answers[0]?.error?.code).toBe('ERR_LEDGER_LEASE_EXPIRED');
    expect(answers[0]?.error?.agentIds).toEqual(['stalled-0', 'stalled-1']);
    expect(answers[0]?.error?.message).toContain('"stalled-0", "stalled-1"');
    expect(answers[1]).toEqual({ value: { ok: true } });
    // Within the cap: the peer's row and the worker's new one, nothing it lost.
    expect(rows()).toEqual(['peer-0', 'stalled-next']);

    worker.child.kill('SIGTERM');
    const done = await worker.waitFor('done', 5_000);
    expect(done.errors).toEqual([]);
    expect((await worker.exited).code).toBe(0);
    expect(rows()).toEqual(['peer-0']);
  });
});
