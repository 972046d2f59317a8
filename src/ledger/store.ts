/**
 * Reading and atomically replacing a pool file: temp file in the same directory,
 * fdatasync it, check we still own the lock, rename over the pool file, fsync the
 * directory. A process killed at any point leaves the old file or the new one,
 * never a torn one.
 */
import { randomBytes } from 'node:crypto';
import { basename, dirname, join } from 'node:path';
import { LedgerFileError, LedgerFileProblem } from '../errors.js';
import type { LedgerFs } from './fs.js';
import { createExclusive, type FileCheck, readLedgerFile } from './safe-fs.js';

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

/** Options of {@link writePoolFile}. */
export interface WriteOptions {
  /** fdatasync the temp file before the rename (default true). Off only for benchmarks. */
  fsync: boolean;
  /** Called after the temp file is durable and right before the rename; throw to abort. */
  beforeRename(): Promise<void>;
  /**
   * Refuse to write a file larger than this (readers would refuse it); `pool`
   * names the pool in the error. Unchecked when absent.
   */
  limit?: FileCheck;
}

/** The prefix of temp files for `file`; leftovers from killed writers can be matched by it. */
export function tempPrefix(file: string): string {
  return `.${basename(file)}.`;
}

/**
 * Replace `file` with `text` atomically: temp file in the same directory,
 * fdatasync, `beforeRename`, rename. On any failure the temp file is removed
 * and `file` is untouched. Call {@link syncDir} afterwards to make the rename
 * itself durable.
 */
export async function writePoolFile(
  fs: LedgerFs,
  file: string,
  text: string,
  options: WriteOptions,
): Promise<void> {
  const temp = join(
    dirname(file),
    `${tempPrefix(file)}${process.pid}.${randomBytes(4).toString('hex')}.tmp`,
  );
  const limit = options.limit;
  if (limit !== undefined && Buffer.byteLength(text, 'utf8') > limit.maxBytes) {
    throw new LedgerFileError(
      limit.pool,
      file,
      LedgerFileProblem.TOO_LARGE,
      `Refusing to write ${file}: the pool document would be ${Buffer.byteLength(text, 'utf8')} bytes, more than the limit of ${limit.maxBytes} bytes (\`maxFileBytes\`) that readers accept. Nothing was written; release rows, or raise \`maxFileBytes\` on every process that uses the pool.`,
    );
  }
  let renamed = false;
  try {
    // O_EXCL | O_NOFOLLOW: a link or any file planted at the temp name fails the call.
    const fd = createExclusive(fs, temp, 0o644);
    try {
      fs.writeFileSync(fd, text, 'utf8');
      if (options.fsync) await datasync(fs, fd);
    } finally {
      fs.closeSync(fd);
    }
    await options.beforeRename();
    fs.renameSync(temp, file);
    renamed = true;
  } finally {
    if (!renamed) {
      try {
        fs.unlinkSync(temp);
      } catch {
        // Never created, or already gone.
      }
    }
  }
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

function datasync(fs: LedgerFs, fd: number): Promise<void> {
  return new Promise((resolve, reject) => {
    fs.fdatasync(fd, (error) => (error ? reject(error) : resolve()));
  });
}
