/**
 * One factory of file `MachineLedger`s for the ledger unit tests: instance `me`
 * on boot `boot-1` in the test's directory, with the symbol-keyed test hooks
 * when asked, every ledger remembered so the test's `afterEach` closes them.
 */

import {
  type MachineLedgerHooks,
  withMachineLedgerHooks,
} from '../../src/ledger/file/machine-ledger.js';
import { MachineLedger, type MachineLedgerOptions } from '../../src/ledger/index.js';

/** The options of {@link LedgerFactory.make}: any ledger option, and the test hooks. */
export type MakeLedgerOptions = Partial<MachineLedgerOptions> & {
  hooks?: Partial<MachineLedgerHooks>;
};

/** Ledgers made in one directory and closed together. */
export interface LedgerFactory {
  /** A ledger (`instanceId: 'me'`, `bootId: 'boot-1'`, the factory's dir), remembered. */
  make(options?: MakeLedgerOptions): MachineLedger;
  /** Remember a ledger built another way, to close it with the others. */
  track<T extends MachineLedger>(ledger: T): T;
  /**
   * Close every ledger made or tracked since the last call. A rejected close
   * rejects, unless `ignoreErrors` (for tests that leave ledgers on broken files).
   */
  closeAll(options?: { ignoreErrors?: boolean }): Promise<void>;
}

/**
 * @param dir - The directory, read at each `make` (tests set it in `beforeEach`).
 */
export function ledgerFactory(dir: () => string): LedgerFactory {
  const open: MachineLedger[] = [];
  const track = <T extends MachineLedger>(ledger: T): T => {
    open.push(ledger);
    return ledger;
  };
  return {
    make(options = {}) {
      const { hooks = {}, ...rest } = options;
      return track(
        new MachineLedger(
          withMachineLedgerHooks(
            { instanceId: 'me', dir: dir(), bootId: 'boot-1', ...rest },
            hooks,
          ),
        ),
      );
    },
    track,
    async closeAll({ ignoreErrors = false } = {}) {
      const closing = open.splice(0).map((l) => l.close());
      await Promise.all(ignoreErrors ? closing.map((c) => c.catch(() => {})) : closing);
    },
  };
}
