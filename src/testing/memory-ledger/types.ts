/**
 * The options of MemoryPoolLedger and what its `inspect` answers.
 */
import type { Clock } from '../../clock.js';
import type { StaleRow } from '../../ledger/document/verdict.js';
import type { ReservationRow } from '../../ledger/types.js';
import type { MemoryPoolStore } from './store.js';

/**
 * What {@link MemoryPoolLedger.inspect} answers.
 *
 * @example
 * ```ts
 * import type { MemoryPoolLedger, MemoryPoolSnapshot } from 'scaler-primitives/testing';
 *
 * declare const ledger: MemoryPoolLedger;
 * const { live, stale }: MemoryPoolSnapshot = ledger.inspect('host');
 * console.log(live.length, stale.map((s) => s.reason));
 * ```
 */
export interface MemoryPoolSnapshot {
  /** Rows that count against the cap. */
  live: ReservationRow[];
  /** Rows a reap would remove now, each with why. */
  stale: StaleRow[];
}

/**
 * Options of {@link MemoryPoolLedger}.
 *
 * @example
 * ```ts
 * import { MemoryPoolLedger, type MemoryPoolLedgerOptions, MemoryPoolStore, type TestClock } from 'scaler-primitives/testing';
 *
 * declare const clock: TestClock;
 * const store = new MemoryPoolStore(); // shared by the replicas of one simulated host
 * const options: MemoryPoolLedgerOptions = { instanceId: 'replica-a', store, clock, leaseTtlMs: 10_000 };
 * const ledger = new MemoryPoolLedger(options);
 * ```
 */
export interface MemoryPoolLedgerOptions {
  /** This replica's instance id, written into every row it makes. */
  instanceId: string;
  /** The shared state; replicas that share a pool share a store. @default a new store */
  store?: MemoryPoolStore;
  /** The clock leases and the reaper run on. @default systemClock */
  clock?: Clock;
  /**
   * The lease length: renewed every third of it on the clock. A replica that
   * crashed ({@link MemoryPoolLedger.abandon}) or whose renewals fail
   * ({@link MemoryPoolLedger.failRenewals}) is judged gone by its peers this
   * long (plus `leaseMarginMs`) after its last renewal, and its rows are
   * stale. `close()` ends the lease at once.
   * @default 30000
   */
  leaseTtlMs?: number;
  /**
   * What peers add to a lease's deadline before they take its rows (the
   * clock drift the real ledgers allow for). A finite number >= 0 and below
   * `leaseTtlMs`.
   * @default Math.max(1000, Math.ceil(leaseTtlMs / 10))
   */
  leaseMarginMs?: number;
}
