/**
 * Storage faults injected through the ledger's `fs` (the real-filesystem
 * version is test/integration/ledger-storage-faults.test.ts): every failure is
 * a `LedgerIoError` naming the pool, the path, the errno and whether anything
 * may have been written; a failed acquire or release leaves no lock behind once
 * the fault clears; a read-only directory is read-only, not unsafe.
 */
import * as nodeFs from 'node:fs';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { FileStateStore } from 'scaler-primitives/manager';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  isLedgerDirError,
  isLedgerIoError,
  type LedgerIoError,
} from '../../src/errors/ledger-fs.js';
import { isStateStoreError } from '../../src/errors/state-store.js';
import type { LedgerFs } from '../../src/ledger/fs.js';
import { ledgerFactory } from '../helpers/machine-ledger.js';

let dir: string;
const ledgers = ledgerFactory(() => dir);
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'ledger-io-'));
});
afterEach(async () => {
  await ledgers.closeAll({ ignoreErrors: true });
  rmSync(dir, { recursive: true, force: true });
});

function systemError(code: string, syscall: string, path: string): Error {
  return Object.assign(new Error(`${code}: injected, ${syscall} '${path}'`), {
    code,
    syscall,
    path,
  });
}

type Fault = (call: string, path: string) => string | undefined;

// node:fs whose mkdirSync, rmdirSync, openSync and access fail with the errno
// `fault` names for a call and path (undefined: the real call).
function faultyFs(fault: { current: Fault }): LedgerFs {
  const check = (call: string, path: unknown) => {
    const code = fault.current(call, String(path));
    if (code) throw systemError(code, call, String(path));
  };
  return {
    ...nodeFs,
    mkdirSync: ((path: string, mode: unknown) => {
      check('mkdir', path);
      return nodeFs.mkdirSync(path, mode as number);
    }) as LedgerFs['mkdirSync'],
    rmdirSync: ((path: string) => {
      check('rmdir', path);
      return nodeFs.rmdirSync(path);
    }) as LedgerFs['rmdirSync'],
    linkSync: ((existing: string, path: string) => {
      check('link', path);
      return nodeFs.linkSync(existing, path);
    }) as LedgerFs['linkSync'],
    unlinkSync: ((path: string) => {
      check('unlink', path);
      return nodeFs.unlinkSync(path);
    }) as LedgerFs['unlinkSync'],
    openSync: ((path: string, flags: number, mode?: number) => {
      check('open', path);
      return nodeFs.openSync(path, flags, mode);
    }) as LedgerFs['openSync'],
    promises: {
      ...nodeFs.promises,
      access: async (path: nodeFs.PathLike, mode?: number) => {
        check('access', path);
        return nodeFs.promises.access(path, mode);
      },
    },
  } as LedgerFs;
}

const none: Fault = () => undefined;
const lock = () => join(dir, 'p.lock');
const rows = () =>
  existsSync(join(dir, 'p.json'))
    ? (JSON.parse(readFileSync(join(dir, 'p.json'), 'utf8')).reservations as { agentId: string }[])
        .map((row) => row.agentId)
        .sort()
    : [];

async function failure(promise: Promise<unknown>): Promise<unknown> {
  return promise.then(
    (value) => {
      throw new Error(`expected a rejection, got ${JSON.stringify(value)}`);
    },
    (error: unknown) => error,
  );
}

