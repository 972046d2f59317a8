/**
 * Reading and atomically replacing a pool file: temp file in the same directory,
 * fsync it, check we still own the lock, rename over the pool file, fsync the directory.
 * A process killed at any point leaves the old file or the new one, never a torn one.
 */
import { randomBytes } from 'node:crypto';
import { basename, dirname, join } from 'node:path';
import { hasErrorCode, type LedgerFs } from './fs.js';

/** The pool file's text, or `undefined` when it does not exist yet. */
export async function readPoolFile(fs: LedgerFs, file: string): Promise<string | undefined> {
  try {
    return await fs.promises.readFile(file, 'utf8');
  } catch (error) {
    if (hasErrorCode(error, 'ENOENT')) return undefined;
    throw error;
  }
}

/** Options of {@link writePoolFile}. */
export interface WriteOptions {
  /** fsync the temp file and the directory (default true). Off only for benchmarks. */
  fsync: boolean;
  /** Called after the temp file is durable and right before the rename; throw to abort. */
  beforeRename(): Promise<void>;
}

/** The prefix of temp files for `file`; leftovers from killed writers can be matched by it. */
export function tempPrefix(file: string): string {
  return `.${basename(file)}.`;
}

/** Replace `file` with `text` atomically. On any failure the temp file is removed and `file` is untouched. */
export async function writePoolFile(
  fs: LedgerFs,
  file: string,
  text: string,
  options: WriteOptions,
): Promise<void> {
  const dir = dirname(file);
  const temp = join(dir, `${tempPrefix(file)}${process.pid}.${randomBytes(4).toString('hex')}.tmp`);
  let renamed = false;
  try {
    const handle = await fs.promises.open(temp, 'wx', 0o644);
    try {
      await handle.writeFile(text, 'utf8');
      if (options.fsync) await handle.sync();
    } finally {
      await handle.close();
    }
    await options.beforeRename();
    await fs.promises.rename(temp, file);
    renamed = true;
    if (options.fsync) await syncDir(fs, dir);
  } finally {
    if (!renamed) await fs.promises.unlink(temp).catch(() => {});
  }
}

async function syncDir(fs: LedgerFs, dir: string): Promise<void> {
  const handle = await fs.promises.open(dir, 'r');
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}
