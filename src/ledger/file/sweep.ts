/**
 * Leftovers in the ledger directory that killed processes leave behind, and
 * their removal (under the pool lock, best effort).
 */
import { basename, join } from 'node:path';
import { systemClock } from '../../clock.js';
import type { LedgerFs } from '../fs.js';
import { tempPrefix } from './store.js';
import { isMovedLockName, removeTree } from './takeover.js';

/** What {@link sweepLeftovers} judges ages by. */
export interface SweepOptions {
  /** Our own lease id: its file is never removed. */
  leaseId: string;
  /** Temp files and moved locks older than this are removed. */
  staleMs: number;
  /** Lease files expired for ten of these windows are removed. */
  leaseTtlMs: number;
  /**
   * Since when this instance has renewed its own lease without a break
   * (`undefined`: not renewing now, no lease file is removed). A lease file's
   * age counts from this instant at the earliest: an instance never judges
   * others from its own outage.
   */
  healthySince(): number | undefined;
  /** The ledger's clock (lease files carry its times). */
  now(): number;
}

// What a lease leaves besides its file: the closed marker of a clean close,
// the claim tickets of restarts that continued it, and a claim's temp file.
const LEASE_MARK = /^[A-Za-z0-9_-]{1,128}\.(closed|[0-9]+-(?:[0-9]+|x)\.claim)$/;
const LEASE_TEMP = /^[A-Za-z0-9_-]{1,128}\.lease\.[0-9]+-[a-z0-9]+\.tmp$/;

/**
 * Under the pool lock of `file`: remove temp files that writers of this pool
 * (or a lease claim) left when they were killed (older than the stale window,
 * so no live writer owns them), locks a taker moved away and died before
 * removing, lease files expired for ten lease windows (while this instance
 * renewed its own), and closed markers and claim tickets ten lease windows old.
 */
export function sweepLeftovers(
  fs: LedgerFs,
  dir: string,
  file: string,
  options: SweepOptions,
): void {
  // Temp files carry real mtimes: their age is judged on the system clock.
  const now = systemClock.now();
  const prefix = tempPrefix(file);
  let names: string[];
  try {
    names = fs.readdirSync(dir);
  } catch {
    return;
  }
  const lockName = `${basename(file, '.json')}.lock`;
  const healthySince = options.healthySince();
  for (const name of names) {
    if (isMovedLockName(name, lockName)) {
      // A taker that died before removing the lock it moved away.
      try {
        if (now - fs.lstatSync(join(dir, name)).mtimeMs > options.staleMs) {
          removeTree(fs, join(dir, name));
        }
      } catch {
        // Gone already.
      }
      continue;
    }
    const temp = (name.startsWith(prefix) && name.endsWith('.tmp')) || LEASE_TEMP.test(name);
    const lease =
      healthySince !== undefined && name.endsWith('.lease') && name !== `${options.leaseId}.lease`;
    const mark = LEASE_MARK.test(name);
    if (!temp && !lease && !mark) continue;
    const path = join(dir, name);
    try {
      // lstat: a link is judged (and removed) as itself, never by its target.
      const stat = fs.lstatSync(path);
      if (!stat.isFile() && !stat.isSymbolicLink()) continue;
      const age = lease
        ? options.now() - Math.max(stat.mtimeMs, healthySince!)
        : now - stat.mtimeMs;
      if (temp ? age > options.staleMs : age > 10 * options.leaseTtlMs) fs.unlinkSync(path);
    } catch {
      // Gone already, or not ours to remove.
    }
  }
}
