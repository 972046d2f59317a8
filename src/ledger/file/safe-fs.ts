/**
 * Opening files in the ledger directory without being tricked: a symbolic link
 * is never followed (`O_NOFOLLOW`), a FIFO, device, directory or socket is never
 * read (`fstat` on the opened descriptor decides; `O_NONBLOCK` keeps a FIFO from
 * blocking the open), a file owned by another user or
 * writable by others is refused, and a file larger than the limit is refused
 * before a byte is read. Refusals are `LedgerFileError`s naming the path and
 * what it is, never the contents.
 *
 * The queue file and the lock directory have their own guards in `lock.ts`.
 */

import { LedgerFileError } from '../../errors/index.js';
import { LedgerFileProblem } from '../../errors/ledger-fs.js';
import { effectiveUid } from '../../internal/uid.js';
import { hasErrorCode, type LedgerFs, type LedgerStats as Stats } from '../fs.js';

/**
 * The largest file the ledger parses, in bytes, unless `maxFileBytes` says
 * otherwise: 4 MiB. A pool row with UUID-sized ids takes about 355 bytes in
 * the file, so this is about 11,800 reservations, far more than one host runs
 * at once, and parsing it takes tens of milliseconds.
 */
export const DEFAULT_MAX_FILE_BYTES = 4 * 1024 * 1024;

/** What a refused file is about: the pool, for the error. */
export interface FileCheck {
  /** The pool the file belongs to (`''` for a lease file). */
  pool: string;
  /** Refuse a file larger than this many bytes. */
  maxBytes: number;
}

/** A description of a non-regular file for messages: `a FIFO`, `a directory`, ... */
export function describeKind(stat: Stats): string {
  if (stat.isSymbolicLink()) return 'a symbolic link';
  if (stat.isDirectory()) return 'a directory';
  if (stat.isFIFO()) return 'a FIFO (named pipe)';
  if (stat.isCharacterDevice()) return 'a character device';
  if (stat.isBlockDevice()) return 'a block device';
  if (stat.isSocket()) return 'a socket';
  return stat.isFile() ? 'a regular file' : 'not a regular file';
}

// Owned by this process's effective uid or by root (anyone, where there are no uids).
function trustedOwner(stat: Stats): boolean {
  const uid = effectiveUid();
  return uid === undefined || stat.uid === uid || stat.uid === 0;
}

/**
 * Whether `stat` (from `fstat` on an opened descriptor) is a regular file that
 * {@link checkFileStat} would accept, as a yes or no: for files the ledger
 * rewrites in place (the wait queue, a waiter's request file).
 */
export function ownRegularFile(stat: Stats): boolean {
  return stat.isFile() && trustedOwner(stat) && (stat.mode & 0o022) === 0;
}

/**
 * Check the status of a file about to be used (from `fstat` on its descriptor,
 * or `lstat` on its path): a regular file, owned by this user or root, not
 * writable by group or others, and (when `maxBytes` is given) not too large.
 *
 * @throws LedgerFileError naming the path and the problem.
 */
export function checkFileStat(stat: Stats, path: string, pool: string, maxBytes?: number): void {
  if (stat.isSymbolicLink()) {
    throw new LedgerFileError(
      pool,
      path,
      LedgerFileProblem.SYMLINK,
      `Refusing ${path}: it is a symbolic link, and ledger files are never followed through links. Remove it; the ledger recreates its files.`,
    );
  }
  if (!stat.isFile()) {
    throw new LedgerFileError(
      pool,
      path,
      LedgerFileProblem.NOT_REGULAR,
      `Refusing ${path}: it is ${describeKind(stat)}, not a regular file. Remove it; the ledger recreates its files.`,
    );
  }
  if (!trustedOwner(stat)) {
    const uid = effectiveUid();
    throw new LedgerFileError(
      pool,
      path,
      LedgerFileProblem.OWNER,
      `Refusing ${path}: it is owned by uid ${stat.uid}, not by this user (uid ${uid}) or root, so that user could change it. Check who wrote it, then \`chown ${uid} ${path}\` or remove it.`,
    );
  }
  if ((stat.mode & 0o022) !== 0) {
    const mode = (stat.mode & 0o7777).toString(8).padStart(4, '0');
    throw new LedgerFileError(
      pool,
      path,
      LedgerFileProblem.MODE,
      `Refusing ${path}: it is writable by its group or by others (mode ${mode}), so another user could change it. Check its contents, then \`chmod go-w ${path}\`; writers should use umask 022.`,
    );
  }
  if (maxBytes !== undefined && stat.size > maxBytes) {
    throw tooLarge(path, pool, stat.size, maxBytes);
  }
}

