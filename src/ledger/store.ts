/**
 * Reading and atomically replacing a pool file: temp file in the same directory,
 * fdatasync it, check we still own the lock, rename over the pool file, fsync the
 * directory. A process killed at any point leaves the old file or the new one,
 * never a torn one.
 */
import { randomBytes } from 'node:crypto';
import { basename, dirname, join } from 'node:path';
import { hasErrorCode, type LedgerFs } from './fs.js';

// The pool file is small and local: reads, renames and metadata calls are
// synchronous (a few microseconds each, and the lock is held for less time);
// only the fsyncs, which wait for the disk, go through the thread pool.

/** The pool file's text, or `undefined` when it does not exist yet. */
export function readPoolFile(fs: LedgerFs, file: string): string | undefined {
  try {
    return fs.readFileSync(file, 'utf8');
  } catch (error) {
    if (hasErrorCode(error, 'ENOENT')) return undefined;
    throw error;
  }
}

/** Options of {@link writePoolFile}. */
export interface WriteOptions {
  /** fdatasync the temp file before the rename (default true). Off only for benchmarks. */
  fsync: boolean;
  /** Called after the temp file is durable and right before the rename; throw to abort. */
  beforeRename(): Promise<void>;
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
  let renamed = false;
  try {
    const fd = fs.openSync(temp, 'wx', 0o644);
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
  const fd = fs.openSync(dir, 'r');
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
