/**
 * A ledger directory removed under running instances (an operator's cleanup
 * job): its path is cached, so without this every call would fail with a raw
 * `ENOENT` forever. After a failed cycle the directory is looked at; when it
 * is gone it is made again with the checks it was first made with (mode 0700,
 * owner, the directories above: `ensureSafeDir`), and the lease is made again
 * in it before the cycle is run again, so rows written under the new
 * directory are covered by a lease file peers can see.
 */

import { hasErrorCode, type LedgerFs } from '../fs.js';
import type { Inbox } from './combining/waiter.js';
import { ensureSafeDir } from './dir.js';
import type { LeaseKeeper } from './lease-keeper.js';
import type { PoolLocker } from './lock.js';

/** What a recovery needs from its ledger. */
export interface RecoveryHost {
  readonly fs: LedgerFs;
  readonly lease: LeaseKeeper;
  readonly locker: PoolLocker;
  /** Per pool, the inboxes of the combining directories (they went with the directory). */
  readonly inboxes: Map<string, Inbox | undefined>;
  /** The resolved ledger directory. */
  dir(): Promise<string>;
  /** True once the ledger is closed (nothing is made again then). */
  closed(): boolean;
}

/** Makes a removed ledger directory again, once however many calls found it gone. */
export class DirRecovery {
  #running: Promise<boolean> | undefined;
  #generation = 0;

  constructor(private readonly host: RecoveryHost) {}

  /** How many times the directory was made again (read before a cycle, passed to {@link DirRecovery.recovered}). */
  get generation(): number {
    return this.#generation;
  }

  /**
   * After a failed cycle on `pool` that started at `generation`: true when
   * the ledger directory was gone and is back (made again, checked, this
   * instance's lease file in it; by this call or by another since the cycle
   * started), so the cycle can be run again; false when it was there (the
   * failure stands).
   *
   * @throws LedgerDirError when it cannot be made again safely;
   *   LedgerUnavailableError when the lease cannot be made in it.
   */
  async recovered(pool: string, generation: number): Promise<boolean> {
    if (generation !== this.#generation) return true;
    this.#running ??= this.#recover(pool).finally(() => {
      this.#running = undefined;
    });
    return this.#running;
  }

  async #recover(pool: string): Promise<boolean> {
    const { host } = this;
    if (host.closed()) return false;
    let dir: string;
    try {
      dir = await host.dir();
    } catch {
      return false;
    }
    try {
      await host.fs.promises.lstat(dir);
      return false;
    } catch (error) {
      if (!hasErrorCode(error, 'ENOENT')) return false;
    }
    await ensureSafeDir(host.fs, dir);
    // The combining directories, inboxes and watches were in the old directory.
    for (const inbox of host.inboxes.values()) inbox?.close();
    host.inboxes.clear();
    host.locker.close();
    host.lease.reassert(dir, pool);
    this.#generation++;
    return true;
  }
}
