/**
 * The one place the ledger touches `node:fs` directly. Every other ledger file,
 * the lock included, reaches the filesystem through a {@link LedgerFs} passed
 * in, so tests can inject failures (a test scans the sources to keep it so).
 */
import * as nodeFs from 'node:fs';

/**
 * The filesystem the ledger uses: the shape of `node:fs` (callback API and `promises`).
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

/**
 * Write all of `data` to `fd` at its current offset (or at `position`), or throw: `write` may
 * write fewer bytes than asked (a filesystem that fills up mid-write writes
 * what fits and says so only in the count; the next write then fails with
 * `ENOSPC`), so it is called again for the rest until every byte is written.
 * A write that makes no progress is an error too (`EIO`), never a silent cut.
 * Every file the ledger and the file state store write goes through here.
 *
 * @throws The system error of the failing `write` (`ENOSPC`, `EDQUOT`, `EIO`...).
 */
export function writeAll(
  fs: Pick<LedgerFs, 'writeSync'>,
  fd: number,
  data: string | Uint8Array,
  position?: number,
): void {
  const bytes = typeof data === 'string' ? Buffer.from(data, 'utf8') : data;
  let offset = 0;
  while (offset < bytes.length) {
    const written = fs.writeSync(
      fd,
      bytes,
      offset,
      bytes.length - offset,
      position === undefined ? null : position + offset,
    );
    if (!Number.isInteger(written) || written <= 0 || written > bytes.length - offset) {
      throw Object.assign(
        new Error(
          `EIO: write made no progress after ${offset} of ${bytes.length} bytes (it returned ${String(written)}), write`,
        ),
        { code: 'EIO', errno: -5, syscall: 'write' },
      );
    }
    offset += written;
  }
}
