/**
 * Reading a pool file safely, the size rule for writing one, and the directory
 * fsync that makes a rename durable. The write itself is fenced by the lock
 * (`lock.ts`): the temp file is made inside the holder's token directory.
 */
import { basename } from 'node:path';
import { LedgerFileError } from '../../errors/index.js';
import { LedgerFileProblem } from '../../errors/ledger-fs.js';
import type { LedgerFs } from '../fs.js';
import { type FileCheck, readLedgerFile } from './safe-fs.js';

// The pool file is small and local: reads, renames and metadata calls are
// synchronous (a few microseconds each, and the lock is held for less time);
// only the fsyncs, which wait for the disk, go through the thread pool.

/**
 * The pool file's text, or `undefined` when it does not exist yet. Never follows
 * a link, never reads a non-regular file or one larger than `check.maxBytes`
 * (see `safe-fs.ts`).
 *
 * @throws LedgerFileError when the file is refused.
 */
export function readPoolFile(fs: LedgerFs, file: string, check: FileCheck): string | undefined {
  return readLedgerFile(fs, file, check);
}

/** The prefix of temp files for `file`; leftovers from killed writers can be matched by it. */
export function tempPrefix(file: string): string {
  return `.${basename(file)}.`;
}

/** fsync a directory, making renames in it durable. */
export async function syncDir(fs: LedgerFs, dir: string): Promise<void> {
  const { O_RDONLY, O_DIRECTORY } = fs.constants;
  const fd = fs.openSync(dir, O_RDONLY | O_DIRECTORY);
  try {
    await new Promise<void>((resolve, reject) => {
      fs.fsync(fd, (error) => (error ? reject(error) : resolve()));
    });
  } finally {
    fs.closeSync(fd);
  }
}

/**
 * Refuse to write a pool document larger than the limit readers accept (they
 * would refuse the file, and the pool would be stuck): nothing is written.
 */
export function checkWriteSize(file: string, text: string, limit: FileCheck): void {
  const bytes = Buffer.byteLength(text, 'utf8');
  if (bytes <= limit.maxBytes) return;
  throw new LedgerFileError(
    limit.pool,
    file,
    LedgerFileProblem.TOO_LARGE,
    `Refusing to write ${file}: the pool document would be ${bytes} bytes, more than the limit of ${limit.maxBytes} bytes (\`maxFileBytes\`) that readers accept. Nothing was written; release rows, or raise \`maxFileBytes\` on every process that uses the pool.`,
  );
}
