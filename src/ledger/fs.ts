/**
 * The one place the ledger touches `node:fs` directly. Every other ledger file,
 * the lock included, reaches the filesystem through a {@link LedgerFs} passed
 * in, so tests can inject failures (a test scans the sources to keep it so).
 */
import * as nodeFs from 'node:fs';

/**
 * The filesystem the ledger uses: the shape of `node:fs` (callback API and `promises`).
 *
 * @example
 * ```ts
 * import * as fs from 'node:fs';
 * import { type LedgerFs, resolveLedgerDir } from 'scaler-primitives/ledger';
 * const ledgerFs: LedgerFs = fs; // or a wrapper that injects failures in a test
 * const dir = await resolveLedgerDir(ledgerFs, '/srv/ci/ledger');
 * ```
 */
export type LedgerFs = typeof nodeFs;

/** What `lstat` and `fstat` return. */
export type LedgerStats = nodeFs.Stats;

/** The real filesystem. */
export const defaultFs: LedgerFs = nodeFs;

/** True for a Node.js system error with this code (`ENOENT`, `EEXIST`, ...). */
export function hasErrorCode(error: unknown, code: string): boolean {
  return typeof error === 'object' && error !== null && (error as { code?: unknown }).code === code;
}
