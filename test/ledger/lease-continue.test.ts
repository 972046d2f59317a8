/**
 * MachineLedger's lease across a restart and a clean close, on a real
 * directory: a dead predecessor's lease within its deadline is continued (same
 * lease id, same file, the body naming the new holder), one past it is not, a
 * live holder of the instance id refuses this instance (a real other process),
 * exactly one of several processes claiming one predecessor at once wins;
 * `close()` leaves a closed marker any peer, however young, acts on at once,
 * while a crash (a lease file gone without a marker) keeps the rows for a young
 * peer; markers and claim tickets are swept after ten lease windows.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import {
  existsSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  rmSync,
  utimesSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { MachineLedger } from 'scaler-primitives/ledger';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ErrorCode, isScalerError } from '../../src/errors/base.js';
import { defaultFs } from '../../src/ledger/fs.js';
import { readBootId, readProcessStartTime } from '../../src/ledger/proc.js';
import { type FixtureProcess, startFixture } from '../helpers/processes.js';

let dir: string;
const open: MachineLedger[] = [];
const children: ChildProcess[] = [];
const fixtures: FixtureProcess[] = [];
const bootId = readBootId(defaultFs);

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'ledger-lease-continue-'));
});

afterEach(async () => {
  for (const ledger of open.splice(0)) await ledger.close().catch(() => {});
  for (const child of children.splice(0)) child.kill('SIGKILL');
  for (const fixture of fixtures.splice(0)) fixture.child.kill('SIGKILL');
  await Promise.all(fixtures.map((f) => f.exited));
  rmSync(dir, { recursive: true, force: true });
});

function make(instanceId: string, options: { leaseTtlMs?: number } = {}): MachineLedger {
  const ledger = new MachineLedger({ instanceId, dir, ...options });
  open.push(ledger);
  return ledger;
}

const PREDECESSOR = '0b7c2f4e-1111-4222-8333-944455556666';

/** A lease file as a dead (or live) process of `instanceId` left it, renewed `ageMs` ago. */
function plantLease(
  instanceId: string,
  holder: { pid: number; pidStartTime?: number; pidNs?: string },
  ageMs: number,
  leaseId = PREDECESSOR,
): string {
  const file = join(dir, `${leaseId}.lease`);
  writeFileSync(file, `${JSON.stringify({ instanceId, bootId, ...holder })}\n`, { mode: 0o644 });
  const at = (Date.now() - ageMs) / 1000;
  utimesSync(file, at, at);
  return file;
}

/** A pid that names no process now (a child that has exited). */
async function deadPid(): Promise<number> {
  const child = spawn('true');
  await new Promise((resolve) => child.on('exit', resolve));
  return child.pid!;
}

function liveChild(): ChildProcess {
  const child = spawn('sleep', ['60'], { stdio: 'ignore' });
  children.push(child);
  return child;
}