function tooLarge(path: string, pool: string, size: number, maxBytes: number): LedgerFileError {
  return new LedgerFileError(
    pool,
    path,
    LedgerFileProblem.TOO_LARGE,
    `Refusing ${path}: it is ${size} bytes, more than the limit of ${maxBytes} bytes (\`maxFileBytes\`). It was not read. Check what wrote it; raise \`maxFileBytes\` only if the pool really holds that many rows.`,
  );
}

// Translate the errors `open(O_NOFOLLOW)` gives for links and special files.
function openError(error: unknown, path: string, pool: string): unknown {
  if (hasErrorCode(error, 'ELOOP') || hasErrorCode(error, 'EMLINK')) {
    return new LedgerFileError(
      pool,
      path,
      LedgerFileProblem.SYMLINK,
      `Refusing ${path}: it is a symbolic link, and ledger files are never followed through links. Remove it; the ledger recreates its files.`,
      { cause: error },
    );
  }
  if (hasErrorCode(error, 'ENXIO') || hasErrorCode(error, 'ENODEV')) {
    return new LedgerFileError(
      pool,
      path,
      LedgerFileProblem.NOT_REGULAR,
      `Refusing ${path}: it is a socket or a device, not a regular file. Remove it; the ledger recreates its files.`,
      { cause: error },
    );
  }
  return error;
}

/**
 * Read a ledger file as UTF-8, or `undefined` when it does not exist. Opened with
 * `O_NOFOLLOW | O_NONBLOCK` (a link fails the open, a FIFO cannot block it), then
 * checked with `fstat` on the descriptor before a byte is read: what was opened is
 * what counts, whatever replaced the path in between. At most the `fstat` size,
 * itself at most `maxBytes`, is read. (No `lstat` first: opening a device or FIFO
 * without reading it is harmless, and only root can make a device; it would cost
 * the hot path a syscall.)
 *
 * @throws LedgerFileError when the file is refused.
 */
export function readLedgerFile(fs: LedgerFs, path: string, check: FileCheck): string | undefined {
  const { O_RDONLY, O_NOFOLLOW, O_NONBLOCK } = fs.constants;
  let fd: number;
  try {
    fd = fs.openSync(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK);
  } catch (error) {
    if (hasErrorCode(error, 'ENOENT')) return undefined;
    throw openError(error, path, check.pool);
  }
  try {
    const stat = fs.fstatSync(fd);
    checkFileStat(stat, path, check.pool, check.maxBytes);
    return readAtMost(fs, fd, stat.size);
  } finally {
    fs.closeSync(fd);
  }
}

// Read up to `size` bytes (the checked fstat size): a file that grows while it is
// read is cut there, never read past the limit. The ledger replaces files by
// rename, so a file it reads never changes under it.
function readAtMost(fs: LedgerFs, fd: number, size: number): string {
  const buffer = Buffer.allocUnsafe(size);
  let length = 0;
  while (length < size) {
    const n = fs.readSync(fd, buffer, length, size - length, null);
    if (n === 0) break;
    length += n;
  }
  return buffer.toString('utf8', 0, length);
}

/**
 * Open an existing ledger file for writing without following a link, and check
 * it as {@link checkFileStat} does; `undefined` when it does not exist.
 *
 * @throws LedgerFileError when the file is refused.
 */
export function openExistingForWrite(fs: LedgerFs, path: string, pool: string): number | undefined {
  const { O_WRONLY, O_NOFOLLOW, O_NONBLOCK } = fs.constants;
  let fd: number;
  try {
    fd = fs.openSync(path, O_WRONLY | O_NOFOLLOW | O_NONBLOCK);
  } catch (error) {
    if (hasErrorCode(error, 'ENOENT')) return undefined;
    // O_WRONLY on a directory fails with EISDIR: say what it is.
    if (hasErrorCode(error, 'EISDIR')) {
      throw new LedgerFileError(
        pool,
        path,
        LedgerFileProblem.NOT_REGULAR,
        `Refusing ${path}: it is a directory, not a regular file. Remove it; the ledger recreates its files.`,
        { cause: error },
      );
    }
    throw openError(error, path, pool);
  }
  try {
    checkFileStat(fs.fstatSync(fd), path, pool);
  } catch (error) {
    fs.closeSync(fd);
    throw error;
  }
  return fd;
}

/**
 * Create a new file that must not exist yet (`O_CREAT | O_EXCL | O_NOFOLLOW`:
 * a link or any other file at the path fails the call), for writing.
 *
 * @returns The descriptor.
 * @throws The system error (`EEXIST` when the path exists in any form).
 */
export function createExclusive(fs: LedgerFs, path: string, mode: number): number {
  const { O_WRONLY, O_CREAT, O_EXCL, O_NOFOLLOW } = fs.constants;
  return fs.openSync(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, mode);
}
