/**
 * Rows this instance holds that vanish while it is stalled (a peer reaped them
 * after its lease expired) or that an operator removes: the next reserve or
 * reapStale on the pool fails once with LedgerLeaseExpiredError naming them.
 * Clocks are injected: nothing here waits for a lease to expire.
 */
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { TestClock } from 'scaler-primitives/testing';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  isLedgerLeaseExpiredError,
  type LedgerLeaseExpiredError,
} from '../../src/errors/ledger.js';
import type { MachineLedgerOptions } from '../../src/ledger/file/machine-ledger.js';
import {
  MachineLedger,
  type MachineLedgerHooks,
  withMachineLedgerHooks,
} from '../../src/ledger/file/machine-ledger.js';

let dir: string;
const ledgers: MachineLedger[] = [];
// Wall clock (lease mtimes) and monotonic clock of the instance under test.
let wall: number;
let mono: number;

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'ledger-lease-loss-'));
  wall = Math.floor(Date.now());
  mono = 1_000;
});

afterEach(async () => {
  await Promise.all(ledgers.splice(0).map((l) => l.close()));
  rmSync(dir, { recursive: true, force: true });
});

function make(
  instanceId: string,
  options: Partial<MachineLedgerOptions> & { hooks?: Partial<MachineLedgerHooks> } = {},
): MachineLedger {
  const { hooks = {}, ...rest } = options;
  const ledger = new MachineLedger(
    withMachineLedgerHooks({ instanceId, dir, bootId: 'boot-1', ...rest }, hooks),
  );
  ledger.registerPool('p', { maxCpu: 4 });
  ledgers.push(ledger);
  return ledger;
}

// The instance under test: a long lease, so its refresh timer stays quiet.
const me = () =>
  make('me', { leaseTtlMs: 60_000, now: () => wall, hooks: { monotonic: () => mono } });
// A peer whose clock is two of our lease windows ahead: our lease looks expired
// to it once it has renewed its own for a window plus the margin (60 s + 6 s):
// an instance never judges others before it has been renewing itself that long.
async function latePeer(): Promise<MachineLedger> {
  const clock = new TestClock(wall + 120_001 - 70_000);
  const peer = make('peer', { leaseTtlMs: 60_000, clock });
  // Its lease starts; our rows are still fresh to it.
  expect(await peer.reapStale('p')).toBe(0);
  await clock.advance(70_000);
  return peer;
}

const agents = () =>
  (
    JSON.parse(readFileSync(join(dir, 'p.json'), 'utf8')).reservations as Array<{
      agentId: string;
    }>
  ).map((r) => r.agentId);

async function rejection(promise: Promise<unknown>): Promise<LedgerLeaseExpiredError> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(isLedgerLeaseExpiredError(error), String(error)).toBe(true);
  return error as LedgerLeaseExpiredError;
}

