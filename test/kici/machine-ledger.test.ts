import {
  chmodSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { kiciLedgerDirFromEnv, MachineLedger, resolveKiciLedgerDir } from 'scaler-primitives/kici';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { isInvalidInputError } from '../../src/errors/input.js';
import { isLedgerCapMismatchError, isLedgerCorruptError } from '../../src/errors/ledger.js';
import { isLedgerDirError } from '../../src/errors/ledger-fs.js';
import { kiciLedgerDirCandidates } from '../../src/kici/ledger-dir.js';

const CAP = { maxCpu: 4, maxMemoryBytes: 8 * 2 ** 30 };
let root: string;
let dir: string;
const open: MachineLedger[] = [];

function ledger(instanceId: string): MachineLedger {
  const l = new MachineLedger({ explicitDir: dir, instanceId, core: { fsync: false } });
  open.push(l);
  return l;
}

function fileRows(pool = 'host'): Array<{ instanceId: string; agentId: string }> {
  return JSON.parse(readFileSync(join(dir, `${pool}.json`), 'utf8')).reservations;
}

beforeEach(() => {
  root = mkdtempSync(join(tmpdir(), 'sp-kici-ledger-'));
  dir = join(root, 'ledger');
});

afterEach(async () => {
  for (const l of open.splice(0)) await l.close();
  rmSync(root, { recursive: true, force: true });
});

describe('kici directory chain', () => {
  it('lists /var/lib, then XDG_STATE_HOME or ~/.local/state, then the temp dir', () => {
    expect(kiciLedgerDirCandidates({ HOME: '/home/ci' })).toEqual([
      '/var/lib/kici/scaler-ledger',
      '/home/ci/.local/state/kici/scaler-ledger',
      join(tmpdir(), 'kici-scaler-ledger'),
    ]);
    expect(kiciLedgerDirCandidates({ HOME: '/home/ci', XDG_STATE_HOME: '/state' })[1]).toBe(
      '/state/kici/scaler-ledger',
    );
  });

  it('reads KICI_MACHINE_LEDGER_DIR as kici’s config loader does (empty = unset)', () => {
    expect(kiciLedgerDirFromEnv({ KICI_MACHINE_LEDGER_DIR: '/srv/ledger' })).toBe('/srv/ledger');
    expect(kiciLedgerDirFromEnv({ KICI_MACHINE_LEDGER_DIR: '' })).toBeUndefined();
    expect(kiciLedgerDirFromEnv({})).toBeUndefined();
  });

  it('uses an explicit directory as given', async () => {
    expect(await resolveKiciLedgerDir(dir)).toBe(dir);
    expect(await ledger('a').dir()).toBe(dir);
  });

  it('refuses a symbolic link and a world-writable directory instead of using them', async () => {
    const target = join(root, 'target');
    mkdirSync(target);
    const link = join(root, 'link');
    symlinkSync(target, link);
    const error = await resolveKiciLedgerDir(link).catch((e: unknown) => e);
    expect(isLedgerDirError(error)).toBe(true);
    expect(String(error)).toContain('symbolic link');
    chmodSync(target, 0o777);
    expect(isLedgerDirError(await resolveKiciLedgerDir(target).catch((e: unknown) => e))).toBe(
      true,
    );
  });

  it('refuses a bad explicitDir and instanceId', () => {
    expect(() => new MachineLedger({ instanceId: '' })).toThrow(TypeError);
    expect(
      () => new MachineLedger({ instanceId: 'a', explicitDir: 42 as unknown as string }),
    ).toThrow(TypeError);
  });
});

describe('MachineLedger adapter', () => {
  it('reserves against the cap and frees on release (kici’s call shapes)', async () => {
    const l = ledger('a');
    l.registerPool('host', CAP);
    expect(await l.tryReserve('host', 'x', 3, 2 ** 30)).toBe(true);
    expect(await l.tryReserve('host', 'y', 2, 2 ** 30)).toBe(false);
    expect(await l.getUsage('host')).toEqual({ cpus: 3, memBytes: 2 ** 30 });
    expect(await l.release('host', 'x')).toBeUndefined();
    expect(await l.getUsage('host')).toEqual({ cpus: 0, memBytes: 0 });
    expect(await l.tryReserve('host', 'y', 2, 2 ** 30)).toBe(true);
  });

  it('writes kici’s wire format', async () => {
    const l = ledger('a');
    l.registerPool('host', CAP);
    await l.tryReserve('host', 'x', 1.5, 1024);
    const doc = JSON.parse(readFileSync(join(dir, 'host.json'), 'utf8'));
    expect(doc.version).toBe(1);
    expect(doc.cap).toEqual(CAP);
    expect(doc.reservations[0]).toMatchObject({
      instanceId: 'a',
      pid: process.pid,
      agentId: 'x',
      cpus: 1.5,
      memBytes: 1024,
    });
    expect(typeof doc.reservations[0].bootId).toBe('string');
    expect(typeof doc.reservations[0].reservedAt).toBe('number');
  });

  it('release removes only this instance’s row', async () => {
    const a = ledger('a');
    const b = ledger('b');
    a.registerPool('host', CAP);
    b.registerPool('host', CAP);
    expect(await a.tryReserve('host', 'agent-1', 1, 1)).toBe(true);
    await b.release('host', 'agent-1');
    expect(fileRows().map((r) => r.instanceId)).toEqual(['a']);
    await a.release('host', 'agent-1');
    expect(fileRows()).toEqual([]);
  });

  it('releaseAllForInstance leaves other instances’ rows and never throws', async () => {
    const a = ledger('a');
    const b = ledger('b');
    a.registerPool('host', CAP);
    b.registerPool('host', CAP);
    await a.tryReserve('host', 'a-1', 1, 1);
    await b.tryReserve('host', 'b-1', 1, 1);
    await a.releaseAllForInstance();
    expect(fileRows().map((r) => r.agentId)).toEqual(['b-1']);
    // An unusable directory: still no throw.
    const broken = new MachineLedger({ instanceId: 'c', explicitDir: join(root, 'file') });
    writeFileSync(join(root, 'file'), 'not a dir');
    broken.registerPool('host', CAP);
    await expect(broken.releaseAllForInstance()).resolves.toBeUndefined();
  });

  it('throws for a pool that was not registered, as kici does', async () => {
    const l = ledger('a');
    await expect(l.tryReserve('nope', 'x', 1, 1)).rejects.toThrow(/not registered/);
    await expect(l.release('nope', 'x')).rejects.toThrow(/not registered/);
    await expect(l.reapStale('nope')).rejects.toThrow(/not registered/);
    await expect(l.getUsage('nope')).rejects.toThrow(/not registered/);
  });

  it('refuses a pool name that is not a safe file name', () => {
    const l = ledger('a');
    const error = (() => {
      try {
        l.registerPool('../etc/passwd', CAP);
      } catch (e) {
        return e;
      }
    })();
    expect(isInvalidInputError(error)).toBe(true);
  });

  it('never resets a corrupt file (kici would throw too, but we name it and keep it)', async () => {
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    writeFileSync(join(dir, 'host.json'), '{ not json');
    const l = ledger('a');
    l.registerPool('host', CAP);
    const error = await l.tryReserve('host', 'x', 1, 1).catch((e: unknown) => e);
    expect(isLedgerCorruptError(error)).toBe(true);
    expect(readFileSync(join(dir, 'host.json'), 'utf8')).toBe('{ not json');
  });

  it('refuses a file whose cap differs from the registered one', async () => {
    const a = ledger('a');
    a.registerPool('host', CAP);
    await a.tryReserve('host', 'x', 1, 1);
    const b = ledger('b');
    b.registerPool('host', { maxCpu: 8 });
    expect(isLedgerCapMismatchError(await b.tryReserve('host', 'y', 1, 1).catch((e) => e))).toBe(
      true,
    );
  });

  it('validates amounts kici would write as they are', async () => {
    const l = ledger('a');
    l.registerPool('host', CAP);
    await expect(l.tryReserve('host', 'x', -1, 1)).rejects.toThrow(TypeError);
    await expect(l.tryReserve('host', 'x', 1, Number.NaN)).rejects.toThrow(TypeError);
  });

  it('registers pools made before and after the directory is resolved', async () => {
    const l = ledger('a');
    l.registerPool('one', CAP);
    expect(await l.tryReserve('one', 'x', 1, 1)).toBe(true);
    l.registerPool('two', { maxCpu: 1 });
    expect(await l.tryReserve('two', 'x', 1, 1)).toBe(true);
    expect(await l.tryReserve('two', 'y', 1, 1)).toBe(false);
    const core = await l.ledger();
    expect((await core.list('two')).map((r) => r.agentId)).toEqual(['x']);
  });

  it('start is idempotent, validates its interval, and stop stops it', async () => {
    const l = ledger('a');
    l.registerPool('host', CAP);
    expect(() => l.start(0)).toThrow(TypeError);
    l.start(50);
    l.start(50);
    await l.dir();
    l.stop();
    l.start();
    l.stop();
  });

  it('reapStale removes rows of a dead process of this instance', async () => {
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    const l = ledger('a');
    l.registerPool('host', CAP);
    await l.tryReserve('host', 'live', 1, 1);
    const doc = JSON.parse(readFileSync(join(dir, 'host.json'), 'utf8'));
    doc.reservations.push({ ...doc.reservations[0], agentId: 'dead', pid: 2 ** 22 + 1 });
    writeFileSync(join(dir, 'host.json'), JSON.stringify(doc));
    await l.reapStale('host');
    expect(fileRows().map((r) => r.agentId)).toEqual(['live']);
  });
});
