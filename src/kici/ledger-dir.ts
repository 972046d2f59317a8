/**
 * The kici orchestrator's ledger directory chain, resolved with this library's
 * safety checks.
 */
import * as nodeFs from 'node:fs';
import { homedir, tmpdir } from 'node:os';
import { join } from 'node:path';
import { LedgerDirError } from '../errors/index.js';
import { resolveLedgerDir } from '../ledger/file/dir.js';

/**
 * kici's default ledger directory (the core's default is `/var/lib/scaler-primitives/ledger`).
 */
export const KICI_LEDGER_DIR = '/var/lib/kici/scaler-ledger';

/**
 * The environment variable kici's config loader reads the ledger directory from.
 */
export const KICI_LEDGER_DIR_ENV = 'KICI_MACHINE_LEDGER_DIR';

/**
 * Where to look up `$XDG_STATE_HOME` and `$HOME` (kici reads `process.env` and `os.homedir()`).
 */
export type KiciEnv = Readonly<Record<string, string | undefined>>;

/**
 * The directories kici 0.9.1 tries, in order, when no directory is configured:
 * `/var/lib/kici/scaler-ledger`, then `${XDG_STATE_HOME:-$HOME/.local/state}/kici/scaler-ledger`,
 * then `<os.tmpdir()>/kici-scaler-ledger`. Like kici, an `XDG_STATE_HOME` that is set
 * (even to an empty string) replaces `$HOME/.local/state`.
 *
 * @param env - The environment. @default `process.env`
 * @returns The three candidate directories, in the order they are tried.
 */
export function kiciLedgerDirCandidates(env: KiciEnv = process.env): string[] {
  const home = env.HOME || homedir();
  const state = env.XDG_STATE_HOME ?? join(home, '.local', 'state');
  return [
    KICI_LEDGER_DIR,
    join(state, 'kici', 'scaler-ledger'),
    join(tmpdir(), 'kici-scaler-ledger'),
  ];
}

/**
 * The ledger directory a kici orchestrator configures from its environment:
 * `KICI_MACHINE_LEDGER_DIR` when set and non-empty, else `undefined` (the default chain).
 *
 * In kici 0.9.1 this variable is read by the orchestrator's config loader
 * (`config.machineLedgerDir`) and handed to the scaler manager, which passes it to
 * `MachineLedger` as `explicitDir`; the ledger class itself never reads it. The adapter's
 * `MachineLedger` does the same, so pass this function's result as `explicitDir`.
 *
 * @param env - The environment. @default `process.env`
 * @returns The configured directory, or `undefined`.
 *
 * @example
 * ```ts
 * import { kiciLedgerDirFromEnv } from 'scaler-primitives/kici';
 * import { MachineLedger } from 'scaler-primitives/ledger';
 * const ledger = new MachineLedger({ explicitDir: kiciLedgerDirFromEnv(), instanceId: 'orch-a' });
 * ```
 */
export function kiciLedgerDirFromEnv(
  env: Readonly<Record<string, string | undefined>> = process.env,
): string | undefined {
  const value = env[KICI_LEDGER_DIR_ENV];
  return value === undefined || value === '' ? undefined : value;
}

const UNUSABLE = new Set(['EACCES', 'EPERM', 'EROFS', 'ENOENT', 'ENOTDIR']);

function codeOf(error: unknown): string | undefined {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'string' ? code : undefined;
}

/**
 * Resolve the ledger directory as kici 0.9.1 does, with this library's checks on the result.
 *
 * - `explicitDir` given (non-empty): that directory, created if needed.
 * - Otherwise each of kici's candidates in turn (`/var/lib/kici/scaler-ledger`,
 *   `${XDG_STATE_HOME:-$HOME/.local/state}/kici/scaler-ledger`, `<tmpdir>/kici-scaler-ledger`).
 *   Like kici, a candidate this user cannot create or write is skipped. Unlike kici, a candidate that is a symbolic link,
 *   is world-writable or is owned by another user (not root) is refused with an error instead
 *   of being used or skipped: using it would let that user tamper with the pool files, and
 *   skipping it silently would put this process in another directory than its kici peers
 *   (two ledgers, no shared cap).
 *
 * @param explicitDir - kici's `explicitDir` (an empty string counts as not given, as in kici).
 * @param env - The environment for `XDG_STATE_HOME` and `HOME`. @default `process.env`
 * @returns The directory.
 * @throws LedgerDirError when a candidate is unsafe, or when no candidate is usable.
 *
 * @example
 * ```ts
 * import { resolveKiciLedgerDir } from 'scaler-primitives/kici';
 * const dir = await resolveKiciLedgerDir(undefined); // e.g. '/home/ci/.local/state/kici/scaler-ledger'
 * ```
 */
export async function resolveKiciLedgerDir(
  explicitDir: string | undefined,
  env: Readonly<Record<string, string | undefined>> = process.env,
): Promise<string> {
  if (explicitDir !== undefined && typeof explicitDir !== 'string') {
    throw new TypeError(`Expected \`explicitDir\` to be a string, got \`${typeof explicitDir}\``);
  }
  if (explicitDir) return resolveLedgerDir(nodeFs, refuseSymlink(explicitDir), {});
  const tried: string[] = [];
  for (const candidate of kiciLedgerDirCandidates(env)) {
    refuseSymlink(candidate);
    if (!writableOrAbsent(candidate)) {
      tried.push(`${candidate} (not writable)`);
      continue;
    }
    try {
      return await resolveLedgerDir(nodeFs, candidate, {});
    } catch (error) {
      const code = codeOf((error as { cause?: unknown }).cause);
      if (code === undefined || !UNUSABLE.has(code)) throw error;
      tried.push(`${candidate} (${code})`);
    }
  }
  throw new LedgerDirError(
    tried.join(', '),
    `No usable machine ledger directory: tried ${tried.join(', ')}. Set \`explicitDir\` (kici: ${KICI_LEDGER_DIR_ENV}) to a directory this user owns.`,
  );
}

function refuseSymlink(dir: string): string {
  let isLink = false;
  try {
    isLink = nodeFs.lstatSync(dir).isSymbolicLink();
  } catch {
    // Absent (created later, by mkdir) or unreadable (the checks after report it).
  }
  if (isLink) {
    throw new LedgerDirError(
      dir,
      `Refusing the ledger directory ${dir}: it is a symbolic link, so whoever made it chooses where the pool files go. Replace it with a real directory or set \`explicitDir\`.`,
    );
  }
  return dir;
}

// kici skips a candidate it cannot write (its probe writes a file there). An existing
// directory this user cannot write is skipped here too; an absent one is left to mkdir.
function writableOrAbsent(dir: string): boolean {
  try {
    nodeFs.accessSync(dir, nodeFs.constants.W_OK);
    return true;
  } catch (error) {
    return codeOf(error) === 'ENOENT';
  }
}
