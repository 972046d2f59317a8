// The ledger's file-system refusals and failures (src/ledger/file/dir.ts, src/ledger/file/safe-fs.ts,
// src/ledger/file/io-error.ts): an unsafe directory, a refused file, a failed I/O call.

import { ErrorCode, hasCode } from './code.js';
import { LedgerError } from './ledger.js';

/**
 * The ledger directory cannot be used safely.
 *
 * @example
 * ```ts
 * import { ErrorCode, isScalerError } from 'scaler-primitives/errors';
 * import type { MachineLedger } from 'scaler-primitives/ledger';
 * declare const ledger: MachineLedger;
 * try { await ledger.reserve('build-host', 'agent-1', 2, 4 * 2 ** 30); }
 * catch (error) {
 *   if (isScalerError(error, ErrorCode.LEDGER_DIR_UNSAFE)) console.error(error.dir);
 *   else throw error;
 * }
 * ```
 */
export class LedgerDirError extends LedgerError {
  /** The directory. */
  readonly dir: string;
  /**
   * @param dir - The directory.
   * @param message - The full sentence.
   * @param options - `cause`.
   */
  constructor(dir: string, message: string, options?: { cause?: unknown }) {
    super(ErrorCode.LEDGER_DIR_UNSAFE, '', message, options);
    this.name = 'LedgerDirError';
    this.dir = dir;
  }
}

// Why a ledger file was refused: the values of `LedgerFileError.problem`.
export const LedgerFileProblem = {
  /** The path is a symbolic link (it is never followed). */
  SYMLINK: 'symlink',
  /** The path is a FIFO, a device, a directory or a socket. */
  NOT_REGULAR: 'not-regular',
  /** The file is owned by a user other than this process's (or root). */
  OWNER: 'owner',
  /** The file is writable by its group or by others. */
  MODE: 'mode',
  /** The file is larger than the ledger's `maxFileBytes`. */
  TOO_LARGE: 'too-large',
} as const satisfies Record<string, LedgerFileProblemName>;

/**
 * A file in the ledger directory (pool file, lease file, temp file) was refused
 * before it was read or written. The message names the path and what it is,
 * never the file's contents. Nothing was written.
 *
 * @example
 * ```ts
 * import { ErrorCode, isScalerError } from 'scaler-primitives/errors';
 * import type { MachineLedger } from 'scaler-primitives/ledger';
 * declare const ledger: MachineLedger;
 * try { await ledger.reserve('build-host', 'agent-1', 2, 4 * 2 ** 30); }
 * catch (error) {
 *   if (isScalerError(error, ErrorCode.LEDGER_FILE_UNSAFE)) console.error(error.path, error.problem);
 *   else throw error;
 * }
 * ```
 */
export class LedgerFileError extends LedgerError {
  /** The refused path. */
  readonly path: string;
  /**
   * Why it was refused: `symlink` (never followed), `not-regular` (a FIFO, a device, a
   * directory or a socket), `owner` (owned by another user than this process's, or root),
   * `mode` (writable by its group or others) or `too-large` (larger than `maxFileBytes`).
   */
  readonly problem: 'symlink' | 'not-regular' | 'owner' | 'mode' | 'too-large';
  /**
   * @param pool - The pool involved (`''` when none).
   * @param path - The refused path.
   * @param problem - Why it was refused.
   * @param message - The full sentence.
   * @param options - `cause`.
   */
  constructor(
    pool: string,
    path: string,
    problem: LedgerFileError['problem'],
    message: string,
    options?: { cause?: unknown },
  ) {
    super(ErrorCode.LEDGER_FILE_UNSAFE, pool, message, options);
    this.name = 'LedgerFileError';
    this.path = path;
    this.problem = problem;
  }
}

// Internal guards (the package exports `isScalerError(error, code)` instead).
export const isLedgerDirError = hasCode<LedgerDirError>([ErrorCode.LEDGER_DIR_UNSAFE]);

export const isLedgerFileError = hasCode<LedgerFileError>([ErrorCode.LEDGER_FILE_UNSAFE]);

/**
 * A file-system call of the ledger failed: the disk is full (`ENOSPC`, `EDQUOT`,
 * or no inode left), the filesystem is read-only (`EROFS`), an I/O error
 * (`EIO`)... The message names the pool, the path and the errno, says whether
 * the pool file may have been changed by this call (`mayHaveWritten`; when
 * false, nothing was written) and what to do. A read-only directory is reported
 * here (`errno` `EROFS`), not as an unsafe one.
 *
 * @example
 * ```ts
 * import { ErrorCode, isScalerError } from 'scaler-primitives/errors';
 * import type { MachineLedger } from 'scaler-primitives/ledger';
 * declare const ledger: MachineLedger;
 * declare function alertOperator(path: string, errno: string): void;
 * try { await ledger.reserve('build-host', 'agent-1', 2, 4 * 2 ** 30); }
 * catch (error) {
 *   if (isScalerError(error, ErrorCode.LEDGER_IO)) alertOperator(error.path, error.errno);
 *   else throw error;
 * }
 * ```
 */
export class LedgerIoError extends LedgerError {
  /** The path of the failed call. */
  readonly path: string;
  /** The system error code: `ENOSPC`, `EROFS`, `EDQUOT`, `EIO`, `EACCES`... */
  readonly errno: string;
  /** The failed system call (`write`, `mkdir`, `rename`...), when known. */
  readonly syscall: string | undefined;
  /** True when the pool file may have been changed by this call; false: nothing was written. */
  readonly mayHaveWritten: boolean;
  /**
   * @param pool - The pool involved (`''` when none).
   * @param path - The path of the failed call.
   * @param errno - The system error code.
   * @param mayHaveWritten - Whether the pool file may have been changed.
   * @param message - The full sentence.
   * @param options - `cause` (the system error) and `syscall`.
   */
  constructor(
    pool: string,
    path: string,
    errno: string,
    mayHaveWritten: boolean,
    message: string,
    options?: { cause?: unknown } & { syscall?: string | undefined },
  ) {
    super(ErrorCode.LEDGER_IO, pool, message, options);
    this.name = 'LedgerIoError';
    this.path = path;
    this.errno = errno;
    this.syscall = options?.syscall;
    this.mayHaveWritten = mayHaveWritten;
  }
}

export const isLedgerIoError = hasCode<LedgerIoError>([ErrorCode.LEDGER_IO]);

/** Why a ledger file was refused. */
export type LedgerFileProblemName = LedgerFileError['problem'];
