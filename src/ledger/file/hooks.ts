/**
 * The test hooks of `MachineLedger` (not public API: no subpath exports them),
 * apart from `machine-ledger.ts` so that the combining cycle can name them
 * without importing the ledger that assembles it.
 */

/**
 * What tests can hook into (passed with `withMachineLedgerHooks`; not
 * public API: no subpath exports this, and no string option key reaches it).
 */
export interface MachineLedgerHooks {
  /** Under the lock, before the pool file is written. */
  beforeCommit: (pool: string) => Promise<void> | void;
  /** Under the lock, before claiming waiters' requests (combining crash tests). */
  beforeClaim: (pool: string) => Promise<void> | void;
  /** Under the lock, after the pool file was written, before answers are posted. */
  afterWrite: (pool: string) => Promise<void> | void;
  /** The monotonic clock the lease renewal is timed with. @default `performance.now`, or the `clock` option's `now` when one is given */
  monotonic: () => number;
  /** The lock's stale window without the 2000 ms minimum (stall-injection tests). @default `staleMs` */
  lockStaleMs: number;
}

/** Every key of {@link MachineLedgerHooks}. */
export const MACHINE_LEDGER_HOOK_KEYS = [
  'beforeCommit',
  'beforeClaim',
  'afterWrite',
  'monotonic',
  'lockStaleMs',
] as const satisfies readonly (keyof MachineLedgerHooks)[];
