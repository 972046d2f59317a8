/**
 * Where the ledger lives, and refusing a directory someone else could tamper with.
 */
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { LedgerDirError } from '../errors.js';
import { hasErrorCode, type LedgerFs } from './fs.js';

/** The directory shared with the kici orchestrator when nothing else is configured. */
export const DEFAULT_LEDGER_DIR = '/var/lib/kici/scaler-ledger';

/** The environment variable that names the ledger directory (the kici orchestrator's). */
export const LEDGER_DIR_ENV = 'KICI_MACHINE_LEDGER_DIR';

/** The per-user fallback used when the default directory cannot be created or written. */
export function fallbackLedgerDir(): string {
  const user = typeof process.getuid === 'function' ? String(process.getuid()) : 'user';
  return join(tmpdir(), `scaler-ledger-${user}`);
}

/**
 * Resolve and prepare the ledger directory:
 * 1. `dir` when given, else `$KICI_MACHINE_LEDGER_DIR` when set: used as is, errors surface;
 * 2. else `/var/lib/kici/scaler-ledger`, and when that cannot be created or written
 *    (not root, read-only), the per-user `<tmpdir>/scaler-ledger-<uid>`.
 *
 * The directory is created with mode 0700 and refused when it is world-writable
 * or owned by a user other than this one or root.
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
    const cause = (error as { cause?: unknown }).cause;
    const unusable = ['EACCES', 'EPERM', 'EROFS', 'ENOENT'].some((code) =>
      hasErrorCode(cause, code),
    );
    if (!unusable) throw error;
    return ensureSafeDir(fs, fallbackLedgerDir());
  }
}

/**
 * Create `dir` (mode 0700) if needed and check it is safe to use.
 *
 * @throws LedgerDirError naming the directory and the problem.
 */
export async function ensureSafeDir(fs: LedgerFs, dir: string): Promise<string> {
  try {
    await fs.promises.mkdir(dir, { recursive: true, mode: 0o700 });
  } catch (error) {
    throw new LedgerDirError(
      dir,
      `Cannot create the ledger directory ${dir}: ${(error as Error).message}. Set \`dir\` (or ${LEDGER_DIR_ENV}) to a directory this user can write.`,
      { cause: error },
    );
  }
  const stat = await fs.promises.stat(dir);
  if (!stat.isDirectory()) {
    throw new LedgerDirError(dir, `The ledger path ${dir} exists and is not a directory.`);
  }
  if ((stat.mode & 0o002) !== 0) {
    throw new LedgerDirError(
      dir,
      `Refusing the ledger directory ${dir}: it is world-writable (mode ${(stat.mode & 0o7777).toString(8)}), so any user could replace the pool files. Use a directory writable only by the orchestrators' user (chmod o-w).`,
    );
  }
  const uid = typeof process.getuid === 'function' ? process.getuid() : undefined;
  if (uid !== undefined && stat.uid !== uid && stat.uid !== 0) {
    throw new LedgerDirError(
      dir,
      `Refusing the ledger directory ${dir}: it is owned by uid ${stat.uid}, not by this user (uid ${uid}) or root, so that user could tamper with the pool files.`,
    );
  }
  try {
    await fs.promises.access(dir, fs.constants.W_OK);
  } catch (error) {
    throw new LedgerDirError(
      dir,
      `Cannot write to the ledger directory ${dir}: ${(error as Error).message}.`,
      { cause: error },
    );
  }
  return dir;
}
