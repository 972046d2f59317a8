/**
 * poolLedgerConformance's lease checks against a real MachineLedger, its
 * renewals made to fail by an injected fs whose writes answer EROFS (one
 * switch per instance). Runs only where MachineLedger has the optional lease
 * methods (issue 31).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { poolLedgerConformance } from 'scaler-primitives/testing';
import { afterAll, describe, it } from 'vitest';
import { MachineLedger } from '../../src/ledger/file/machine-ledger.js';
import type { PoolLedger } from '../../src/ledger/types.js';
import { faultyFs } from '../helpers/faulty-fs.js';

const hasLease =
  typeof (MachineLedger.prototype as Partial<PoolLedger>).onLeaseEvent === 'function' &&
  typeof (MachineLedger.prototype as Partial<PoolLedger>).lease === 'function';

describe.runIf(hasLease)(
  'poolLedgerConformance lease checks: MachineLedger, writes failing',
  () => {
    const dir = mkdtempSync(join(tmpdir(), 'sp-conformance-lease-'));
    afterAll(() => rmSync(dir, { recursive: true, force: true }));
    const switches = new WeakMap<PoolLedger, { down: boolean }>();
    const checks = poolLedgerConformance(
      ({ instanceId }) => {
        const state = { down: false };
        const ledger = new MachineLedger({
          instanceId,
          dir,
          leaseTtlMs: 900,
          leaseMarginMs: 200,
          fs: faultyFs(state),
        } as unknown as ConstructorParameters<typeof MachineLedger>[0]);
        switches.set(ledger, state);
        return ledger;
      },
      {
        failRenewals: (ledger, on) => {
          switches.get(ledger)!.down = on;
        },
      },
    );
    // The lease checks come last in the suite.
    for (const check of checks.slice(-5)) {
      it(check.name, check.run, 20_000);
    }
  },
);
