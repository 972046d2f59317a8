/**
 * The file ledger's leases through real storage faults, as root: a tmpfs
 * mounted in a temp dir and remounted read-only for longer than the lease, and
 * the ledger directory removed (and recreated) under running processes. The
 * books must keep agreeing with the holders: a live holder's rows are never
 * taken because the storage, not the holder, stopped, and no row is written
 * under a lease file peers cannot see.
 */
import { execFileSync } from 'node:child_process';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { isLedgerIoError } from '../../src/errors/ledger-fs.js';
import { MachineLedger } from '../../src/ledger/file/machine-ledger.js';
import type { LeaseEvent } from '../../src/ledger/types.js';
import type { WorkerConfig } from '../fixtures/ledger-worker.js';
import { type FixtureProcess, startFixture, stopFixture } from '../helpers/processes.js';
import { hasSystem } from '../helpers/system.js';

const SUITE = 'ledger leases through storage faults (tmpfs mounts)';

// Root is needed to mount; a root without the capability (a container) cannot
// either: probe once. Under SCALER_PRIMITIVES_REQUIRE_SYSTEM=1 a missing one fails.
const canMount = (() => {
  if (!hasSystem(['root'], SUITE)) return false;
  const probe = mkdtempSync(join(tmpdir(), 'ledger-mount-probe-'));
  try {
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=1m', 'tmpfs', probe], { stdio: 'ignore' });
    execFileSync('umount', [probe], { stdio: 'ignore' });
    return true;
  } catch (error) {
    const line = `${SUITE}: \`mount -t tmpfs\` failed (${(error as Error).message.split('\n')[0]})`;
    if (process.env.SCALER_PRIMITIVES_REQUIRE_SYSTEM === '1') {
      throw new Error(`SCALER_PRIMITIVES_REQUIRE_SYSTEM=1 but ${line}`);
    }
    console.warn(`skipped: ${line}`);
    return false;
  } finally {
    rmSync(probe, { recursive: true, force: true });
  }
})();

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe.runIf(canMount)(SUITE, () => {
  let mnt: string;
  // Outside the mount: go files and the like must be writable while it is read-only.
  let outside: string;
  let dir: string;
  let n = 0;
  const running: FixtureProcess[] = [];
  const ledgers: MachineLedger[] = [];

  const mount = (...args: string[]) => execFileSync('mount', args, { stdio: 'pipe' });

  beforeAll(() => {
    mnt = mkdtempSync(join(tmpdir(), 'ledger-lease-faults-'));
    outside = mkdtempSync(join(tmpdir(), 'ledger-lease-faults-go-'));
    mount('-t', 'tmpfs', '-o', 'size=8m,mode=0755', 'tmpfs', mnt);
  });

  afterEach(async () => {
    await Promise.all(running.splice(0).map((p) => stopFixture(p)));
    // A test that failed half-way may leave the mount read-only.
    mount('-o', 'remount,rw', mnt);
    await Promise.all(ledgers.splice(0).map((l) => l.close().catch(() => {})));
  });

  afterAll(() => {
    try {
      execFileSync('umount', [mnt], { stdio: 'pipe' });
    } catch {
      // Busy (a process we could not stop): detach it, it goes once unused.
      execFileSync('umount', ['-l', mnt], { stdio: 'pipe' });
    }
    rmSync(mnt, { recursive: true, force: true });
    rmSync(outside, { recursive: true, force: true });
  });

  function freshDir(): string {
    dir = join(mnt, `ledger-${++n}`);
    return dir;
  }

  function ledger(instanceId: string): MachineLedger {
    const l = new MachineLedger({ instanceId, dir, leaseTtlMs: 1500, staleMs: 2000 });
    l.registerPool('p', { maxCpu: 2 });
    ledgers.push(l);
    return l;
  }

  function worker(config: Partial<WorkerConfig> & Pick<WorkerConfig, 'instanceId' | 'mode'>) {
    const full: WorkerConfig = {
      dir,
      pool: 'p',
      cap: { maxCpu: 2 },
      cpus: 1,
      memBytes: 0,
      staleMs: 2000,
      leaseTtlMs: 1500,
      ...config,
    };
    const fixture = startFixture('ledger-worker.ts', [JSON.stringify(full)]);
    running.push(fixture);
    return fixture;
  }

  const rows = () =>
    (
      JSON.parse(readFileSync(join(dir, 'p.json'), 'utf8')).reservations as Array<{
        agentId: string;
      }>
    ).map((r) => r.agentId);

  it('a read-only spell longer than the lease: the holder hears at-risk, lost, renewed; a peer right after is refused, the row kept', async () => {
    freshDir();
    const a = ledger('a');
    const events: Array<LeaseEvent & { at: number }> = [];
    a.onLeaseEvent((event) => events.push({ ...event, at: Date.now() }));
    expect(await a.reserve('p', 'a-0', 2, 0)).toEqual({ ok: true });
    // B is a separate process, started and waiting before the spell, so that
    // its first call comes the moment writes are possible again.
    const goFile = join(outside, `go-${n}`);
    const b = worker({ mode: 'hold', instanceId: 'b', cpus: 2, agents: 1, goFile });
    await b.waitFor('ready');

    mount('-o', 'remount,ro', mnt);
    const roAt = Date.now();
    await sleep(3_000);
    // Renewals failing for two thirds of the lease: a call now fails typed, writes nothing.
    const during = await a.reserve('p', 'a-1', 0, 0).catch((error: unknown) => error);
    expect(isLedgerIoError(during), String(during)).toBe(true);
    expect(during).toMatchObject({ pool: 'p', errno: 'EROFS', mayHaveWritten: false });
    mount('-o', 'remount,rw', mnt);
    writeFileSync(goFile, '');

    const held = await b.waitFor('held', 15_000);
    expect({ granted: held.granted, refused: held.refused }).toEqual({ granted: 0, refused: 1 });
    expect(rows()).toEqual(['a-0']);

    // A's events: at-risk two thirds of the lease after its last confirmed
    // renewal, lost at the deadline (both during the spell, with the error), and
    // renewed once writes came back.
    const until = Date.now() + 2_000;
    while (!events.some((e) => e.type === 'lease-renewed') && Date.now() < until) {
      await sleep(50);
    }
    expect(events.map((e) => e.type)).toEqual(['lease-at-risk', 'lease-lost', 'lease-renewed']);
    const [risk, lost, renewed] = events as [
      (typeof events)[0],
      (typeof events)[0],
      (typeof events)[0],
    ];
    const confirmedAt = risk.lease.confirmedAt!;
    expect(confirmedAt).toBeLessThanOrEqual(roAt);
    // Never early; late only by timer delay on a loaded machine.
    expect(risk.at).toBeGreaterThanOrEqual(confirmedAt + 1_000);
    expect(risk.at).toBeLessThanOrEqual(lost.at);
    expect((risk.error as { code?: string }).code).toBe('EROFS');
    expect(lost.lease).toMatchObject({ health: 'lost', deadline: confirmedAt + 1_500 });
    expect(lost.at).toBeGreaterThanOrEqual(confirmedAt + 1_500);
    expect(lost.at).toBeLessThan(roAt + 3_000);
    expect(renewed.lease.health).toBe('held');
    expect(renewed.lease.confirmedAt!).toBeGreaterThanOrEqual(roAt + 3_000);
    expect(a.lease().health).toBe('held');

    // B, renewing its own lease from now on, still never takes A's row: A renews too.
    await sleep(3_000);
    expect(rows()).toEqual(['a-0']);
    b.child.kill('SIGTERM');
    const done = await b.waitFor('done', 10_000);
    expect(done.errors).toEqual([]);
    expect(rows()).toEqual(['a-0']);
  }, 60_000);

  it('the directory removed under running processes: calls recover typed (no raw ENOENT), the directory is made again 0700, no over-commit', async () => {
    freshDir();
    const w = worker({ mode: 'hold-then-call', instanceId: 'w', agents: 1 });
    expect((await w.waitFor('held')).granted).toBe(1);
    const x = ledger('x');
    expect(await x.reserve('p', 'x-0', 1, 0)).toEqual({ ok: true });
    expect(rows()).toEqual(['w-0', 'x-0']);

    rmSync(dir, { recursive: true });
    // The worker's next two reserves: its lost row reported once (typed), then granted.
    w.child.kill('SIGUSR2');
    const called = (await w.waitFor('called', 15_000)) as unknown as {
      answers: Array<{ value?: unknown; error?: { code?: string; agentIds?: string[] } }>;
    };
    expect(called.answers[0]?.error).toMatchObject({
      code: 'ERR_LEDGER_LEASE_EXPIRED',
      agentIds: ['w-0'],
    });
    expect(called.answers[1]).toEqual({ value: { ok: true } });
    expect(statSync(dir).mode & 0o777).toBe(0o700);

    // This process: its lost row reported once, typed, then it proceeds.
    const lost = await x.reserve('p', 'x-1', 1, 0).catch((error: unknown) => error);
    expect((lost as { code?: string }).code).toBe('ERR_LEDGER_LEASE_EXPIRED');
    expect(await x.reserve('p', 'x-1', 1, 0)).toEqual({ ok: true });
    expect(existsSync(join(dir, `${x.leaseId}.lease`))).toBe(true);
    expect(rows()).toEqual(['w-next', 'x-1']);

    // A third reserve, from a fresh process and from this one, is never granted on top.
    const third = worker({ mode: 'hold', instanceId: 'third', agents: 1 });
    expect(await third.waitFor('held', 15_000)).toMatchObject({ granted: 0, refused: 1 });
    expect(await x.reserve('p', 'x-2', 1, 0)).toMatchObject({ ok: false, used: 2 });
    expect(rows()).toEqual(['w-next', 'x-1']);
    for (const p of [w, third]) {
      p.child.kill('SIGTERM');
      expect((await p.waitFor('done', 10_000)).errors).toEqual([]);
    }
  }, 60_000);

  it('removed and recreated at once by an operator: a row is written only with its lease file beside it, so a renewing peer keeps it', async () => {
    freshDir();
    // The peer holds a row, so its lease is made and it renews for longer than
    // window + margin (1.5 s + 1 s): it is a judge of other leases.
    const peer = worker({ mode: 'hold-then-call', instanceId: 'peer', agents: 1 });
    expect((await peer.waitFor('held')).granted).toBe(1);
    const x = ledger('x');
    expect(await x.reapStale('p')).toBe(0);
    await sleep(3_000);

    // The cleanup job: everything goes, the directory is back at once (no lease file in it).
    rmSync(dir, { recursive: true });
    mkdirSync(dir, { mode: 0o700 });
    const lease = join(dir, `${x.leaseId}.lease`);
    expect(existsSync(lease)).toBe(false);
    // This instance writes at once: its lease file is made before the row.
    expect(await x.reserve('p', 'x-1', 1, 0)).toEqual({ ok: true });
    expect(existsSync(lease)).toBe(true);
    expect(statSync(lease).mtimeMs).toBeGreaterThan(Date.now() - 1_500);

    // The peer: its own lost row reported, then 1 CPU granted beside x-1, not on top of it.
    peer.child.kill('SIGUSR2');
    const called = (await peer.waitFor('called', 15_000)) as unknown as {
      answers: Array<{ value?: unknown; error?: { code?: string; agentIds?: string[] } }>;
    };
    expect(called.answers[0]?.error).toMatchObject({
      code: 'ERR_LEDGER_LEASE_EXPIRED',
      agentIds: ['peer-0'],
    });
    expect(called.answers[1]).toEqual({ value: { ok: true } });
    expect(rows()).toEqual(['x-1', 'peer-next']);
    // The pool is full: a third reserve is refused.
    expect(await x.reserve('p', 'x-2', 1, 0)).toMatchObject({ ok: false, used: 2 });
    await sleep(1_000);
    expect(rows()).toEqual(['x-1', 'peer-next']);
    peer.child.kill('SIGTERM');
    expect((await peer.waitFor('done', 10_000)).errors).toEqual([]);
  }, 60_000);
});
