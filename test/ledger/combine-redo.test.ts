/**
 * A waiter whose calls a holder claimed, applied and wrote, and then never
 * answered (it stalled past the stale window), takes the lock and redoes them
 * with their maybe-applied marks. If its own write is then fenced off (its
 * lock was taken over in turn), "nothing was written, retry" would be false
 * for those calls: the first holder wrote them. The ledger does them again
 * itself instead of handing the caller that error. In one process, on a real
 * temp directory, with the takeovers made by hand (the lock directory renamed
 * away, as a taker-over does).
 */
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { isLedgerOutcomeUnknownError } from '../../src/errors/ledger.js';
import { parseDocument, serializeDocument } from '../../src/ledger/document/codec.js';
import { combineDirPath } from '../../src/ledger/file/combining/channel.js';
import {
  MachineLedger,
  type MachineLedgerHooks,
  withMachineLedgerHooks,
} from '../../src/ledger/file/machine-ledger.js';

let dir: string;
let lock: string;
const ledgers: MachineLedger[] = [];
const unblock: (() => void)[] = [];
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'ledger-redo-'));
  lock = join(dir, 'p.lock');
});
afterEach(async () => {
  for (const release of unblock.splice(0)) release();
  await Promise.all(ledgers.splice(0).map((ledger) => ledger.close()));
  rmSync(dir, { recursive: true, force: true });
});

function ledger(
  instanceId: string,
  hooks: Partial<MachineLedgerHooks> = {},
  lockTimeoutMs = 20_000,
): MachineLedger {
  const made = new MachineLedger(withMachineLedgerHooks({ instanceId, dir, lockTimeoutMs }, hooks));
  made.registerPool('p', { maxCpu: 4 });
  ledgers.push(made);
  return made;
}

async function until(what: string, check: () => boolean): Promise<void> {
  for (let i = 0; i < 2000 && !check(); i++) {
    await new Promise((resolve) => setTimeout(resolve, 2));
  }
  if (!check())
    throw new Error(
      `never happened: ${what} ${existsSync(combineDirPath(lock)) ? readdirSync(combineDirPath(lock)).join(',') : '-'} lock=${existsSync(lock) ? readdirSync(lock).join(',') : '-'}`,
    );
}

const postedCount = () =>
  existsSync(combineDirPath(lock))
    ? readdirSync(combineDirPath(lock)).filter((name) => name.endsWith('.req')).length
    : 0;

let takeovers = 0;
// What a taker-over does to the lock it found stale: move it out of the way.
function takeOver(): void {
  renameSync(lock, join(dir, `.p.lock.stale.hand${takeovers++}`));
}

const agents = () =>
  parseDocument(readFileSync(join(dir, 'p.json'), 'utf8'), { pool: 'p', location: 'test' })
    .reservations.map((row) => row.agentId)
    .sort();

// A holder that claims B's one posted call, writes it, and then goes silent
// (until `stalled()`).
function silentHolder() {
  let stalled!: () => void;
  const silent = new Promise<void>((resolve) => {
    stalled = resolve;
  });
  unblock.push(stalled);
  let wrote = false;
  const a = ledger('a', {
    beforeClaim: () => until("B's call is posted", () => postedCount() === 1),
    afterWrite: async () => {
      wrote = true;
      await silent;
    },
  });
  return { a, wrote: () => wrote, stalled };
}

