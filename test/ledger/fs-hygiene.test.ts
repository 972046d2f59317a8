/**
 * The file ledger under a hostile neighbour, with real files: unsafe directories,
 * links, FIFOs, devices, directories and oversized files where pool, lease and
 * temp files belong. Every refusal is a typed error that names the path and
 * never the contents; nothing is written through a link; reads create nothing.
 */
import { execFileSync } from 'node:child_process';
import * as nodeFs from 'node:fs';
import {
  chmodSync,
  chownSync,
  existsSync,
  lstatSync,
  lutimesSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  symlinkSync,
  truncateSync,
  utimesSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { isInvalidInputError } from '../../src/errors/input.js';
import { isLedgerCorruptError } from '../../src/errors/ledger.js';
import {
  isLedgerDirError,
  isLedgerFileError,
  type LedgerFileError,
} from '../../src/errors/ledger-fs.js';
import type { MachineLedgerOptions } from '../../src/ledger/file/machine-ledger.js';
import { MachineLedger } from '../../src/ledger/file/machine-ledger.js';
import { createExclusive, readLedgerFile } from '../../src/ledger/file/safe-fs.js';
import type { LedgerFs } from '../../src/ledger/fs.js';
import { ledgerFactory } from '../helpers/machine-ledger.js';
import { hasSystem } from '../helpers/system.js';

const SECRET = 'TOPSECRET-4f2a shadow line';
const NOBODY = 65_534;
const root = hasSystem(['root'], 'ledger fs-hygiene tests that chown or mknod');

let base: string;
let dir: string;
let secret: string;
const ledgers = ledgerFactory(() => dir);
const make = ledgers.make;

beforeEach(() => {
  base = mkdtempSync(join(tmpdir(), 'ledger-hyg-'));
  dir = join(base, 'ledger');
  mkdirSync(dir, { mode: 0o700 });
  secret = join(base, 'secret.txt');
  writeFileSync(secret, `${SECRET}\n`, { mode: 0o600 });
});

afterEach(async () => {
  await ledgers.closeAll({ ignoreErrors: true });
  rmSync(base, { recursive: true, force: true });
});

const poolFile = (pool = 'p') => join(dir, `${pool}.json`);

async function failure(promise: Promise<unknown>): Promise<Error> {
  const result = await promise.then(
    () => undefined,
    (error: unknown) => error as Error,
  );
  if (result === undefined) throw new Error('expected a rejection');
  return result;
}

function expectFileError(error: unknown, path: string, problem: string, kind?: RegExp): void {
  expect(isLedgerFileError(error)).toBe(true);
  const e = error as LedgerFileError;
  expect(e.code).toBe('ERR_LEDGER_FILE_UNSAFE');
  expect(e.problem).toBe(problem);
  expect(e.path).toBe(path);
  expect(e.message).toContain(path);
  if (kind) expect(e.message).toMatch(kind);
  expect(e.message).not.toContain(SECRET);
  expect(String(e.cause ?? '')).not.toContain(SECRET);
}

describe('ledger directory', () => {
  it.each([
    [0o770, /group-writable \(mode 0770\)/],
    [0o707, /world-writable \(mode 0707\)/],
    [0o1777, /group- and world-writable \(mode 1777\).*sticky bit does not prevent/],
    [0o1730, /group-writable \(mode 1730\)/],
  ])('a directory with mode %o is refused, naming path, mode and fix', async (mode, pattern) => {
    chmodSync(dir, mode);
    const ledger = make();
    ledger.registerPool('p', {});
    const error = await failure(ledger.reserve('p', 'a', 1, 1));
    expect(isLedgerDirError(error)).toBe(true);
    expect(error.message).toContain(dir);
    expect(error.message).toMatch(pattern);
    expect(error.message).toContain(`chmod go-w ${dir}`);
    // Reads refuse it too, and nothing was written into it.
    expect(isLedgerDirError(await failure(ledger.inspect('p')))).toBe(true);
    expect(isLedgerDirError(await failure(ledger.pools()))).toBe(true);
    expect(readdirSync(dir)).toEqual([]);
  });

  it('0700 and 0755 directories are accepted', async () => {
    for (const mode of [0o700, 0o755]) {
      chmodSync(dir, mode);
      const ledger = make();
      ledger.registerPool('p', {});
      expect(await ledger.reserve('p', `a${mode}`, 1, 1)).toEqual({ ok: true });
    }
  });

  it('a symbolic link as the directory is refused', async () => {
    const link = join(base, 'link');
    symlinkSync(dir, link);
    const ledger = make({ dir: link });
    ledger.registerPool('p', {});
    const error = await failure(ledger.reserve('p', 'a', 1, 1));
    expect(isLedgerDirError(error)).toBe(true);
    expect(error.message).toMatch(/symbolic link/);
    expect(readdirSync(dir)).toEqual([]);
  });

  it('a regular file as the directory is refused, saying what it is', async () => {
    const notDir = join(base, 'file');
    writeFileSync(notDir, 'x');
    const error = await failure(make({ dir: notDir }).dir());
    expect(isLedgerDirError(error)).toBe(true);
    expect(error.message).toMatch(/is a regular file, not a directory/);
  });

  it('a parent writable by others without the sticky bit is refused; with it (like /tmp), accepted', async () => {
    const parent = join(base, 'shared');
    mkdirSync(parent);
    chmodSync(parent, 0o777);
    const ledger = make({ dir: join(parent, 'ledger') });
    const error = await failure(ledger.dir());
    expect(isLedgerDirError(error)).toBe(true);
    expect(error.message).toContain(parent);
    expect(error.message).toMatch(
      /above the ledger directory.*without the sticky bit \(mode 0777\)/,
    );
    chmodSync(parent, 0o1777);
    expect(await make({ dir: join(parent, 'ledger') }).dir()).toBe(join(parent, 'ledger'));
  });

  it('creates missing directories with mode 0700, each of them', async () => {
    const nested = join(base, 'a', 'b', 'c');
    const ledger = make({ dir: nested });
    ledger.registerPool('p', {});
    expect(await ledger.reserve('p', 'a', 1, 1)).toEqual({ ok: true });
    for (const path of [join(base, 'a'), join(base, 'a', 'b'), nested]) {
      expect(statSync(path).mode & 0o7777).toBe(0o700);
    }
  });

  describe.runIf(root)('as root', () => {
    it('a directory owned by another user is refused, naming the uid and chown', async () => {
      chownSync(dir, NOBODY, NOBODY);
      const ledger = make();
      ledger.registerPool('p', {});
      const error = await failure(ledger.reserve('p', 'a', 1, 1));
      expect(isLedgerDirError(error)).toBe(true);
      expect(error.message).toContain(dir);
      expect(error.message).toMatch(new RegExp(`owned by uid ${NOBODY}.*chown 0 `));
      expect(readdirSync(dir)).toEqual([]);
    });

    it('a parent owned by another user is refused', async () => {
      chownSync(base, NOBODY, NOBODY);
      const error = await failure(make().dir());
      expect(isLedgerDirError(error)).toBe(true);
      expect(error.message).toContain(`${base}, a directory above the ledger directory`);
    });
  });
});

describe('pool file', () => {
  it('a symbolic link to a secret is refused without reading or writing through it', async () => {
    symlinkSync(secret, poolFile());
    const ledger = make();
    ledger.registerPool('p', {});
    expectFileError(await failure(ledger.inspect('p')), poolFile(), 'symlink', /symbolic link/);
    expectFileError(await failure(ledger.reserve('p', 'a', 1, 1)), poolFile(), 'symlink');
    expectFileError(await failure(ledger.release('p', 'a')), poolFile(), 'symlink');
    expect(readFileSync(secret, 'utf8')).toBe(`${SECRET}\n`);
    expect(lstatSync(poolFile()).isSymbolicLink()).toBe(true);
  });

  it('a link to /dev/zero is refused as a link (never opened)', async () => {
    symlinkSync('/dev/zero', poolFile());
    const ledger = make();
    expectFileError(await failure(ledger.inspect('p')), poolFile(), 'symlink');
  });

  it('a FIFO is refused at once, without blocking on it', async () => {
    execFileSync('mkfifo', [poolFile()]);
    const ledger = make();
    ledger.registerPool('p', {});
    expectFileError(await failure(ledger.inspect('p')), poolFile(), 'not-regular', /FIFO/);
    expectFileError(await failure(ledger.reserve('p', 'a', 1, 1)), poolFile(), 'not-regular');
  });

  it('a directory is refused with a typed error, not EISDIR', async () => {
    mkdirSync(poolFile());
    const ledger = make();
    ledger.registerPool('p', {});
    expectFileError(await failure(ledger.inspect('p')), poolFile(), 'not-regular', /a directory/);
    expectFileError(await failure(ledger.reserve('p', 'a', 1, 1)), poolFile(), 'not-regular');
  });

  it('a file writable by group or others is refused', async () => {
    writeFileSync(poolFile(), JSON.stringify({ version: 1, cap: {}, reservations: [] }));
    chmodSync(poolFile(), 0o664);
    const error = await failure(make().inspect('p'));
    expectFileError(error, poolFile(), 'mode', /mode 0664.*chmod go-w/);
  });

  it('a 100 MB sparse file is refused from its size, before a byte is read', async () => {
    writeFileSync(poolFile(), '');
    truncateSync(poolFile(), 100 * 2 ** 20);
    let bytesRead = 0;
    const counting: LedgerFs = {
      ...nodeFs,
      readSync: ((...args: Parameters<typeof nodeFs.readSync>) => {
        const n = nodeFs.readSync(...args);
        bytesRead += n;
        return n;
      }) as typeof nodeFs.readSync,
    };
    const ledger = make({ fs: counting });
    ledger.registerPool('p', {});
    const error = await failure(ledger.inspect('p'));
    expectFileError(
      error,
      poolFile(),
      'too-large',
      /104857600 bytes, more than the limit of 4194304/,
    );
    expectFileError(await failure(ledger.reserve('p', 'a', 1, 1)), poolFile(), 'too-large');
    expect(bytesRead).toBe(0);
    expect(statSync(poolFile()).size).toBe(100 * 2 ** 20);
  });

  it('maxFileBytes bounds reads, and a write that would pass it is refused with the file untouched', async () => {
    // One row fits in 500 bytes, two do not.
    const ledger = make({ maxFileBytes: 500 });
    ledger.registerPool('p', {});
    expect(await ledger.reserve('p', 'a', 1, 1)).toEqual({ ok: true });
    const before = readFileSync(poolFile(), 'utf8');
    expect(before.length).toBeLessThan(500);
    expect(before.length).toBeGreaterThan(250);
    const error = await failure(ledger.reserve('p', 'b', 1, 1));
    expectFileError(error, poolFile(), 'too-large', /Refusing to write/);
    expect(readFileSync(poolFile(), 'utf8')).toBe(before);
    expect(
      await make({ maxFileBytes: 100 })
        .inspect('p')
        .catch((e) => e.problem),
    ).toBe('too-large');
  });

  it('corrupt text is never quoted in the error (nor in its cause)', async () => {
    const ledger = make();
    for (const text of [
      SECRET,
      `{"version": "${SECRET}", "cap": {}, "reservations": []}`,
      `{"version": 1, "cap": {}, "reservations": [${SECRET}]}`,
    ]) {
      writeFileSync(poolFile(), text);
      const error = await failure(ledger.inspect('p'));
      expect(isLedgerCorruptError(error)).toBe(true);
      expect(error.message).toContain(poolFile());
      expect(error.message).not.toContain('TOPSECRET');
      expect(String((error as { cause?: unknown }).cause ?? '')).not.toContain('TOPSECRET');
    }
  });

  describe.runIf(root)('as root', () => {
    it('a character device is refused before a byte is read', async () => {
      execFileSync('mknod', [poolFile(), 'c', '1', '5']); // /dev/zero's numbers
      const ledger = make();
      ledger.registerPool('p', {});
      expectFileError(
        await failure(ledger.inspect('p')),
        poolFile(),
        'not-regular',
        /character device/,
      );
      expectFileError(await failure(ledger.reserve('p', 'a', 1, 1)), poolFile(), 'not-regular');
    });

    it('a file owned by another user is refused', async () => {
      writeFileSync(poolFile(), JSON.stringify({ version: 1, cap: {}, reservations: [] }));
      chownSync(poolFile(), NOBODY, NOBODY);
      expectFileError(await failure(make().inspect('p')), poolFile(), 'owner', /uid 65534/);
    });
  });
});

describe('lease and temp files', () => {
  it('a lease file replaced by a link is refused on refresh; the target is not touched', async () => {
    let clock = 0;
    const ledger = make({ hooks: { monotonic: () => clock } });
    ledger.registerPool('p', {});
    expect(await ledger.reserve('p', 'a', 1, 1)).toEqual({ ok: true });
    const lease = join(dir, `${ledger.leaseId}.lease`);
    rmSync(lease);
    symlinkSync(secret, lease);
    const old = new Date(1_000_000);
    utimesSync(secret, old, old);
    clock = 10 * 60_000; // a stall: the next call refreshes the lease first
    expectFileError(await failure(ledger.reserve('p', 'b', 1, 1)), lease, 'symlink');
    expect(statSync(secret).mtimeMs).toBe(old.getTime());
    expect(readFileSync(secret, 'utf8')).toBe(`${SECRET}\n`);
  });

  it("a peer's lease that is a link counts as unknown, never as its target's age", async () => {
    const peerLease = 'peer-lease';
    symlinkSync(secret, join(dir, `${peerLease}.lease`));
    writeFileSync(
      poolFile(),
      JSON.stringify({
        version: 1,
        cap: {},
        reservations: [
          {
            instanceId: 'peer',
            pid: 999_999,
            bootId: 'boot-1',
            agentId: 'peer-agent',
            cpus: 1,
            memBytes: 1,
            reservedAt: 0,
            leaseId: peerLease,
          },
        ],
      }),
    );
    // The secret is fresh; followed, the lease would look fresh. Make it old, so following
    // it would reap the row: an unknown lease keeps it.
    utimesSync(secret, new Date(0), new Date(0));
    const snapshot = await make({ now: () => 10 ** 12 }).inspect('p');
    expect(snapshot.live.map((r) => r.agentId)).toEqual(['peer-agent']);
  });

  it('the leftover sweep removes an old link named like a temp file, never its target', async () => {
    const ledger = make({ staleMs: 2_000 });
    ledger.registerPool('p', {});
    expect(await ledger.reserve('p', 'a', 1, 1)).toEqual({ ok: true });
    const link = join(dir, '.p.json.1.deadbeef.tmp');
    symlinkSync(secret, link);
    const old = new Date(Date.now() - 60_000);
    lutimesSync(link, old, old);
    await ledger.reapStale('p');
    expect(existsSync(link)).toBe(false);
    expect(readFileSync(secret, 'utf8')).toBe(`${SECRET}\n`);
  });

  it('createExclusive never opens through a link or over an existing file', () => {
    const link = join(dir, 'temp');
    symlinkSync(secret, link);
    expect(() => createExclusive(nodeFs, link, 0o600)).toThrow(/EEXIST/);
    expect(readFileSync(secret, 'utf8')).toBe(`${SECRET}\n`);
  });

  it('readLedgerFile reads a regular file, and never more than the checked fstat size', () => {
    const path = join(dir, 'x.json');
    writeFileSync(path, 'a'.repeat(100));
    expect(readLedgerFile(nodeFs, path, { pool: 'x', maxBytes: 100 })).toBe('a'.repeat(100));
    expectFileError(
      (() => {
        try {
          readLedgerFile(nodeFs, path, { pool: 'x', maxBytes: 99 });
        } catch (e) {
          return e;
        }
      })(),
      path,
      'too-large',
    );
    // A file that grows after fstat (simulated by an fstat reporting less) is read only
    // up to the size that was checked.
    const lying: LedgerFs = {
      ...nodeFs,
      fstatSync: ((fd: number) => {
        const stat = nodeFs.fstatSync(fd);
        return Object.assign(Object.create(Object.getPrototypeOf(stat)), stat, { size: 10 });
      }) as typeof nodeFs.fstatSync,
    };
    expect(readLedgerFile(lying, path, { pool: 'x', maxBytes: 50 })).toBe('a'.repeat(10));
  });
});

describe('reads create nothing', () => {
  it('inspect, getUsage, list and pools on a missing directory create nothing', async () => {
    const missing = join(base, 'typo', 'ledger');
    const ledger = make({ dir: missing });
    ledger.registerPool('p', { maxCpu: 2 });
    expect(await ledger.existingDir()).toBeUndefined();
    const snapshot = await ledger.inspect('p');
    expect(snapshot).toMatchObject({ pool: 'p', exists: false, cap: { maxCpu: 2 }, live: [] });
    expect(snapshot.file).toBe(join(missing, 'p.json'));
    expect(await ledger.getUsage('p')).toEqual({ cpus: 0, memBytes: 0 });
    expect(await ledger.list('p')).toEqual([]);
    expect(await ledger.pools()).toEqual([]);
    await ledger.close();
    expect(existsSync(join(base, 'typo'))).toBe(false);
  });

  it('reads of an existing directory write no file (no lease, no pool file)', async () => {
    const ledger = make();
    ledger.registerPool('p', {});
    expect((await ledger.inspect('p')).exists).toBe(false);
    await ledger.pools();
    await ledger.getUsage('p');
    await ledger.close();
    expect(readdirSync(dir)).toEqual([]);
  });
});

describe('names and options at the edge', () => {
  it('pool names starting with a dot are refused everywhere', async () => {
    const ledger = make();
    for (const name of ['.hidden', '.p.queue', '...']) {
      expect(() => ledger.registerPool(name, {})).toThrow(/not starting with '\.'/);
      expect(isInvalidInputError(await failure(ledger.reserve(name, 'a', 1, 1)))).toBe(true);
      expect(isInvalidInputError(await failure(ledger.inspect(name)))).toBe(true);
    }
  });

  it('ids longer than 256 characters are refused; 256 are accepted', async () => {
    const ledger = make();
    ledger.registerPool('p', {});
    expect(await ledger.reserve('p', 'a'.repeat(256), 1, 1)).toEqual({ ok: true });
    const error = await failure(ledger.reserve('p', 'a'.repeat(257), 1, 1));
    expect(isInvalidInputError(error)).toBe(true);
    expect(error.message).toMatch(/`agentId` to be at most 256 characters, got 257/);
    expect(isInvalidInputError(await failure(ledger.release('p', 'x'.repeat(4000))))).toBe(true);
    expect(() => make({ instanceId: 'i'.repeat(257) })).toThrow(/`instanceId` to be at most 256/);
    expect(
      isInvalidInputError(await failure(ledger.release('p', 'a', { instanceId: 'i'.repeat(257) }))),
    ).toBe(true);
  });

  it('an unknown option key is refused, naming it, the nearest and the accepted ones', () => {
    let error: unknown;
    try {
      make({ stalems: 5_000 } as Partial<MachineLedgerOptions>);
    } catch (e) {
      error = e;
    }
    expect(isInvalidInputError(error)).toBe(true);
    const message = (error as Error).message;
    expect(message).toContain('Unknown key "stalems" in MachineLedger options');
    expect(message).toContain('Did you mean `staleMs`?');
    expect(message).toContain('Accepted keys: instanceId, dir, explicitDir, staleMs');
    expect(() => make({ zzzzzzzz: 1 } as Partial<MachineLedgerOptions>)).toThrow(
      /Unknown key "zzzzzzzz".*Accepted keys/,
    );
    expect(() => make({ maxFileBytes: 0 })).toThrow(/`maxFileBytes` to be a finite number > 0/);
  });

  it('test hooks are not an option: a `hooks` key is refused like any unknown key', () => {
    // The hooks reach a ledger only under a symbol no subpath exports; a string
    // key must not be able to shorten the lock's stale window or stall a holder.
    expect(
      () => new MachineLedger({ instanceId: 'me', dir, hooks: { lockStaleMs: 1 } } as never),
    ).toThrow(/Unknown key "hooks" in MachineLedger options/);
    expect(() => make({ hooks: { lockStaleMs: 1, beforeComit: () => {} } as never })).toThrow(
      /Unknown key "beforeComit" in MachineLedger hooks/,
    );
  });

  it('release refuses an unknown option key', async () => {
    const ledger = make();
    const error = await failure(
      ledger.release('p', 'a', { instanceID: 'x' } as unknown as { instanceId: string }),
    );
    expect(isInvalidInputError(error)).toBe(true);
    expect(error.message).toMatch(
      /Unknown key "instanceID" in release options\. Did you mean `instanceId`\?/,
    );
  });
});
