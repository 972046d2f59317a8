/**
 * poolLedgerConformance against MachineLedger and MemoryPoolLedger constructed
 * with their DEFAULT options (a 30 s lease and its 3 s margin) and the suite's
 * default options, whose waits follow each ledger's `lease()`. A closed
 * instance's rows come back at once although every peer here is far younger
 * than the lease plus the margin: `close()` leaves a marker any peer acts on.
 * The three lease checks that make renewals fail run with short leases in
 * conformance-ledgers.test.ts and conformance-machine-lease.test.ts: with a
 * 30 s lease each would take over a minute.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  MemoryPoolLedger,
  MemoryPoolStore,
  poolLedgerConformance,
} from 'scaler-primitives/testing';
import { afterAll, describe, expect, it } from 'vitest';
import { MachineLedger } from '../../src/ledger/file/machine-ledger.js';

/** The lease checks that need the suite's `failRenewals` option. */
const NEEDS_FAULTS = /^(renewals that fail|a peer takes the rows|no instance judges others)/;

describe('poolLedgerConformance: MachineLedger with default options', () => {
  const dir = mkdtempSync(join(tmpdir(), 'sp-conformance-defaults-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  const checks = poolLedgerConformance(({ instanceId }) => new MachineLedger({ instanceId, dir }));
  const run = checks.filter((check) => !NEEDS_FAULTS.test(check.name));
  it('runs every check but the three that need failing renewals', () => {
    expect(checks.length - run.length).toBe(3);
  });
  for (const check of run) it(check.name, check.run, 60_000);
});

describe('poolLedgerConformance: MemoryPoolLedger with default options', () => {
  const store = new MemoryPoolStore();
  const checks = poolLedgerConformance(
    ({ instanceId }) => new MemoryPoolLedger({ instanceId, store }),
  );
  const run = checks.filter((check) => !NEEDS_FAULTS.test(check.name));
  it('runs every check but the three that need failing renewals', () => {
    expect(checks.length - run.length).toBe(3);
  });
  for (const check of run) it(check.name, check.run, 60_000);
});
