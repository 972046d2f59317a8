/**
 * Where the ledger lives, and refusing a directory someone else could tamper with.
 *
 * The rule (docs/security.md, "Filesystem"): only this user (or root) may be able
 * to change what the ledger directory holds, or to swap the directory itself.
 * - The directory is not a symbolic link, is owned by this user or by root, and is
 *   writable by neither its group nor others (a sticky bit does not help: others
 *   could still create a pool file or a link under a name not yet used).
 * - Every directory above it (after resolving links) is owned by this user or by
 *   root, and is writable by group or others only with the sticky bit (`/tmp`),
 *   which stops them from renaming our entry away.
 * - Directories the library creates get mode 0700.
 */
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { LedgerDirError } from '../../errors/index.js';
import { effectiveUid } from '../../internal/uid.js';
import { hasErrorCode, type LedgerFs, type LedgerStats as Stats } from '../fs.js';
import { ledgerIoError, systemErrorCode } from './io-error.js';
import { describeKind } from './safe-fs.js';

/**
 * The ledger directory when nothing else is configured: the library's own state
 * directory under `/var/lib` (FHS: `/var/lib/<package>`). Every process on the host
 * that leaves the directory unset shares it. (kici's `/var/lib/kici/scaler-ledger`
 * is what `scaler-primitives/kici` uses.)
 */
export const DEFAULT_LEDGER_DIR = '/var/lib/scaler-primitives/ledger';

/**
 * The environment variable that names the ledger directory, read when no `dir`
 * is given. (kici's `KICI_MACHINE_LEDGER_DIR` is read by `scaler-primitives/kici`.)
 */
export const LEDGER_DIR_ENV = 'SCALER_PRIMITIVES_LEDGER_DIR';

/**
 * The per-user fallback used when the default directory cannot be created or written.
 */
export function fallbackLedgerDir(): string {
  const user = typeof process.getuid === 'function' ? String(process.getuid()) : 'user';
  return join(tmpdir(), `scaler-ledger-${user}`);
}

/** Unusable-directory causes after which the default directory falls back to the per-user one. */
const UNUSABLE = ['EACCES', 'EPERM', 'EROFS', 'ENOENT'];

function unusable(error: unknown): boolean {
  const cause = (error as { cause?: unknown }).cause;
  return UNUSABLE.some((code) => hasErrorCode(cause, code));
}

/**
 * Resolve and prepare the ledger directory, for writing:
 * 1. `dir` when given, else `$SCALER_PRIMITIVES_LEDGER_DIR` when set: used as is, errors surface;
 * 2. else `/var/lib/scaler-primitives/ledger`, and when that cannot be created or written
 *    (not root, read-only), the per-user `<tmpdir>/scaler-ledger-<uid>`.
 *
 * Missing directories are created with mode 0700; the result is checked as
 * described in this module (see `checkLedgerDir`).
 *
 * @throws LedgerDirError when the directory is unsafe or unusable.
 */
export async function resolveLedgerDir(
  fs: LedgerFs,
  dir: string | undefined,
  env: NodeJS.ProcessEnv = process.env,
): Promise<string> {
  const configured = dir ?? (env[LEDGER_DIR_ENV] || undefined);
  if (configured !== undefined) return ensureSafeDir(fs, configured);
  try {
    return await ensureSafeDir(fs, DEFAULT_LEDGER_DIR);
  } catch (error) {
    if (!unusable(error)) throw error;
    return ensureSafeDir(fs, fallbackLedgerDir());
  }
}

/**
 * Find the ledger directory {@link resolveLedgerDir} would use, for reading: the
 * same choice, but nothing is created. `undefined` when the directory does not
 * exist (so there is nothing to read).
 *
 * @throws LedgerDirError when the directory exists and is unsafe.
 */
export async function findLedgerDir(
  fs: LedgerFs,
  dir: string | undefined,
  env: NodeJS.ProcessEnv = process.env,
): Promise<string | undefined> {
  const configured = dir ?? (env[LEDGER_DIR_ENV] || undefined);
  if (configured !== undefined) return existingSafeDir(fs, configured);
  try {
    const found = await existingSafeDir(fs, DEFAULT_LEDGER_DIR);
    // resolveLedgerDir falls back when the default is not writable: so does the reader.
    if (found !== undefined) {
      await checkWritable(fs, found);
      return found;
    }
  } catch (error) {
    if (!unusable(error)) throw error;
  }
  return existingSafeDir(fs, fallbackLedgerDir());
}

/**
 * Create `dir` (mode 0700, and its missing parents) if needed and check it is
 * safe to use and writable.
 *
 * @throws LedgerDirError naming the directory, its mode or owner, and the fix.
 */
export async function ensureSafeDir(fs: LedgerFs, dir: string): Promise<string> {
  try {
    await fs.promises.mkdir(dir, { recursive: true, mode: 0o700 });
  } catch (error) {
    // Something that is not a directory is in the way: the check below says what.
    if (hasErrorCode(error, 'EEXIST') || hasErrorCode(error, 'ENOTDIR')) {
      await checkLedgerDir(fs, dir);
    }
    // A storage fault, not an unsafe directory: say which.
    if (STORAGE_FAULTS.includes(systemErrorCode(error) ?? '')) {
      throw ledgerIoError(error, { pool: '', path: dir, mayHaveWritten: false });
    }
    throw new LedgerDirError(
      dir,
      `Cannot create the ledger directory ${dir}: ${(error as Error).message}. Set \`dir\` (or ${LEDGER_DIR_ENV}) to a directory this user can write.`,
      { cause: error },
    );
  }
  await checkLedgerDir(fs, dir);
  await checkWritable(fs, dir);
  return dir;
}

