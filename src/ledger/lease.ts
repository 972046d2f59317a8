/**
 * Leases: each ledger instance keeps a file `<dir>/<leaseId>.lease` fresh by
 * touching its mtime. Peers in any PID namespace can read the mtime, so a
 * peer whose lease is older than the lease window is known to be gone.
 */
import { join } from 'node:path';
import type { LeaseState } from './document.js';
import { hasErrorCode, type LedgerFs, writeAll } from './fs.js';
import { createExclusive, openExistingForWrite } from './safe-fs.js';

const LEASE_ID = /^[A-Za-z0-9_-]{1,128}$/;

/** The lease file path for `leaseId`, or `undefined` when the id cannot name a file safely. */
export function leasePath(dir: string, leaseId: string): string | undefined {
  return LEASE_ID.test(leaseId) ? join(dir, `${leaseId}.lease`) : undefined;
}

/**
 * Create or touch a lease file, setting its mtime to `nowMs`. The file is opened
 * without following a link and checked (a regular file of ours, not writable by
 * others) before its times are set through the descriptor; a new one is created
 * with `O_EXCL`, so nothing planted at the path is ever written through.
 *
 * @throws LedgerFileError when something other than our lease file is at the path.
 */
export async function touchLease(
  fs: LedgerFs,
  file: string,
  nowMs: number,
  body: string,
): Promise<void> {
  const time = nowMs / 1000;
  // Two rounds: a file removed between the two calls (a peer's sweep) is recreated.
  for (let attempt = 0; ; attempt++) {
    let fd = openExistingForWrite(fs, file, '');
    if (fd === undefined) {
      try {
        fd = createExclusive(fs, file, 0o644);
        writeAll(fs, fd, body);
      } catch (error) {
        if (fd !== undefined) {
          fs.closeSync(fd);
          // A body cut short (a full disk) is not left behind.
          try {
            fs.unlinkSync(file);
          } catch {
            // Gone already.
          }
        }
        if (hasErrorCode(error, 'EEXIST') && attempt === 0) continue;
        throw error;
      }
    }
    try {
      fs.futimesSync(fd, time, time);
    } finally {
      fs.closeSync(fd);
    }
    return;
  }
}

/**
 * Is the lease fresh at `nowMs`? A missing file is expired; an unreadable one,
 * or anything but a regular file (a link is not followed), is unknown, so the
 * rows it covers are kept. Synchronous: it runs under the pool lock and is one `lstat`.
 */
export function leaseState(
  fs: LedgerFs,
  dir: string,
  leaseId: string,
  nowMs: number,
  ttlMs: number,
): LeaseState {
  const file = leasePath(dir, leaseId);
  if (file === undefined) return 'unknown';
  try {
    const stat = fs.lstatSync(file);
    if (!stat.isFile()) return 'unknown';
    return nowMs - stat.mtimeMs > ttlMs ? 'expired' : 'fresh';
  } catch (error) {
    return hasErrorCode(error, 'ENOENT') ? 'expired' : 'unknown';
  }
}