describe('a redo of maybe-applied calls that loses its lock', () => {
  it.each([
    { call: 'release', after: ['w', 'y'] },
    { call: 'reserve', after: ['w', 'x', 'y', 'z'] },
  ] as const)(
    'runs a claimed $call again with its mark, and answers it as the first holder did',
    async ({ call, after }) => {
      const { a, wrote, stalled } = silentHolder();
      // B: once it holds the lock on its redo, it waits for C's request (so
      // that its write has something new to write), and its lock is taken over
      // just before that write.
      let bStage: 'idle' | 'armed' | 'claiming' | 'committing' | 'done' = 'idle';
      const b = ledger('b', {
        beforeClaim: async () => {
          if (bStage !== 'armed') return;
          bStage = 'claiming';
          await until("C's call is posted", () => postedCount() === 1);
          bStage = 'committing';
        },
        beforeCommit: () => {
          if (bStage !== 'committing') return;
          bStage = 'done';
          takeOver();
        },
      });
      const c = ledger('c');

      await expect(b.reserve('p', 'x', 1, 0)).resolves.toMatchObject({ ok: true });
      const reservingY = a.reserve('p', 'y', 1, 0);
      await until('A holds the lock', () => existsSync(lock));
      bStage = 'armed';
      const calling: Promise<unknown> =
        call === 'release' ? b.release('p', 'x') : b.reserve('p', 'z', 1, 0);
      await until('A wrote B’s call', wrote);
      expect(agents()).toEqual(call === 'release' ? ['y'] : ['x', 'y', 'z']);
      // A stays silent past its stale window: its lock is taken over.
      takeOver();
      await until('B redoes its call under its own lock', () => bStage === 'claiming');
      const reservingW = c.reserve('p', 'w', 1, 0);

      // Without the redo B would hear "lock compromised": for the release a
      // retry would then say it held no row, for the reserve the row z would
      // stand with nobody told it was granted.
      await expect(calling).resolves.toEqual(
        call === 'release' ? true : expect.objectContaining({ ok: true }),
      );
      await expect(reservingW).resolves.toMatchObject({ ok: true });
      expect(bStage).toBe('done');
      expect(agents()).toEqual(after);
      stalled();
      await expect(reservingY).resolves.toMatchObject({ ok: true });
      // Nothing was applied twice.
      expect(agents()).toEqual(after);
      if (call === 'reserve') await expect(b.release('p', 'z')).resolves.toBe(true);
    },
  );

  it('a redo that keeps losing its lock is settled from the pool file once the lock is free', async () => {
    const { a, wrote, stalled } = silentHolder();
    // B's redo is taken over before every write, for all of its lock timeout.
    let armed = false;
    let lost = 0;
    const b = ledger(
      'b',
      {
        beforeCommit: () => {
          if (!armed) return;
          lost++;
          takeOver();
        },
      },
      300,
    );
    await expect(b.reserve('p', 'x', 1, 0)).resolves.toMatchObject({ ok: true });
    const reservingY = a.reserve('p', 'y', 1, 0);
    await until('A holds the lock', () => existsSync(lock));
    armed = true;
    const reserving = b.reserve('p', 'z', 1, 0);
    await until('A wrote B’s call', wrote);
    // z, which A wrote for B, is gone again before B's redo (as if released
    // by an operator): every redo of B writes z (and loses its lock first).
    const file = join(dir, 'p.json');
    const doc = parseDocument(readFileSync(file, 'utf8'), { pool: 'p', location: file });
    doc.reservations = doc.reservations.filter((row) => row.agentId !== 'z');
    writeFileSync(file, serializeDocument(doc));
    takeOver();
    const error = await reserving.then(
      () => undefined,
      (caught: unknown) => caught,
    );
    // The lock is free when B gives up, and A's lock was taken over: nobody
    // can write z any more, and it is not in the file, so the reserve failed
    // and "nothing was written" is true for it.
    expect(error).toMatchObject({ code: 'ERR_LEDGER_LOCK_COMPROMISED' });
    expect((error as Error).message).toMatch(/Nothing was written/);
    // It redid the reserve more than once before giving up, and wrote nothing.
    expect(lost).toBeGreaterThan(1);
    expect(agents()).toEqual(['x', 'y']);
    armed = false;
    stalled();
    await expect(reservingY).resolves.toMatchObject({ ok: true });
    // A, back, wrote nothing more: no row stays whose caller was told it failed.
    expect(agents()).toEqual(['x', 'y']);
  });

  it('a redo that fails while another process holds the lock is unknown, and the next write removes its row', async () => {
    const { a, wrote, stalled } = silentHolder();
    let armed = false;
    const b = ledger('b', {
      // B's redo (its calls marked maybe-applied) loses its lock to a holder
      // that stays, and then fails with an I/O error.
      beforeClaim: () => {
        if (!armed) return;
        armed = false;
        takeOver();
        mkdirSync(lock, { mode: 0o700 });
        throw Object.assign(new Error('EIO: i/o error, read'), { code: 'EIO', syscall: 'read' });
      },
    });
    await expect(b.reserve('p', 'x', 1, 0)).resolves.toMatchObject({ ok: true });
    const reservingY = a.reserve('p', 'y', 1, 0);
    await until('A holds the lock', () => existsSync(lock));
    armed = true;
    const reserving = b.reserve('p', 'z', 1, 0);
    await until('A wrote B’s call', wrote);
    takeOver();
    const error = await reserving.then(
      () => undefined,
      (caught: unknown) => caught,
    );
    expect(isLedgerOutcomeUnknownError(error), String(error)).toBe(true);
    expect(error).toMatchObject({ code: 'ERR_LEDGER_OUTCOME_UNKNOWN', pool: 'p', agentIds: ['z'] });
    expect((error as Error).message).toMatch(/reserve of agent "z" is unknown/);
    expect((error as Error).cause).toMatchObject({ code: 'ERR_LEDGER_IO', errno: 'EIO' });
    // z is in the file (A wrote it), and B's caller was told to treat it as not granted.
    expect(agents()).toEqual(['x', 'y', 'z']);
    rmSync(lock, { recursive: true, force: true });
    // B's next write removes z first.
    await expect(b.reserve('p', 'q', 1, 0)).resolves.toMatchObject({ ok: true });
    expect(agents()).toEqual(['q', 'x', 'y']);
    // ...once: a later write does not release z again (a new z is kept).
    await expect(b.reserve('p', 'z', 1, 0)).resolves.toMatchObject({ ok: true });
    await expect(b.reserve('p', 'r', 1, 0)).resolves.toMatchObject({ ok: false });
    expect(agents()).toEqual(['q', 'x', 'y', 'z']);
    stalled();
    await expect(reservingY).resolves.toMatchObject({ ok: true });
  });

  it('calls nobody else claimed still hear that nothing was written', async () => {
    let armed = true;
    const b = ledger('b', {
      beforeCommit: () => {
        if (!armed) return;
        armed = false;
        takeOver();
      },
    });
    await expect(b.reserve('p', 'x', 1, 0)).rejects.toMatchObject({
      code: 'ERR_LEDGER_LOCK_COMPROMISED',
    });
    expect(existsSync(join(dir, 'p.json'))).toBe(false);
    await expect(b.reserve('p', 'x', 1, 0)).resolves.toMatchObject({ ok: true });
    expect(agents()).toEqual(['x']);
  });
});
