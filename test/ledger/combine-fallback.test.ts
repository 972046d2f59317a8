/**
 * How a waiter that posted its calls behaves by who holds the lock (in one
 * process, on a real temp directory, with lock directories made by hand):
 * behind a holder of ours that combines it stays out of the wait queue and
 * waits for the answer; behind any other holder (the kici orchestrator's
 * ledger, which never answers posted requests) it stands in line and takes the
 * lock itself, its request withdrawn so that it is applied exactly once.
 */
import * as nodeFs from 'node:fs';
import {
  chmodSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
  utimesSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { parseDocument } from '../../src/ledger/document/codec.js';
import { combineDirPath } from '../../src/ledger/file/combining/channel.js';
import { heldByCombiningHolder } from '../../src/ledger/file/lock.js';
import { MachineLedger } from '../../src/ledger/file/machine-ledger.js';

let dir: string;
let lock: string;
let queue: string;
const ledgers: MachineLedger[] = [];
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'ledger-fallback-'));
  lock = join(dir, 'p.lock');
  queue = join(dir, '.p.queue');
});
afterEach(async () => {
  await Promise.all(ledgers.splice(0).map((ledger) => ledger.close()));
  rmSync(dir, { recursive: true, force: true });
});

function ledger(instanceId: string): MachineLedger {
  const made = new MachineLedger({ instanceId, dir, lockTimeoutMs: 20_000 });
  made.registerPool('p', { maxCpu: 4 });
  ledgers.push(made);
  return made;
}

// A lock as the kici orchestrator's ledger makes it: mkdir with the default mode, empty.
function foreignLock(): void {
  mkdirSync(lock);
  chmodSync(lock, 0o755);
}

// A lock as a holder of ours that combines keeps it: private, the sticky bit
// set, its token inside.
function combiningLock(): void {
  mkdirSync(join(lock, `${process.pid}.fake0holder`), { recursive: true, mode: 0o700 });
  chmodSync(lock, 0o1700);
}

async function until(what: string, check: () => boolean): Promise<void> {
  for (let i = 0; i < 1000 && !check(); i++) {
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
  if (!check()) throw new Error(`never happened: ${what}`);
}

const posted = () =>
  existsSync(combineDirPath(lock)) &&
  readdirSync(combineDirPath(lock)).some((name) => name.endsWith('.req'));

const rows = () =>
  parseDocument(readFileSync(join(dir, 'p.json'), 'utf8'), { pool: 'p', location: 'test' })
    .reservations;

describe('who holds the lock', () => {
  it('is a combining holder of ours only for a private, marked, fresh lock', () => {
    const held = () => heldByCombiningHolder(nodeFs, lock, 10_000);
    expect(held()).toBe(false);
    foreignLock();
    expect(held()).toBe(false);
    // The kici ledger's lock with the mark: group/other bits say it is not ours.
    chmodSync(lock, 0o1755);
    expect(held()).toBe(false);
    // An older holder of ours (private, no mark): it does not answer posted requests.
    mkdirSync(join(lock, '12.abc'));
    chmodSync(lock, 0o700);
    expect(held()).toBe(false);
    rmSync(lock, { recursive: true });
    combiningLock();
    expect(held()).toBe(true);
    // Not refreshed within the stale window: its holder is gone, someone must take it over.
    const old = (Date.now() - 60_000) / 1000;
    utimesSync(lock, old, old);
    expect(held()).toBe(false);
    expect(heldByCombiningHolder(nodeFs, lock, 120_000)).toBe(true);
    rmSync(lock, { recursive: true });
    // A link is never followed.
    mkdirSync(join(dir, 'elsewhere', `${process.pid}.x`), { recursive: true, mode: 0o700 });
    chmodSync(join(dir, 'elsewhere'), 0o1700);
    symlinkSync(join(dir, 'elsewhere'), lock);
    expect(held()).toBe(false);
  });
});

describe('a posted waiter', () => {
  it('behind a kici holder: stands in line, takes the lock once it is free, applied once', async () => {
    foreignLock();
    const reserving = ledger('ours').reserve('p', 'a', 1, 0);
    // It posted its calls (a holder of ours would apply them) and, since the
    // holder is not one that answers, it also claimed the head of the line.
    await until('the request is posted', posted);
    await until('the waiter stands in line', () => existsSync(queue));
    // ...and stays there, refreshing its claim, for as long as the lock is held.
    const claimedAt = () => Number(readFileSync(queue, 'utf8').split(' ')[1]);
    const first = claimedAt();
    for (let i = 0; i < 20; i++) {
      expect(existsSync(queue)).toBe(true);
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
    expect(claimedAt()).toBeGreaterThan(first);
    rmSync(lock, { recursive: true });
    await expect(reserving).resolves.toMatchObject({ ok: true });
    expect(rows().map((row) => row.agentId)).toEqual(['a']);
    expect(posted()).toBe(false);
    expect(existsSync(queue)).toBe(false);
  });

  it('behind a combining holder: waits out of line; when that holder never answers, takes the lock itself', async () => {
    combiningLock();
    const reserving = ledger('ours').reserve('p', 'a', 1, 0);
    await until('the request is posted', posted);
    // Deferring to the holder, it never claims the head of the line.
    for (let i = 0; i < 20; i++) {
      expect(existsSync(queue)).toBe(false);
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
    // The holder turns out to be one that does not answer (its lock now looks
    // like the kici ledger's): the waiter stops deferring and stands in line.
    rmSync(join(lock, `${process.pid}.fake0holder`), { recursive: true });
    chmodSync(lock, 0o755);
    await until('the waiter stands in line', () => existsSync(queue));
    rmSync(lock, { recursive: true });
    await expect(reserving).resolves.toMatchObject({ ok: true });
    expect(rows().map((row) => row.agentId)).toEqual(['a']);
    expect(posted()).toBe(false);
  });

  it('two waiters behind a kici holder: the one that takes the lock applies the other, each exactly once', async () => {
    foreignLock();
    const first = ledger('one').reserve('p', 'a', 1, 0);
    await until('the first request is posted', posted);
    const second = ledger('two').reserve('p', 'b', 1, 0);
    await until('both requests are posted', () =>
      existsSync(combineDirPath(lock))
        ? readdirSync(combineDirPath(lock)).filter((name) => name.endsWith('.req')).length === 2
        : false,
    );
    rmSync(lock, { recursive: true });
    await expect(Promise.all([first, second])).resolves.toMatchObject([{ ok: true }, { ok: true }]);
    expect(
      rows()
        .map((row) => row.agentId)
        .sort(),
    ).toEqual(['a', 'b']);
    expect(posted()).toBe(false);
  });
});
