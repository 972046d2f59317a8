/**
 * Turning the system errors of the ledger's file-system calls into
 * `LedgerIoError`s that name the pool, the path, the errno and whether the pool
 * file may have been changed. Errors the ledger raises itself (every
 * `ScalerError`) and anything that is not a system error pass through as they are.
 */

import { isScalerError, LedgerIoError } from '../../errors/index.js';
import { isLedgerIoError } from '../../errors/ledger-fs.js';

/** The system error code (`ENOSPC`, `EROFS`...) of `error`, or `undefined` for anything else. */
export function systemErrorCode(error: unknown): string | undefined {
  if (typeof error !== 'object' || error === null || isScalerError(error)) return undefined;
  const code = (error as { code?: unknown }).code;
  return typeof code === 'string' && /^E[A-Z0-9]+$/.test(code) ? code : undefined;
}

const WHY: Record<string, string> = {
  ENOSPC: 'the filesystem is full (no space or no inode left)',
  EDQUOT: "the user's disk quota is exhausted",
  EROFS: 'the filesystem is read-only',
  EIO: 'the device reported an I/O error',
  EACCES: 'permission denied',
  EPERM: 'operation not permitted',
  ENOENT: 'a path is missing (was the ledger directory removed?)',
  EMFILE: 'this process has too many open files',
  ENFILE: 'the system has too many open files',
};

/** Where an I/O call failed, and whether the pool file may have been changed. */
export interface IoContext {
  /** The pool (`''` when none). */
  pool: string;
  /** The path to name when the system error names none. */
  path: string;
  /** True when the pool file may have been changed by this call. */
  mayHaveWritten: boolean;
}

/**
 * `error` as a `LedgerIoError` when it is a system error; a `LedgerIoError`
 * without a pool gets `context.pool`; anything else is returned unchanged.
 */
export function ledgerIoError(error: unknown, context: IoContext): unknown {
  if (isLedgerIoError(error)) {
    if (error.pool !== '' || context.pool === '') return error;
    return build(
      error.errno,
      error.syscall,
      error.path,
      context,
      error.cause,
      error.mayHaveWritten,
    );
  }
  const errno = systemErrorCode(error);
  if (errno === undefined) return error;
  const { path, syscall } = error as { path?: unknown; syscall?: unknown };
  return build(
    errno,
    typeof syscall === 'string' ? syscall : undefined,
    typeof path === 'string' ? path : context.path,
    context,
    error,
    context.mayHaveWritten,
  );
}

function build(
  errno: string,
  syscall: string | undefined,
  path: string,
  context: IoContext,
  cause: unknown,
  mayHaveWritten: boolean,
): LedgerIoError {
  const why = WHY[errno] ?? (cause instanceof Error ? cause.message : errno);
  const where = context.pool === '' ? 'The ledger' : `Pool ${JSON.stringify(context.pool)}`;
  const call = syscall === undefined ? 'a file-system call' : `\`${syscall}\``;
  const written = mayHaveWritten
    ? 'The pool file may have been changed by this call: look at the pool (list or inspect) before acting on it.'
    : 'Nothing was written to the pool file.';
  const fix =
    errno === 'EROFS'
      ? 'Make the filesystem writable again (remount it read-write); the ledger resumes by itself.'
      : errno === 'ENOSPC' || errno === 'EDQUOT'
        ? 'Free space or inodes on that filesystem; the ledger resumes by itself.'
        : 'Retry once the cause is fixed.';
  return new LedgerIoError(
    context.pool,
    path,
    errno,
    mayHaveWritten,
    `${where}: ${call} on ${path} failed with ${errno}: ${why}. ${written} ${fix}`,
    { cause, syscall },
  );
}
