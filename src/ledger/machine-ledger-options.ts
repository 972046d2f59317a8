/**
 * The options of {@link MachineLedger}, the keys it accepts, its defaults, and
 * the per-pool snapshot its `inspect` returns.
 */

import type { Clock } from '../clock.js';
import { withTestHooks } from '../internal/test-hooks.js';
import type { ResourceAmount, ResourceCap } from '../resources/types.js';
import type { StaleRow } from './document.js';
import type { LedgerFs } from './fs.js';
import { LEDGER_TELEMETRY_KEYS, type LedgerTelemetryOptions } from './telemetry.js';
import type { ReservationRow } from './types.js';

/**
 * Options of {@link MachineLedger}.
 *
 * @example
 * ```ts
 * import { MachineLedger, type MachineLedgerOptions } from 'scaler-primitives/ledger';
 *
 * const options: MachineLedgerOptions = {
 *   instanceId: `orchestrator-${process.pid}`,
 *   dir: '/var/lib/ci/ledger', // every orchestrator on the host uses the same directory
 *   leaseTtlMs: 30_000,
 * };
 * const ledger = new MachineLedger(options);
 * ```
 */
export interface MachineLedgerOptions extends LedgerTelemetryOptions {
  /** This orchestrator instance's id, written into every row it makes. */
  instanceId: string;
  /**
   * The ledger directory.
   * @default `$SCALER_PRIMITIVES_LEDGER_DIR`, else `/var/lib/scaler-primitives/ledger`, else
   *   (when that cannot be created or written) `<os.tmpdir()>/scaler-ledger-<uid>`
   */
  dir?: string;
  /** Alias of `dir`, the seed's name. `dir` wins when both are given. */
  explicitDir?: string;
  /**
   * A lock not refreshed for this long is taken over by the next process that
   * wants it (a holder refreshes every `staleMs / 2`). Minimum 2000.
   * @default 10000
   */
  staleMs?: number;
  /**
   * How long an operation keeps retrying a busy lock before it rejects with
   * `LedgerBusyError`. Keep it above `staleMs` so a crashed holder's lock is
   * taken over within one call.
   * @default 15000
   */
  lockTimeoutMs?: number;
  /**
   * The lease window. The lease is renewed every `leaseTtlMs / 3`; this
   * instance's `lease()` says `at-risk` when nothing was confirmed for two
   * thirds of it and `lost` at its end (the deadline). A peer whose lease was
   * not renewed for `leaseTtlMs + leaseMarginMs`, while the judging instance
   * renewed its own, is gone and its rows are reaped.
   * @default 30000
   */
  leaseTtlMs?: number;
  /**
   * What peers add to an owner's deadline before they take its rows (timer
   * delays, the mtime's granularity). A finite number >= 0.
   * @default `Math.max(1000, Math.ceil(leaseTtlMs / 10))`
   */
  leaseMarginMs?: number;
  /** fsync the temp file and the directory on each write. Turn off only for benchmarks. @default true */
  fsync?: boolean;
  /**
   * The largest pool file this ledger reads or writes, in bytes. A larger file is
   * refused with `LedgerFileError` (problem `too-large`) before a byte is read, and
   * a write that would produce one is refused. Give every process that shares a
   * pool the same value.
   * @default 4194304 (4 MiB, about 11,800 reservations)
   */
  maxFileBytes?: number;
  /** The host's boot id. @default read from `/proc/sys/kernel/random/boot_id` */
  bootId?: string;
  /** Probe whether a pid exists. @default `kill(pid, 0)`, where `EPERM` counts as alive */
  isProcessAlive?: (pid: number) => boolean;
  /** A process's start time in clock ticks since boot. @default `/proc/<pid>/stat` field 22 */
  processStartTime?: (pid: number) => number | undefined;
  /**
   * The clock leases, staleness and the reaper are timed with. Waits on other
   * processes (the lock poll) stay on the system clock.
   * @default {@link systemClock}
   */
  clock?: Clock;
  /** Shorthand for a `clock` that only replaces `now()` (epoch milliseconds). Ignored when `clock` is given. @default `Date.now` */
  now?: () => number;
  /** The filesystem. @default `node:fs` */
  fs?: LedgerFs;
  /** The environment used to resolve the directory. @default `process.env` */
  env?: NodeJS.ProcessEnv;
}

/**
 * What tests can hook into (passed with {@link withMachineLedgerHooks}; not
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
  /** The lock's stale window without the 2000 ms floor (stall-injection tests). @default `staleMs` */
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

/**
 * `options` carrying test hooks (see src/internal/test-hooks.ts): for tests,
 * benches and their worker processes only.
 */
export function withMachineLedgerHooks(
  options: MachineLedgerOptions,
  hooks: Partial<MachineLedgerHooks>,
): MachineLedgerOptions {
  return withTestHooks(options, hooks);
}

/** Every key of {@link MachineLedgerOptions}: any other key is refused (a typo must not silently fall back to a default). */
export const MACHINE_LEDGER_OPTION_KEYS = [
  'instanceId',
  'dir',
  'explicitDir',
  'staleMs',
  'lockTimeoutMs',
  'leaseTtlMs',
  'leaseMarginMs',
  'fsync',
  'maxFileBytes',
  'bootId',
  'isProcessAlive',
  'processStartTime',
  'clock',
  'now',
  'fs',
  'env',
  ...LEDGER_TELEMETRY_KEYS,
] as const satisfies ReadonlyArray<keyof MachineLedgerOptions>;

/**
 * Per-pool summary returned by {@link MachineLedger.inspect}.
 *
 * @example
 * ```ts
 * import type { MachineLedger, PoolSnapshot } from 'scaler-primitives/ledger';
 *
 * declare const ledger: MachineLedger;
 * const { cap, usage, live, stale }: PoolSnapshot = await ledger.inspect('build-host');
 * console.log(`${usage.cpus}/${cap.maxCpu ?? '-'} cores, ${live.length} live, ${stale.length} to reap`);
 * ```
 */
export interface PoolSnapshot {
  /** The pool name. */
  pool: string;
  /** The pool file (where it would be, when it does not exist). */
  file: string;
  /**
   * Whether the pool file exists. A pool without a file has no rows, and its
   * `cap` is the registered one (or `{}`).
   */
  exists: boolean;
  /** The cap stored in the file (`{}` when the file does not exist). */
  cap: ResourceCap;
  /** Live rows. */
  live: ReservationRow[];
  /** Rows that would be reaped now, each with the reason. */
  stale: StaleRow[];
  /** Summed CPU and memory of live rows. */
  usage: ResourceAmount;
}

/** Default `staleMs`. */
export const DEFAULT_STALE_MS = 10_000;
/** Default `lockTimeoutMs`. */
export const DEFAULT_LOCK_TIMEOUT_MS = 15_000;
/** Default `leaseTtlMs`. */
export const DEFAULT_LEASE_TTL_MS = 30_000;

/**
 * The `leaseMarginMs` option, checked, or its default for `leaseTtlMs`.
 *
 * @throws TypeError when `value` is not a finite number >= 0.
 */
export function leaseMarginOption(value: unknown, leaseTtlMs: number): number {
  if (value === undefined) return Math.max(1000, Math.ceil(leaseTtlMs / 10));
  if (typeof value !== 'number' || !Number.isFinite(value) || value < 0) {
    throw new TypeError(
      `Expected \`leaseMarginMs\` to be a finite number >= 0, got \`${String(value)}\``,
    );
  }
  return value;
}