describe('a restart within the lease continues it', () => {
  it('a dead predecessor within its deadline: same lease id and file, renewed, its body names the new holder', async () => {
    const file = plantLease('ctl', { pid: await deadPid(), pidStartTime: 12345 }, 200);
    const before = readFileSync(file, 'utf8');
    const ledger = make('ctl', { leaseTtlMs: 5000 });
    const lease = await ledger.openLease();
    expect(lease.leaseId).toBe(PREDECESSOR);
    expect(ledger.leaseId).toBe(PREDECESSOR);
    expect(lease.health).toBe('held');
    expect(lease.location).toEqual({ kind: 'file', path: file });
    const body = JSON.parse(readFileSync(file, 'utf8')) as Record<string, unknown>;
    expect(body).toEqual({
      instanceId: 'ctl',
      pid: process.pid,
      bootId,
      pidStartTime: readProcessStartTime(defaultFs, process.pid),
      pidNs: readlinkSync('/proc/self/ns/pid'),
    });
    expect(readFileSync(file, 'utf8')).not.toBe(before);
    // The rows it writes carry the continued lease.
    ledger.registerPool('p', { maxCpu: 2 });
    expect(await ledger.reserve('p', 'a1', 1, 0)).toEqual({ ok: true });
    expect((await ledger.list('p')).map((r) => r.leaseId)).toEqual([PREDECESSOR]);
    // One lease file: no new one was made.
    expect(readdirSync(dir).filter((n) => n.endsWith('.lease'))).toEqual([`${PREDECESSOR}.lease`]);
  });

  it('a reused pid (same pid, another start time) is a dead predecessor too', async () => {
    const own = readProcessStartTime(defaultFs, process.pid)!;
    plantLease('ctl', { pid: process.pid, pidStartTime: own + 1 }, 100);
    expect((await make('ctl', { leaseTtlMs: 5000 }).openLease()).leaseId).toBe(PREDECESSOR);
  });

  it('past its deadline it is not continued: a new lease', async () => {
    const file = plantLease('ctl', { pid: await deadPid(), pidStartTime: 1 }, 5200);
    const ledger = make('ctl', { leaseTtlMs: 5000 });
    const lease = await ledger.openLease();
    expect(lease.leaseId).not.toBe(PREDECESSOR);
    expect(existsSync(join(dir, `${lease.leaseId}.lease`))).toBe(true);
    // The old file is left as it was, for peers to judge.
    expect(JSON.parse(readFileSync(file, 'utf8')).pid).not.toBe(process.pid);
  });

  it("another instance's lease, another boot's, or a cleanly closed one is not continued", async () => {
    plantLease('other', { pid: await deadPid() }, 100, 'lease-other');
    const boot = join(dir, 'lease-boot.lease');
    writeFileSync(boot, JSON.stringify({ instanceId: 'ctl', pid: 1, bootId: 'another-boot' }));
    plantLease('ctl', { pid: await deadPid() }, 100, 'lease-closed');
    writeFileSync(join(dir, 'lease-closed.closed'), '{}\n');
    const lease = await make('ctl', { leaseTtlMs: 5000 }).openLease();
    expect(['lease-other', 'lease-boot', 'lease-closed']).not.toContain(lease.leaseId);
  });

  it('a holder in another PID namespace (a container) is neither continued nor a reason to refuse: its pid means nothing here', async () => {
    plantLease('ctl', { pid: await deadPid(), pidStartTime: 1, pidNs: 'pid:[1]' }, 100);
    const lease = await make('ctl', { leaseTtlMs: 5000 }).openLease();
    expect(lease.leaseId).not.toBe(PREDECESSOR);
    const child = liveChild();
    await new Promise((resolve) => setTimeout(resolve, 50));
    const start = readProcessStartTime(defaultFs, child.pid!);
    plantLease('ctl2', { pid: child.pid!, pidStartTime: start!, pidNs: 'pid:[1]' }, 100);
    expect((await make('ctl2', { leaseTtlMs: 5000 }).openLease()).leaseId).not.toBe(PREDECESSOR);
  });

  it('a live process holding the instance id refuses this one with a typed error naming both', async () => {
    const child = liveChild();
    await new Promise((resolve) => setTimeout(resolve, 50));
    const start = readProcessStartTime(defaultFs, child.pid!);
    expect(start).toBeDefined();
    // Its lease is old: a live holder (confirmed by its start time) refuses all the same.
    plantLease('ctl', { pid: child.pid!, pidStartTime: start! }, 60_000);
    const ledger = make('ctl', { leaseTtlMs: 5000 });
    ledger.registerPool('p', { maxCpu: 2 });
    const error = await ledger.openLease().then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(isScalerError(error, ErrorCode.LEDGER_INSTANCE_IN_USE)).toBe(true);
    if (!isScalerError(error, ErrorCode.LEDGER_INSTANCE_IN_USE)) return;
    expect(error.instanceId).toBe('ctl');
    expect(error.holderPid).toBe(child.pid);
    expect(error.message).toContain('"ctl"');
    expect(error.message).toContain(`process ${child.pid}`);
    expect(error.message).toContain('another instanceId');
    // A write is refused the same way, and writes nothing.
    await expect(ledger.reserve('p', 'a1', 1, 0)).rejects.toMatchObject({
      code: 'ERR_LEDGER_INSTANCE_IN_USE',
      pool: 'p',
    });
    expect(await ledger.list('p')).toEqual([]);
    // Once the holder is gone, the same ledger proceeds (a new lease: that one is past its deadline).
    child.kill('SIGKILL');
    await new Promise((resolve) => child.on('exit', resolve));
    expect(await ledger.reserve('p', 'a1', 1, 0)).toEqual({ ok: true });
  });

  it('a second live process with the same instance id is refused (real processes)', async () => {
    const first = startFixture('lease-claim-worker.ts', [
      JSON.stringify({ dir, instanceId: 'ctl', leaseTtlMs: 3000 }),
    ]);
    fixtures.push(first);
    const opened = await first.waitFor('opened', 30_000);
    const second = startFixture('lease-claim-worker.ts', [
      JSON.stringify({ dir, instanceId: 'ctl', leaseTtlMs: 3000 }),
    ]);
    fixtures.push(second);
    const refused = await second.waitFor('refused', 30_000);
    expect(refused.code).toBe('ERR_LEDGER_INSTANCE_IN_USE');
    expect(refused.holderPid).toBe(first.child.pid);
    expect(String(refused.message)).toContain(`process ${first.child.pid}`);
    // The first one's lease is untouched: its body still names it.
    const body = JSON.parse(readFileSync(join(dir, `${String(opened.leaseId)}.lease`), 'utf8'));
    expect(body.pid).toBe(first.child.pid);
  }, 60_000);

  it('of four processes claiming one dead predecessor at once, exactly one continues it; the others are refused', async () => {
    plantLease('ctl', { pid: await deadPid(), pidStartTime: 7 }, 0);
    const at = Date.now() + 4000;
    const claimers = Array.from({ length: 4 }, () =>
      startFixture('lease-claim-worker.ts', [
        JSON.stringify({ dir, instanceId: 'ctl', leaseTtlMs: 20_000, at }),
      ]),
    );
    fixtures.push(...claimers);
    const outcomes = await Promise.all(claimers.map((c) => outcomeOf(c)));
    const continued = outcomes.filter((o) => o.event === 'opened' && o.leaseId === PREDECESSOR);
    const refused = outcomes.filter((o) => o.event === 'refused');
    expect(continued).toHaveLength(1);
    expect(refused).toHaveLength(3);
    for (const o of refused) expect(o.code).toBe('ERR_LEDGER_INSTANCE_IN_USE');
    const body = JSON.parse(readFileSync(join(dir, `${PREDECESSOR}.lease`), 'utf8'));
    expect(body.pid).toBe(continued[0]!.pid);
  }, 60_000);
});

