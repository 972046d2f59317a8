/**
 * The MachineLedger's test hooks: they reach a ledger only under the symbol of
 * src/internal/test-hooks.ts, which no subpath exports, so no option a caller
 * can write shortens the lock's stale window or stalls a holder.
 */
import { withTestHooks } from '../internal/test-hooks.js';
import type { MachineLedgerOptions } from './machine-ledger.js';

/** What tests can hook into (passed with {@link withMachineLedgerHooks}). */
export interface MachineLedgerHooks {
  /** Under the lock, before the pool file is written. */
  beforeCommit: (pool: string) => Promise<void> | void;
  /** The monotonic clock the lease refresh is timed with. @default `performance.now` */
  monotonic: () => number;
  /** The lock's stale window without the 2000 ms floor (stall-injection tests). @default `staleMs` */
  lockStaleMs: number;
}

/** Every key of {@link MachineLedgerHooks}. */
export const MACHINE_LEDGER_HOOK_KEYS = [
  'beforeCommit',
  'monotonic',
  'lockStaleMs',
] as const satisfies readonly (keyof MachineLedgerHooks)[];

/** `options` carrying test hooks: for tests, benches and their worker processes only. */
export function withMachineLedgerHooks(
  options: MachineLedgerOptions,
  hooks: Partial<MachineLedgerHooks>,
): MachineLedgerOptions {
  return withTestHooks(options, hooks);
}
