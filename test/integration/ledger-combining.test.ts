/**
 * Cross-process combining with real processes: waiters that find the pool lock
 * taken post their calls in `.<pool>.combine/`, and whoever takes the lock next
 * applies them all in one write, in the order the waiters started (FIFO). A
 * holder SIGKILLed after claiming requests (before or after its write) and a
 * waiter SIGKILLed while waiting leave no lost grant, no duplicate row and no
 * over-commit.
 */
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmdirSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { parseDocument } from '../../src/ledger/document/codec.js';
import { MachineLedger } from '../../src/ledger/file/machine-ledger.js';
import { type FixtureProcess, startFixture, stopFixture } from '../helpers/processes.js';

let dir: string;
const running: FixtureProcess[] = [];
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'ledger-combining-'));
});
afterEach(async () => {
  await Promise.all(running.splice(0).map((p) => stopFixture(p)));
  rmSync(dir, { recursive: true, force: true });
});

const combineDir = () => join(dir, '.p.combine');
const posted = () =>
  existsSync(combineDir()) ? readdirSync(combineDir()).filter((n) => n.endsWith('.req')) : [];
const rows = () =>
  parseDocument(readFileSync(join(dir, 'p.json'), 'utf8'), { pool: 'p', location: 'test' })
    .reservations;

async function until(check: () => boolean, what: string, timeoutMs = 60_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

function worker(config: Record<string, unknown>): FixtureProcess {
  const fixture = startFixture('ledger/combine-worker.ts', [
    JSON.stringify({ dir, pool: 'p', cpus: 1, ...config }),
  ]);
  running.push(fixture);
  return fixture;
}

describe('cross-process combining', () => {
  it('applies the waiting requests in the order the waiters came (FIFO): the first two of five get the 2 CPUs', async () => {
    // The test holds the lock (as a kici process would: a bare directory).
    mkdirSync(join(dir, 'p.lock'));
    const workers: FixtureProcess[] = [];
    for (let i = 0; i < 5; i++) {
      workers.push(
        worker({
          cap: { maxCpu: 2 },
          instanceId: `w${i}`,
          lockStaleMs: 120_000,
          lockTimeoutMs: 120_000,
        }),
      );
      await until(() => posted().length === i + 1, `request ${i}`);
    }
    rmdirSync(join(dir, 'p.lock'));
    const results = await Promise.all(workers.map((w) => w.waitFor('result', 60_000)));
    expect(results.map((r) => r.ok)).toEqual([true, true, false, false, false]);
    expect(
      rows()
        .map((row) => row.agentId)
        .sort(),
    ).toEqual(['w0-a', 'w1-a']);
    expect(posted()).toEqual([]);
  }, 120_000);

  for (const killAt of ['before-write', 'after-write'] as const) {
    it(`a holder SIGKILLed ${killAt === 'before-write' ? 'before' : 'after'} writing the claimed requests: every waiter is granted exactly once`, async () => {
      const cap = { maxCpu: 3 };
      const goFile = join(dir, 'go');
      const holder = worker({ cap, instanceId: 'h', goFile, killAt, lockStaleMs: 500 });
      await holder.waitFor('holding', 60_000);
      const waiters = ['a', 'b'].map((id) => worker({ cap, instanceId: id, lockStaleMs: 500 }));
      await until(() => posted().length === 2, 'two requests');
      writeFileSync(goFile, '');
      const exit = await holder.exited;
      expect(exit.signal).toBe('SIGKILL');
      const results = await Promise.all(waiters.map((w) => w.waitFor('result', 60_000)));
      expect(results.map((r) => r.ok)).toEqual([true, true]);
      const agents = rows().map((row) => row.agentId);
      // One row each: a redone call that the killed holder had written is not written twice.
      expect(agents.filter((a) => a === 'a-a')).toHaveLength(1);
      expect(agents.filter((a) => a === 'b-a')).toHaveLength(1);
      expect(agents.length).toBeLessThanOrEqual(3);
      if (killAt === 'after-write') expect(agents).toContain('h-a');
      else expect(agents).not.toContain('h-a');
    }, 120_000);
  }

  it('a waiter SIGKILLed while its request is posted: the next waiter is served, nothing over-commits', async () => {
    const cap = { maxCpu: 1 };
    mkdirSync(join(dir, 'p.lock'));
    const doomed = worker({ cap, instanceId: 'x', lockStaleMs: 120_000, leaseTtlMs: 1000 });
    await until(() => posted().length === 1, 'the doomed request');
    await stopFixture(doomed, 'SIGKILL');
    const next = worker({ cap, instanceId: 'y', lockStaleMs: 120_000 });
    await until(() => posted().length === 2, 'the second request');
    rmdirSync(join(dir, 'p.lock'));
    const result = await next.waitFor('result', 60_000);
    // The dead waiter's request came first and may have been applied (its row is
    // then a dead process's row, reaped once its lease expires); the cap holds.
    expect(result.error).toBeUndefined();
    expect(typeof result.ok).toBe('boolean');
    expect(rows().length).toBeLessThanOrEqual(1);
    expect(posted()).toEqual([]);
    if (result.ok === false) {
      expect(rows().map((row) => row.agentId)).toEqual(['x-a']);
      // Once the dead waiter's lease (1 s) has expired, its row goes and a caller
      // fits: a caller that has renewed its own lease for the window plus the
      // margin (1 s + 1 s), since only such an instance judges a peer's lease.
      const later = new MachineLedger({ instanceId: 'z', dir, leaseTtlMs: 1000 });
      try {
        later.registerPool('p', cap);
        await later.reapStale('p');
        await new Promise((resolve) => setTimeout(resolve, 2_500));
        expect(await later.reserve('p', 'z-a', 1, 0)).toEqual({ ok: true });
        expect(rows().map((row) => row.agentId)).toEqual(['z-a']);
      } finally {
        await later.close();
      }
    }
  }, 120_000);
});