describe('processes started with one instance id at the same instant', () => {
  it('at most one of four holds a lease; the others are refused and leave no lease file', async () => {
    const at = Date.now() + 4000;
    const starters = Array.from({ length: 4 }, () =>
      startFixture('lease-claim-worker.ts', [
        JSON.stringify({ dir, instanceId: 'twin', leaseTtlMs: 20_000, at }),
      ]),
    );
    fixtures.push(...starters);
    const outcomes = await Promise.all(starters.map((c) => outcomeOf(c)));
    const opened = outcomes.filter((o) => o.event === 'opened');
    expect(opened.length).toBeLessThanOrEqual(1);
    expect(outcomes.filter((o) => o.event === 'refused')).toHaveLength(4 - opened.length);
    // Only the holder's lease file is left.
    expect(readdirSync(dir).filter((n) => n.endsWith('.lease'))).toEqual(
      opened.map((o) => `${String(o.leaseId)}.lease`),
    );
  }, 60_000);
});

describe('a clean close frees capacity at once', () => {
  it('close() removes the lease file and leaves a closed marker; a peer that started a moment ago reaps at once (default options)', async () => {
    const a = make('a');
    a.registerPool('p', { maxCpu: 2 });
    expect(await a.reserve('p', 'x', 2, 0)).toEqual({ ok: true });
    const leaseId = a.leaseId;
    const b = make('b');
    b.registerPool('p', { maxCpu: 2 });
    expect((await b.reserve('p', 'y', 1, 0)).ok).toBe(false);
    await a.close();
    expect(existsSync(join(dir, `${leaseId}.lease`))).toBe(false);
    expect(existsSync(join(dir, `${leaseId}.closed`))).toBe(true);
    // b is far younger than its lease + margin (33 s): it reaps on the marker alone.
    expect(await b.reapStale('p')).toBe(1);
    expect(await b.reserve('p', 'y', 2, 0)).toEqual({ ok: true });
  });

  it('a crash (the lease file gone without a marker) keeps the rows for a young peer', async () => {
    const a = make('a');
    a.registerPool('p', { maxCpu: 2 });
    expect(await a.reserve('p', 'x', 2, 0)).toEqual({ ok: true });
    const b = make('b');
    b.registerPool('p', { maxCpu: 2 });
    rmSync(join(dir, `${a.leaseId}.lease`));
    expect(await b.reapStale('p')).toBe(0);
    expect((await b.list('p')).map((r) => r.agentId)).toEqual(['x']);
  });

  it('a closed lease is never continued by a restart', async () => {
    const a = make('ctl', { leaseTtlMs: 5000 });
    await a.openLease();
    const old = a.leaseId;
    await a.close();
    const lease = await make('ctl', { leaseTtlMs: 5000 }).openLease();
    expect(lease.leaseId).not.toBe(old);
  });

  it('markers and claim tickets are swept after ten lease windows, young ones kept', async () => {
    const old = (Date.now() - 11 * 1000) / 1000;
    const names = ['gone-1.closed', 'gone-2.1234-99.claim', 'gone-3.lease.77-abc.tmp'];
    for (const name of names) {
      writeFileSync(join(dir, name), '{}\n');
      utimesSync(join(dir, name), old, old);
    }
    writeFileSync(join(dir, 'young.closed'), '{}\n');
    const a = make('a', { leaseTtlMs: 1000 });
    a.registerPool('p', { maxCpu: 2 });
    await a.reapStale('p');
    const left = readdirSync(dir);
    for (const name of names) expect(left).not.toContain(name);
    expect(left).toContain('young.closed');
  });
});

/** The claim outcome a lease-claim worker printed: `opened` or `refused`. */
function outcomeOf(worker: FixtureProcess): Promise<Record<string, unknown>> {
  return new Promise((resolve, reject) => {
    const timer = setInterval(() => {
      const done = worker.events.find((e) => e.event === 'opened' || e.event === 'refused');
      if (done) {
        clearInterval(timer);
        resolve(done);
      }
    }, 20);
    void worker.exited.then(() => {
      clearInterval(timer);
      reject(new Error(`the worker exited: ${worker.stderr()}`));
    });
  });
}
