/**
 * Locks and rows of processes that stall, die or are replaced, with real processes.
 */
import { spawn, spawnSync } from 'node:child_process';
import * as nodeFs from 'node:fs';
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { MachineLedgerOptions } from '../../src/ledger/file/machine-ledger.js';
import { MachineLedger } from '../../src/ledger/file/machine-ledger.js';
import { readBootId, readProcessStartTime } from '../../src/ledger/proc.js';
import type { WorkerConfig } from '../fixtures/ledger-worker.js';
import { type FixtureProcess, startFixture, stopFixture } from '../helpers/processes.js';
import { hasSystem } from '../helpers/system.js';

let dir: string;
const running: FixtureProcess[] = [];
const ledgers: MachineLedger[] = [];

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'ledger-liveness-'));
});

afterEach(async () => {
  await Promise.all(running.splice(0).map((p) => stopFixture(p)));
  await Promise.all(ledgers.splice(0).map((l) => l.close()));
  rmSync(dir, { recursive: true, force: true });
});

function worker(
  config: Partial<WorkerConfig> & { instanceId: string; mode: WorkerConfig['mode'] },
  wrap?: string[],
): FixtureProcess {
  const full: WorkerConfig = {
    dir,
    pool: 'p',
    cap: { maxCpu: 2 },
    cpus: 1,
    memBytes: 0,
    staleMs: 2000,
    leaseTtlMs: 1000,
    ...config,
  };
  const fixture = startFixture('ledger-worker.ts', [JSON.stringify(full)], { wrap });
  running.push(fixture);
  return fixture;
}

function ledger(options: Partial<MachineLedgerOptions> = {}): MachineLedger {
  const l = new MachineLedger({
    instanceId: 'tester',
    dir,
    staleMs: 2000,
    leaseTtlMs: 1000,
    lockTimeoutMs: 10_000,
    ...options,
  });
  l.registerPool('p', { maxCpu: 2 });
  ledgers.push(l);
  return l;
}

const rows = () =>
  (
    JSON.parse(readFileSync(join(dir, 'p.json'), 'utf8')).reservations as Array<{ agentId: string }>
  ).map((r) => r.agentId);
// Write the pool file as another writer left it.
function writePool(reservations: Array<Record<string, unknown>>) {
  writeFileSync(
    join(dir, 'p.json'),
    JSON.stringify({ version: 1, cap: { maxCpu: 2 }, reservations }),
  );
}
const seedRow = (over: Record<string, unknown>) => ({
  instanceId: 'kici',
  pid: 999_999,
  bootId: readBootId(nodeFs),
  agentId: 'old',
  cpus: 2,
  memBytes: 0,
  reservedAt: 1,
  ...over,
});
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('locks', () => {
  it('a holder SIGSTOPped past the stale window does not write after it resumes', async () => {
    const paused = worker({ mode: 'pause-in-lock', instanceId: 'paused', holdMs: 800 });
    await paused.waitFor('in-lock');
    paused.child.kill('SIGSTOP');
    await sleep(2_600);
    const other = ledger();
    const started = Date.now();
    expect(await other.reserve('p', 'winner', 1, 0)).toEqual({ ok: true });
    expect(Date.now() - started).toBeLessThan(3_000);
    paused.child.kill('SIGCONT');
    const done = await paused.waitFor('done');
    expect(done.granted).toBe(0);
    expect((done.errors as Array<{ code: string }>).map((e) => e.code)).toEqual([
      'ERR_LEDGER_LOCK_COMPROMISED',
    ]);
    expect((await paused.exited).code).toBe(0);
    expect(rows()).toEqual(['winner']);
    // The resumed process did not remove a lock it no longer owned, and left no temp file.
    expect(nodeFs.readdirSync(dir).filter((f) => f.endsWith('.tmp'))).toEqual([]);
  });

  it('a holder killed inside the critical section blocks others for at most the stale window', async () => {
    const holder = worker({ mode: 'pause-in-lock', instanceId: 'doomed', holdMs: 60_000 });
    await holder.waitFor('in-lock');
    holder.child.kill('SIGKILL');
    await holder.exited;
    expect(statSync(join(dir, 'p.lock')).isDirectory()).toBe(true);
    const other = ledger();
    const started = Date.now();
    expect(await other.reserve('p', 'next', 1, 0)).toEqual({ ok: true });
    const waited = Date.now() - started;
    // stale window 2 s (measured from the holder's last refresh) plus retry jitter.
    expect(waited).toBeLessThan(2_000 + 1_000);
    expect(rows()).toEqual(['next']);
  });
});

