/**
 * poolLedgerConformance: the promises every PoolLedger keeps, as named checks
 * any test runner can run against any implementation. The checks live in files by
 * group (`ledger/capacity.ts`, `ledger/ownership.ts`, `ledger/lifecycle.ts`,
 * `ledger/devices.ts`, `ledger/lease.ts`).
 */
import type { PoolLedger } from '../../../ledger/types.js';
import { type ConformanceCheck, sample } from '../check.js';
import { capacityChecks } from './capacity.js';
import { deviceChecks } from './devices.js';
import { checkMaker, instanceOf, type LedgerSuite, rows, staleWaitOf } from './harness.js';
import { leaseChecks } from './lease.js';
import { lifecycleChecks } from './lifecycle.js';
import { ownershipChecks } from './ownership.js';

/**
 * Makes one ledger instance. Every instance of a check must share one backing
 * store (one directory, one KV bucket); checks use pool names of their own, so
 * one store serves the whole suite.
 */
export type MakeLedger = (args: {
  /** The instance id the new ledger must use (every check uses ids of its own). */
  instanceId: string;
  /** The check being run, for logs. */
  check: string;
}) => PoolLedger | Promise<PoolLedger>;

/**
 * The {@link PoolLedger} contract as named checks: concurrent reserves from
 * several instances never exceed the cap in either dimension; a refused
 * reserve writes nothing; refusal details (`dimension`, `requested`, `used`,
 * `max`, `neverFits`); release is idempotent and fail closed (a second
 * instance cannot release the first one's row, the operator paths can);
 * duplicates are refused; `releaseAllForInstance` takes only this instance's
 * rows; a closed instance's rows are reaped by a peer; `list` and `getUsage`
 * agree with what was granted; a closed ledger refuses work; extended resources
 * and `maxAgents` are held across instances; `adopt` takes a restarted
 * instance's row over without counting it twice; bad input is refused; a cap
 * that lists device ids (`devices`) has each grant assign the lowest free
 * ids, never one id to two live rows (under contention too), release and reap
 * free them, adoption keeps them, and a cap listing other ids is a mismatch
 * (checks named `devices*`); and,
 * for a ledger with the optional `lease()` and `onLeaseEvent()`, the lease
 * rules (checks named `lease-*`; those needing faults run only with the
 * `failRenewals` option). A check that does not apply is skipped through the
 * runner's test context, or rejects with {@link ConformanceSkipped} when there
 * is none: never a silent pass.
 *
 * `makeLedger({ instanceId })` is called once for each instance a check needs
 * (the `adopt` check asks twice for one instance id: the host after a restart);
 * the check closes its ledgers when it ends.
 *
 * @example
 * ```ts
 * import { mkdtempSync } from 'node:fs';
 * import { tmpdir } from 'node:os';
 * import { join } from 'node:path';
 * import { describe, it } from 'vitest';
 * import { MachineLedger } from 'scaler-primitives/ledger';
 * import { poolLedgerConformance } from 'scaler-primitives/testing';
 *
 * const dir = mkdtempSync(join(tmpdir(), 'ledger-'));
 * describe('MachineLedger keeps the PoolLedger contract', () => {
 *   for (const check of poolLedgerConformance(({ instanceId }) => new MachineLedger({ instanceId, dir }))) {
 *     it(check.name, check.run);
 *   }
 * });
 * ```
 */
export function poolLedgerConformance(
  makeLedger: MakeLedger,
  options: {
    /**
     * Prefix of every pool name the suite uses (1-40 characters of
     * `[A-Za-z0-9_-]`). @default `conformance-<random>`
     */
    prefix?: string;
    /** Instances reserving at once in the contention checks. @default 3 */
    instances?: number;
    /** Reserves each of them makes at once. @default 8 */
    reservesPerInstance?: number;
    /**
     * How long (real milliseconds) a peer may take to see a closed instance's
     * rows as stale (the ledger's documented rule after `close()`).
     * @default for a ledger with `lease()`: its `leaseMs + marginMs` plus 5000,
     *   at least 10000 (read from the closing instance); else 10000
     */
    staleAfterCloseMs?: number;
    /**
     * Make one instance's lease renewals fail (`on` true) or work again, as a
     * storage outage would, for the lease checks (at risk, lost, renewed, peers
     * and the margin, no judging from one's own outage). They run on real time:
     * give the ledgers a short lease. Without it those checks are skipped.
     */
    failRenewals?: (ledger: PoolLedger, on: boolean) => void | Promise<void>;
  } = {},
): ConformanceCheck[] {
  if (typeof makeLedger !== 'function') {
    throw new TypeError(`Expected \`makeLedger\` to be a function, got \`${typeof makeLedger}\``);
  }
  const known = ['prefix', 'instances', 'reservesPerInstance', 'staleAfterCloseMs', 'failRenewals'];
  for (const key of Object.keys(options ?? {})) {
    if (!known.includes(key)) {
      throw new TypeError(
        `Unknown conformance option \`${key}\`: the accepted options are ${known.join(', ')}`,
      );
    }
  }
  const prefix = options.prefix ?? `conformance-${sample()}`;
  if (!/^[A-Za-z0-9_-]{1,40}$/.test(prefix)) {
    throw new TypeError(
      `Expected \`prefix\` to be 1-40 characters of A-Z, a-z, 0-9, '_' and '-', got \`${prefix}\``,
    );
  }
  const instances = count('instances', options.instances, 3, 2);
  const perInstance = count('reservesPerInstance', options.reservesPerInstance, 8, 1);
  const staleAfterCloseMs =
    options.staleAfterCloseMs === undefined
      ? undefined
      : count('staleAfterCloseMs', options.staleAfterCloseMs, 10_000, 0);
  const failRenewals = options.failRenewals;
  if (failRenewals !== undefined && typeof failRenewals !== 'function') {
    throw new TypeError(
      `Expected \`failRenewals\` to be a function, got \`${typeof failRenewals}\``,
    );
  }

  const suite: LedgerSuite = {
    check: checkMaker(makeLedger, prefix),
    rows,
    instanceOf,
    instances,
    perInstance,
    staleWait: staleWaitOf(staleAfterCloseMs),
    failRenewals,
  };
  return [
    ...capacityChecks(suite),
    ...ownershipChecks(suite),
    ...lifecycleChecks(suite),
    ...deviceChecks(suite),
    ...leaseChecks(suite),
  ];
}

function count(name: string, value: number | undefined, fallback: number, min: number): number {
  if (value === undefined) return fallback;
  if (!Number.isInteger(value) || value < min) {
    throw new TypeError(
      `Expected \`${name}\` to be an integer >= ${min}, got \`${String(value)}\``,
    );
  }
  return value;
}

/** Options of {@link poolLedgerConformance}. */
export type PoolLedgerConformanceOptions = NonNullable<Parameters<typeof poolLedgerConformance>[1]>;