describe('reservations lost while this instance was stalled', () => {
  it('a peer reaps our rows: the next call fails once naming them and writes nothing, then calls work', async () => {
    const ledger = me();
    await ledger.reserve('p', 'a', 1, 0);
    await ledger.reserve('p', 'b', 1, 0);
    expect(await (await latePeer()).reapStale('p')).toBe(2);
    expect(agents()).toEqual([]);
    const before = statSync(join(dir, 'p.json'));

    const error = await rejection(ledger.reserve('p', 'c', 1, 0));
    expect(error.code).toBe('ERR_LEDGER_LEASE_EXPIRED');
    expect(error.pool).toBe('p');
    expect(error.agentIds).toEqual(['a', 'b']);
    expect(error.message).toContain('"a", "b"');
    expect(error.message).toContain('pool "p"');
    expect(error.message).toMatch(/stop those agents, or reserve them again/);
    // The failed call wrote nothing.
    const after = statSync(join(dir, 'p.json'));
    expect([after.ino, after.mtimeMs]).toEqual([before.ino, before.mtimeMs]);
    expect(agents()).toEqual([]);

    // Reported once: the same call now works, and a lost agent can be reserved again.
    expect(await ledger.reserve('p', 'c', 1, 0)).toEqual({ ok: true });
    expect(await ledger.reserve('p', 'a', 1, 0)).toEqual({ ok: true });
    expect(await ledger.reapStale('p')).toBe(0);
    expect(agents()).toEqual(['c', 'a']);
  });

  it('in a batch only the first reserve carries the report; releases never do', async () => {
    const ledger = me();
    for (const id of ['a', 'b', 'c']) await ledger.reserve('p', id, 1, 0);
    await (await latePeer()).reapStale('p');
    // The first call is a batch of its own; the next three share one cycle.
    const calls = [
      ledger.release('p', 'c'),
      ledger.release('p', 'a'),
      ledger.reserve('p', 'x', 1, 0),
      ledger.reserve('p', 'y', 1, 0),
    ];
    const settled = await Promise.allSettled(calls);
    expect(settled[0]).toEqual({ status: 'fulfilled', value: false });
    expect(settled[1]).toEqual({ status: 'fulfilled', value: false });
    expect(settled[2]?.status).toBe('rejected');
    // `a` and `c` were being released: only `b` is news to the caller.
    const error = (settled[2] as PromiseRejectedResult).reason as LedgerLeaseExpiredError;
    expect(isLedgerLeaseExpiredError(error)).toBe(true);
    expect(error.agentIds).toEqual(['b']);
    expect(settled[3]).toEqual({ status: 'fulfilled', value: { ok: true } });
    expect(agents()).toEqual(['y']);
    expect(await ledger.reserve('p', 'x', 1, 0)).toEqual({ ok: true });
  });

  it('an operator release counts as lost; reapStale carries it, the reaper does not consume it', async () => {
    const ledger = me();
    await ledger.reserve('p', 'a', 1, 0);
    await ledger.reserve('p', 'b', 1, 0);
    // What `scaler-primitives ledger release p a` does.
    expect(await make('operator').release('p', 'a', { anyInstance: true })).toBe(true);
    ledger.start(10);
    await new Promise((resolve) => setTimeout(resolve, 80));
    ledger.stop();
    const error = await rejection(ledger.reapStale('p'));
    expect(error.agentIds).toEqual(['a']);
    expect(await ledger.reapStale('p')).toBe(0);
    expect(agents()).toEqual(['b']);
  });

  it('release, releaseAllForInstance and close forget what they release', async () => {
    const ledger = me();
    await ledger.reserve('p', 'a', 1, 0);
    await ledger.reserve('p', 'b', 1, 0);
    expect(await ledger.release('p', 'a')).toBe(true);
    await ledger.releaseAllForInstance();
    // Nothing held any more, so rows reaped or removed from now on are no loss of ours.
    await ledger.reserve('p', 'c', 1, 0);
    await ledger.release('p', 'c');
    expect(await ledger.reserve('p', 'd', 1, 0)).toEqual({ ok: true });
    expect(agents()).toEqual(['d']);

    // A peer that removes rows this instance never held reports nothing.
    const peer = make('peer2');
    await peer.reserve('p', 'e', 1, 0);
    await peer.release('p', 'e');
    expect(await ledger.reserve('p', 'f', 1, 0)).toEqual({ ok: true });
  });

  it('rows still present after a stall are no loss: the call refreshes the lease first and proceeds', async () => {
    const ledger = me();
    await ledger.reserve('p', 'a', 1, 0);
    const lease = join(dir, `${ledger.leaseId}.lease`);
    expectMtime(lease, wall);
    const start = wall;

    // Confirmed less than a third of the lease window ago: no extra renewal.
    mono += 19_000;
    wall += 19_000;
    expect(await ledger.reserve('p', 'b', 1, 0)).toEqual({ ok: true });
    expectMtime(lease, start);

    // Past a third of the window (a stall): renewed before acting, and nothing fails.
    mono += 2_000;
    wall += 2_000;
    expect(await ledger.reserve('p', 'c', 1, 0)).toEqual({ ok: true });
    expectMtime(lease, wall);
    expect(agents()).toEqual(['a', 'b', 'c']);
  });

  it('a corrupt file is still refused as corrupt and left as it is', async () => {
    const ledger = me();
    await ledger.reserve('p', 'a', 1, 0);
    await (await latePeer()).reapStale('p');
    writeFileSync(join(dir, 'p.json'), '{"version":1,');
    const error = await ledger.reserve('p', 'b', 1, 0).catch((e: unknown) => e);
    expect((error as { code?: string }).code).toBe('ERR_LEDGER_CORRUPT');
    expect(readFileSync(join(dir, 'p.json'), 'utf8')).toBe('{"version":1,');
  });
});

// utimes takes seconds as a float and the kernel keeps nanoseconds, so a whole
// millisecond can come back as 1795972018207.999: compare to within a millisecond.
function expectMtime(path: string, ms: number): void {
  expect(Math.abs(statSync(path).mtimeMs - ms)).toBeLessThan(1);
}