async function existingSafeDir(fs: LedgerFs, dir: string): Promise<string | undefined> {
  try {
    await fs.promises.lstat(dir);
  } catch (error) {
    if (hasErrorCode(error, 'ENOENT') || hasErrorCode(error, 'ENOTDIR')) return undefined;
    throw new LedgerDirError(
      dir,
      `Cannot read the ledger directory ${dir}: ${(error as Error).message}.`,
      { cause: error },
    );
  }
  await checkLedgerDir(fs, dir);
  return dir;
}

// Errors that say the storage failed (a LedgerIoError), not that the directory is unsafe.
const STORAGE_FAULTS = ['EROFS', 'ENOSPC', 'EDQUOT', 'EIO'];

async function checkWritable(fs: LedgerFs, dir: string): Promise<void> {
  try {
    await fs.promises.access(dir, fs.constants.W_OK);
  } catch (error) {
    // Read-only is read-only, not unsafe.
    if (STORAGE_FAULTS.includes(systemErrorCode(error) ?? '')) {
      throw ledgerIoError(error, { pool: '', path: dir, mayHaveWritten: false });
    }
    throw new LedgerDirError(
      dir,
      `Cannot write to the ledger directory ${dir}: ${(error as Error).message}.`,
      { cause: error },
    );
  }
}

/**
 * Check an existing ledger directory and the directories above it (see this
 * module's rule). Nothing is created or changed.
 *
 * @throws LedgerDirError naming the offending directory, its mode or owner, and the fix.
 */
export async function checkLedgerDir(fs: LedgerFs, dir: string): Promise<void> {
  const uid = effectiveUid();
  const absolute = resolve(dir);
  const stat = await lstatOrThrow(fs, dir, dir);
  if (stat.isSymbolicLink()) {
    throw new LedgerDirError(
      dir,
      `Refusing the ledger directory ${dir}: it is a symbolic link, which whoever can write its parent could repoint. Configure the directory's real path instead.`,
    );
  }
  if (!stat.isDirectory()) {
    throw new LedgerDirError(
      dir,
      `The ledger path ${dir} exists and is ${describeKind(stat)}, not a directory.`,
    );
  }
  checkDirStat(dir, dir, stat, uid, false);
  // The parents, after resolving links (a link's target is what the kernel walks).
  let parent: string;
  try {
    parent = await fs.promises.realpath(dirname(absolute));
  } catch (error) {
    throw new LedgerDirError(
      dir,
      `Cannot resolve the parent of the ledger directory ${dir}: ${(error as Error).message}.`,
      { cause: error },
    );
  }
  for (let current = parent; ; current = dirname(current)) {
    checkDirStat(dir, current, await lstatOrThrow(fs, dir, current), uid, true);
    if (dirname(current) === current) break;
  }
}

async function lstatOrThrow(fs: LedgerFs, dir: string, path: string): Promise<Stats> {
  try {
    return await fs.promises.lstat(path);
  } catch (error) {
    const what = path === dir ? 'the ledger directory' : `${path}, above the ledger directory`;
    throw new LedgerDirError(dir, `Cannot inspect ${what} ${dir}: ${(error as Error).message}.`, {
      cause: error,
    });
  }
}

function checkDirStat(
  dir: string,
  path: string,
  stat: Stats,
  uid: number | undefined,
  parent: boolean,
): void {
  const mode = (stat.mode & 0o7777).toString(8).padStart(4, '0');
  const what = parent
    ? `${path}, a directory above the ledger directory ${dir},`
    : `the ledger directory ${dir}`;
  if (uid !== undefined && stat.uid !== uid && stat.uid !== 0) {
    throw new LedgerDirError(
      dir,
      `Refusing ${what}: it is owned by uid ${stat.uid}, not by this user (uid ${uid}) or root, so that user could replace the pool files. Use a directory owned by the orchestrators' user (\`chown ${uid} ${path}\`) or by root.`,
    );
  }
  const othersWrite = (stat.mode & 0o022) !== 0;
  const sticky = (stat.mode & 0o1000) !== 0;
  if (othersWrite && !(parent && sticky)) {
    throw new LedgerDirError(
      dir,
      parent
        ? `Refusing ${what}: it is ${writers(stat.mode)} without the sticky bit (mode ${mode}), so another user could rename the ledger directory away and put their own in its place. Use \`chmod go-w ${path}\` (or \`chmod +t\`), or choose another directory.`
        : `Refusing ${what}: it is ${writers(stat.mode)} (mode ${mode}), so another user could plant or replace pool files (the sticky bit does not prevent that). Use \`chmod go-w ${path}\` (0700 or 0755).`,
    );
  }
}

function writers(mode: number): string {
  const group = (mode & 0o020) !== 0;
  const world = (mode & 0o002) !== 0;
  return group && world ? 'group- and world-writable' : world ? 'world-writable' : 'group-writable';
}