describe('typed I/O errors', () => {
  it('a full disk at the write is a LedgerIoError naming pool, path and errno; nothing written', async () => {
    const fault = { current: none };
    const ledger = ledgers.make({ fs: faultyFs(fault) });
    ledger.registerPool('p', { maxCpu: 4 });
    await expect(ledger.reserve('p', 'a', 1, 0)).resolves.toEqual({ ok: true });
    fault.current = (call, path) =>
      call === 'open' && path.endsWith('.tmp') ? 'ENOSPC' : undefined;
    const error = (await failure(ledger.reserve('p', 'b', 1, 0))) as LedgerIoError;
    expect(isLedgerIoError(error), String(error)).toBe(true);
    expect(error).toMatchObject({
      code: 'ERR_LEDGER_IO',
      pool: 'p',
      errno: 'ENOSPC',
      syscall: 'open',
      mayHaveWritten: false,
    });
    expect(error.path).toMatch(/p\.lock\/.*p\.json\.tmp$/);
    expect(error.message).toMatch(
      /^Pool "p": `open` on .* failed with ENOSPC: the filesystem is full/,
    );
    expect(error.message).toMatch(/Nothing was written to the pool file/);
    expect((error.cause as { code: string }).code).toBe('ENOSPC');
    expect(rows()).toEqual(['a']);
    expect(existsSync(lock())).toBe(false);
    fault.current = none;
    await expect(ledger.reserve('p', 'b', 1, 0)).resolves.toEqual({ ok: true });
  });

  it('no inode for the token directory: the lock directory just made is removed again', async () => {
    const fault = { current: none };
    const ledger = ledgers.make({ fs: faultyFs(fault) });
    ledger.registerPool('p', { maxCpu: 4 });
    await expect(ledger.reserve('p', 'a', 1, 0)).resolves.toEqual({ ok: true });
    fault.current = (call, path) =>
      call === 'mkdir' && path.startsWith(`${lock()}/`) ? 'ENOSPC' : undefined;
    const error = (await failure(ledger.reserve('p', 'b', 1, 0))) as LedgerIoError;
    expect(error).toMatchObject({ code: 'ERR_LEDGER_IO', errno: 'ENOSPC', syscall: 'mkdir' });
    expect(existsSync(lock())).toBe(false);
    // Another process is not held up for the stale window (10 s) once the fault clears.
    fault.current = none;
    const other = ledgers.make({ instanceId: 'other', lockTimeoutMs: 1000 });
    other.registerPool('p', { maxCpu: 4 });
    const started = Date.now();
    await expect(other.reserve('p', 'c', 1, 0)).resolves.toEqual({ ok: true });
    expect(Date.now() - started).toBeLessThan(1000);
  });

  it('a release whose rmdir fails (EROFS) is retried: the lock is gone within a second of the fault clearing', async () => {
    const fault = { current: none };
    const ledger = ledgers.make({ fs: faultyFs(fault) });
    ledger.registerPool('p', { maxCpu: 4 });
    fault.current = (call, path) =>
      call === 'rmdir' && (path === lock() || path.startsWith(`${lock()}/`)) ? 'EROFS' : undefined;
    await expect(ledger.reserve('p', 'a', 1, 0)).resolves.toEqual({ ok: true });
    expect(nodeFs.readdirSync(lock())).toHaveLength(1);
    await new Promise((resolve) => setTimeout(resolve, 250));
    expect(existsSync(lock())).toBe(true);
    fault.current = none;
    const cleared = Date.now();
    const other = ledgers.make({ instanceId: 'other', lockTimeoutMs: 5000 });
    other.registerPool('p', { maxCpu: 4 });
    await expect(other.reserve('p', 'b', 1, 0)).resolves.toEqual({ ok: true });
    expect(Date.now() - cleared).toBeLessThan(1000);
    expect(existsSync(lock())).toBe(false);
    expect(rows()).toEqual(['a', 'b']);
  });

  it('a stuck lock is also removed before the next acquire of the pool', async () => {
    const fault = { current: none };
    const ledger = ledgers.make({ fs: faultyFs(fault) });
    ledger.registerPool('p', { maxCpu: 4 });
    fault.current = (call, path) => (call === 'rmdir' && path === lock() ? 'EROFS' : undefined);
    await expect(ledger.reserve('p', 'a', 1, 0)).resolves.toEqual({ ok: true });
    expect(existsSync(lock())).toBe(true);
    fault.current = none;
    const started = Date.now();
    await expect(ledger.reserve('p', 'b', 1, 0)).resolves.toEqual({ ok: true });
    expect(Date.now() - started).toBeLessThan(1000);
    expect(existsSync(lock())).toBe(false);
  });

  it('while its own last lock of the pool cannot be removed, a call fails at once with that errno instead of waiting for the lock', async () => {
    const fault = { current: none };
    // A lock timeout far longer than the test: a call that waited for the stuck
    // lock would time the test out, or (if it came back) be LedgerBusyError.
    const ledger = ledgers.make({ fs: faultyFs(fault), lockTimeoutMs: 60_000 });
    ledger.registerPool('p', { maxCpu: 4 });
    fault.current = (call, path) =>
      call === 'rmdir' && (path === lock() || path.startsWith(`${lock()}/`)) ? 'EROFS' : undefined;
    await expect(ledger.reserve('p', 'a', 1, 0)).resolves.toEqual({ ok: true });
    expect(existsSync(lock())).toBe(true);
    const error = await ledger.reserve('p', 'b', 1, 0).then(
      () => undefined,
      (caught: unknown) => caught,
    );
    expect(isLedgerIoError(error), String(error)).toBe(true);
    expect(error).toMatchObject({ pool: 'p', errno: 'EROFS', mayHaveWritten: false });
    expect(rows()).toEqual(['a']);
    // Once the fault clears, the same ledger removes its lock and goes on.
    fault.current = none;
    await expect(ledger.reserve('p', 'b', 1, 0)).resolves.toEqual({ ok: true });
    expect(existsSync(lock())).toBe(false);
    expect(rows()).toEqual(['a', 'b']);
  }, 20_000);

  it('a read-only directory is reported as read-only (EROFS), not as unsafe', async () => {
    const fault = { current: ((call) => (call === 'access' ? 'EROFS' : undefined)) as Fault };
    const ledger = ledgers.make({ fs: faultyFs(fault) });
    ledger.registerPool('p', { maxCpu: 4 });
    const error = (await failure(ledger.reserve('p', 'a', 1, 0))) as LedgerIoError;
    expect(isLedgerDirError(error)).toBe(false);
    expect(error).toMatchObject({ code: 'ERR_LEDGER_IO', pool: 'p', errno: 'EROFS', path: dir });
    expect(error.message).toMatch(/read-only/);
    const store = new FileStateStore({ dir: join(dir, 'state'), fs: faultyFs(fault) });
    const stateError = await failure(store.commit([]));
    expect(isStateStoreError(stateError)).toBe(true);
    expect(stateError).toMatchObject({ problem: 'unavailable' });
    expect((stateError as Error).message).toMatch(/EROFS/);
  });

  it('a failing read of inspect is typed too', async () => {
    const fault = { current: none };
    const ledger = ledgers.make({ fs: faultyFs(fault) });
    ledger.registerPool('p', { maxCpu: 4 });
    await ledger.reserve('p', 'a', 1, 0);
    fault.current = (call, path) =>
      call === 'open' && basename(path) === 'p.json' ? 'EIO' : undefined;
    await expect(ledger.inspect('p')).rejects.toMatchObject({
      code: 'ERR_LEDGER_IO',
      errno: 'EIO',
      pool: 'p',
      path: join(dir, 'p.json'),
      mayHaveWritten: false,
    });
  });

  it('a posted request that cannot be withdrawn (EROFS) is unknown, and is settled once it can be', async () => {
    let releaseA!: () => void;
    const aMayClaim = new Promise<void>((resolve) => {
      releaseA = resolve;
    });
    let armed = false;
    const a = ledgers.make({
      instanceId: 'a',
      hooks: {
        beforeClaim: async () => {
          if (armed) await aMayClaim;
        },
      },
    });
    a.registerPool('p', { maxCpu: 4 });
    const fault = { current: none };
    const b = ledgers.make({ instanceId: 'b', fs: faultyFs(fault), lockTimeoutMs: 300 });
    b.registerPool('p', { maxCpu: 4 });
    await expect(b.reserve('p', 'x', 1, 0)).resolves.toEqual({ ok: true });
    armed = true;
    const reservingY = a.reserve('p', 'y', 1, 0);
    for (let i = 0; i < 500 && !existsSync(lock()); i++) await new Promise((r) => setTimeout(r, 2));
    // B's request cannot be removed again: the directory turned read-only for B.
    fault.current = (call, path) =>
      call === 'unlink' && path.endsWith('.req') ? 'EROFS' : undefined;
    const error = await failure(b.reserve('p', 'z', 1, 0));
    expect(error).toMatchObject({ code: 'ERR_LEDGER_OUTCOME_UNKNOWN', pool: 'p', agentIds: ['z'] });
    // A, going on, claims B's request and writes z: a row B's caller was told to treat as not granted.
    fault.current = none;
    armed = false;
    releaseA();
    await expect(reservingY).resolves.toEqual({ ok: true });
    expect(rows()).toEqual(['x', 'y', 'z']);
    // B's next write removes it first.
    await expect(b.reserve('p', 'w', 1, 0)).resolves.toEqual({ ok: true });
    expect(rows()).toEqual(['w', 'x', 'y']);
  });

  it('an unknown reserve whose row a holder wrote is removed once the fault clears, without another call', async () => {
    let releaseA!: () => void;
    const aMayClaim = new Promise<void>((resolve) => {
      releaseA = resolve;
    });
    let armed = false;
    const a = ledgers.make({
      instanceId: 'a',
      hooks: {
        beforeClaim: async () => {
          if (armed) await aMayClaim;
        },
      },
    });
    a.registerPool('p', { maxCpu: 4 });
    const fault = { current: none };
    const b = ledgers.make({ instanceId: 'b', fs: faultyFs(fault), lockTimeoutMs: 300 });
    b.registerPool('p', { maxCpu: 4 });
    await expect(b.reserve('p', 'x', 1, 0)).resolves.toEqual({ ok: true });
    armed = true;
    const reservingY = a.reserve('p', 'y', 1, 0);
    for (let i = 0; i < 500 && !existsSync(lock()); i++) await new Promise((r) => setTimeout(r, 2));
    fault.current = (call, path) =>
      call === 'unlink' && path.endsWith('.req') ? 'EROFS' : undefined;
    const error = await failure(b.reserve('p', 'z', 1, 0));
    expect(error).toMatchObject({ code: 'ERR_LEDGER_OUTCOME_UNKNOWN', agentIds: ['z'] });
    fault.current = none;
    armed = false;
    releaseA();
    await expect(reservingY).resolves.toEqual({ ok: true });
    // B makes no more calls: its own background settle removes z (the
    // bound is generous; it takes a few hundred ms on a quiet machine).
    const started = Date.now();
    while (rows().includes('z') && Date.now() - started < 10_000)
      await new Promise((r) => setTimeout(r, 20));
    expect(rows()).toEqual(['x', 'y']);
  });

  it('an unknown release whose request is withdrawn once the fault clears is still done', async () => {
    let releaseA!: () => void;
    const aMayClaim = new Promise<void>((resolve) => {
      releaseA = resolve;
    });
    let armed = false;
    const a = ledgers.make({
      instanceId: 'a',
      hooks: {
        beforeClaim: async () => {
          if (armed) await aMayClaim;
        },
      },
    });
    a.registerPool('p', { maxCpu: 4 });
    const fault = { current: none };
    const b = ledgers.make({ instanceId: 'b', fs: faultyFs(fault), lockTimeoutMs: 300 });
    b.registerPool('p', { maxCpu: 4 });
    await expect(b.reserve('p', 'x', 1, 0)).resolves.toEqual({ ok: true });
    armed = true;
    const reservingY = a.reserve('p', 'y', 1, 0);
    for (let i = 0; i < 500 && !existsSync(lock()); i++) await new Promise((r) => setTimeout(r, 2));
    // B's release is posted behind A, and cannot be taken back (read-only for B).
    fault.current = (call, path) =>
      call === 'unlink' && path.endsWith('.req') ? 'EROFS' : undefined;
    const error = await failure(b.release('p', 'x'));
    expect(error).toMatchObject({ code: 'ERR_LEDGER_OUTCOME_UNKNOWN', agentIds: ['x'] });
    // The fault clears before A claims anything: B withdraws its request, so
    // nothing of it was applied, and it must do the release itself.
    fault.current = none;
    const combine = join(dir, '.p.combine');
    const posted = () => readdirSync(combine).filter((n) => n.endsWith('.req')).length;
    for (let i = 0; i < 500 && posted() > 0; i++) await new Promise((r) => setTimeout(r, 10));
    armed = false;
    releaseA();
    await expect(reservingY).resolves.toEqual({ ok: true });
    const started = Date.now();
    while (rows().includes('x') && Date.now() - started < 10_000)
      await new Promise((r) => setTimeout(r, 20));
    expect(rows()).toEqual(['y']);
  });

  it('a reserve a holder wrote but could not answer is granted from the pool file, not a raw ENOSPC', async () => {
    const combine = join(dir, '.p.combine');
    const posted = () =>
      existsSync(combine) ? readdirSync(combine).filter((n) => n.endsWith('.req')).length : 0;
    let armed = false;
    // A: claims B's posted call, writes it, and cannot post any answer (EROFS on the inbox).
    const aFault = { current: none };
    const a = ledgers.make({
      instanceId: 'a',
      fs: faultyFs(aFault),
      hooks: {
        beforeClaim: async () => {
          if (!armed) return;
          for (let i = 0; i < 1000 && posted() === 0; i++)
            await new Promise((r) => setTimeout(r, 2));
          aFault.current = (call, path) =>
            (call === 'open' || call === 'link') && path.endsWith('.ans') ? 'EROFS' : undefined;
        },
      },
    });
    a.registerPool('p', { maxCpu: 4 });
    // B: once A released, no inode is left for B's own lock.
    const bFault = { current: none };
    const b = ledgers.make({ instanceId: 'b', fs: faultyFs(bFault) });
    b.registerPool('p', { maxCpu: 4 });
    await expect(b.reserve('p', 'x', 1, 0)).resolves.toEqual({ ok: true });
    armed = true;
    const reservingY = a.reserve('p', 'y', 1, 0);
    for (let i = 0; i < 500 && !existsSync(lock()); i++) await new Promise((r) => setTimeout(r, 2));
    bFault.current = (call, path) => (call === 'mkdir' && path === lock() ? 'ENOSPC' : undefined);
    await expect(b.reserve('p', 'z', 1, 0)).resolves.toEqual({ ok: true });
    await expect(reservingY).resolves.toEqual({ ok: true });
    expect(rows()).toEqual(['x', 'y', 'z']);
    // B holds z now: its release removes it.
    bFault.current = none;
    await expect(b.release('p', 'z')).resolves.toBe(true);
    expect(rows()).toEqual(['x', 'y']);
  });
});