describe('rows of dead peers', () => {
  it('a live peer keeps its rows past the lease window; once SIGKILLed they are reaped after the window plus the margin', async () => {
    const peer = worker({ mode: 'hold', instanceId: 'peer', agents: 2 });
    expect((await peer.waitFor('held')).granted).toBe(2);
    const me = ledger();
    expect(await me.reserve('p', 'mine', 1, 0)).toMatchObject({ ok: false, used: 2 });
    // Two lease windows later the peer, still alive, still holds its rows.
    await sleep(2_000);
    expect(await me.reserve('p', 'mine', 1, 0)).toMatchObject({ ok: false, used: 2 });
    peer.child.kill('SIGKILL');
    await peer.exited;
    const killedAt = Date.now();
    let result = await me.reserve('p', 'mine', 1, 0);
    while (!result.ok && Date.now() - killedAt < 5_000) {
      await sleep(50);
      result = await me.reserve('p', 'mine', 1, 0);
    }
    expect(result).toEqual({ ok: true });
    // Lease window 1 s, renewed every third of it, plus the margin (1 s): the peer's
    // last renewal was at most a third of the window before the kill, so its rows
    // go between about 1.7 s and 2 s after it (not before: the margin is kept).
    const waited = Date.now() - killedAt;
    expect(waited).toBeGreaterThan(1_000 + 1_000 - 1_000 / 3 - 50);
    expect(waited).toBeLessThan(1_000 + 1_000 + 700);
    expect(rows()).toEqual(['mine']);
  });

  it('a peer row without a lease (an older writer) is kept while the host runs', async () => {
    writePool([seedRow({})]);
    const me = ledger();
    expect(await me.reapStale('p')).toBe(0);
    expect(await me.reserve('p', 'mine', 1, 0)).toMatchObject({ ok: false, used: 2 });
  });

  it('a row from another boot is reaped', async () => {
    writePool([seedRow({ pid: process.pid, bootId: 'an-earlier-boot' })]);
    const me = ledger();
    expect((await me.inspect('p')).stale.map((s) => s.reason)).toEqual(['other-boot']);
    expect(await me.reserve('p', 'mine', 2, 0)).toEqual({ ok: true });
    expect(rows()).toEqual(['mine']);
  });

  it('same-instance rows: a dead pid and a reused pid are reaped, a live process is kept', async () => {
    const sleeper = spawn('sleep', ['30'], { stdio: 'ignore' });
    const exited = spawnSync('true');
    const deadPid = exited.pid!;
    try {
      const start = readProcessStartTime(nodeFs, sleeper.pid!)!;
      expect(start).toBeGreaterThan(0);
      const row = (agentId: string, pid: number, pidStartTime?: number) =>
        seedRow({
          instanceId: 'tester',
          agentId,
          pid,
          cpus: 0.5,
          ...(pidStartTime === undefined ? {} : { pidStartTime }),
        });
      writePool([
        row('alive', sleeper.pid!, start),
        row('reused', sleeper.pid!, start - 1),
        row('gone', deadPid),
        row('alive-no-start-time', sleeper.pid!),
      ]);
      const me = ledger();
      const snapshot = await me.inspect('p');
      expect(snapshot.live.map((r) => r.agentId)).toEqual(['alive', 'alive-no-start-time']);
      expect(snapshot.stale.map((s) => [s.row.agentId, s.reason])).toEqual([
        ['reused', 'pid-reused'],
        ['gone', 'process-gone'],
      ]);
      expect(await me.reapStale('p')).toBe(2);
      expect(rows()).toEqual(['alive', 'alive-no-start-time']);
    } finally {
      sleeper.kill('SIGKILL');
    }
  });

  const unshareOk = (() => {
    if (!hasSystem(['root'], 'ledger peer in another PID namespace')) return false;
    if (spawnSync('unshare', ['--pid', '--fork', '--mount-proc', 'true']).status === 0) return true;
    const line = 'ledger peer in another PID namespace: `unshare --pid --fork --mount-proc` failed';
    if (process.env.SCALER_PRIMITIVES_REQUIRE_SYSTEM === '1') {
      throw new Error(`SCALER_PRIMITIVES_REQUIRE_SYSTEM=1 but ${line}`);
    }
    console.warn(`skipped: ${line}`);
    return false;
  })();
  describe.runIf(unshareOk)('a peer in another PID namespace', () => {
    it('keeps its rows while alive (its pid means nothing here) and loses them when killed', async () => {
      const peer = worker({ mode: 'hold', instanceId: 'contained', agents: 1 }, [
        'unshare',
        '--pid',
        '--fork',
        '--mount-proc',
        '--kill-child',
      ]);
      expect((await peer.waitFor('held')).granted).toBe(1);
      const stored = JSON.parse(readFileSync(join(dir, 'p.json'), 'utf8')).reservations[0];
      // Inside its own namespace the worker is a low pid, not its host pid.
      expect(stored.pid).not.toBe(peer.child.pid);
      const me = ledger();
      // Its own lease starts: it judges peers only once it has renewed for the
      // window plus the margin (1 s + 1 s).
      expect(await me.reapStale('p')).toBe(0);
      await sleep(2_500);
      expect((await me.list('p')).map((r) => r.agentId)).toEqual(['contained-0']);
      peer.child.kill('SIGKILL');
      await peer.exited;
      await sleep(2_300);
      expect(await me.list('p')).toEqual([]);
      expect(existsSync(join(dir, `${stored.leaseId}.lease`))).toBe(true);
    });
  });
});
