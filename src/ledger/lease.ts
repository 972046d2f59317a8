/**
 * Leases: each ledger instance keeps a file `<dir>/<leaseId>.lease` fresh by
 * touching its mtime. Peers in any PID namespace can read the mtime, so a
 * peer whose lease is older than the lease window is known to be gone.
 */
import { join } from 'node:path';
import type { LeaseState } from './document.js';
import { hasErrorCode, type LedgerFs } from './fs.js';

const LEASE_ID = /^[A-Za-z0-9_-]{1,128}$/;

/** The lease file path for `leaseId`, or `undefined` when the id cannot name a file safely. */
export function leasePath(dir: string, leaseId: string): string | undefined {
  return LEASE_ID.test(leaseId) ? join(dir, `${leaseId}.lease`) : undefined;
}

/** Create or touch a lease file, setting its mtime to `nowMs`. */
export async function touchLease(
  fs: LedgerFs,
  file: string,
  nowMs: number,
  body: string,
): Promise<void> {
  const time = new Date(nowMs);
  try {
    await fs.promises.utimes(file, time, time);
  } catch (error) {
    if (!hasErrorCode(error, 'ENOENT')) throw error;
    await fs.promises.writeFile(file, body, { mode: 0o644 });
    await fs.promises.utimes(file, time, time);
  }
}

/**
 * Is the lease fresh at `nowMs`? A missing file is expired; an unreadable one is
 * unknown. Synchronous: it runs under the pool lock and is one stat.
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
    const stat = fs.statSync(file);
    return nowMs - stat.mtimeMs > ttlMs ? 'expired' : 'fresh';
  } catch (error) {
    return hasErrorCode(error, 'ENOENT') ? 'expired' : 'unknown';
  }
}
