/**
 * MachineLedger: the file-backed PoolLedger shared with the kici orchestrator.
 * Its options, the parts it is assembled from, and its lock-free read of a
 * pool. The locked cycle, with cross-process combining, is in `combining/`.
 */
import { randomUUID } from 'node:crypto';
import { join } from 'node:path';
import { type Clock, monotonicNow, resolveClock } from '../../clock.js';
import { testHooksOf, withTestHooks } from '../../internal/test-hooks.js';
import type { ResourceAmount, ResourceCap } from '../../resources/types.js';
import { checkInstanceId, checkKnownKeys, positiveOption } from '../checks.js';
import { emptyDocument, parseDocument } from '../document/codec.js';
import { sumRows } from '../document/fit.js';
import { validatePoolName } from '../document/pool-name.js';
import { type LivenessFacts, partitionRows, type StaleRow } from '../document/verdict.js';
import { LedgerFrontEnd } from '../front-end.js';
import { defaultFs, hasErrorCode, type LedgerFs } from '../fs.js';
import { GroupCommit } from '../group-commit.js';
import type { LedgerAnswer, LedgerOp, OpAnswer } from '../ops.js';
import { isProcessAlive, readBootId, readPidNamespace, readProcessStartTime } from '../proc.js';
import {
  LEDGER_TELEMETRY_KEYS,
  type LedgerTelemetry,
  type LedgerTelemetryOptions,
} from '../telemetry.js';
import type {
  AdoptRequest,
  AdoptResult,
  LeaseEvent,
  LeaseInfo,
  LedgerDocument,
  PoolLedger,
  RegisterPoolOptions,
  ReleaseOptions,
  ReservationRow,
  ReserveOptions,
  ReserveResult,
} from '../types.js';
import { FileCycle } from './combining/cycle.js';
import { MACHINE_LEDGER_HOOK_KEYS, type MachineLedgerHooks } from './hooks.js';

export type { MachineLedgerHooks } from './hooks.js';

import type { Inbox } from './combining/waiter.js';
import { DEFAULT_LEDGER_DIR, findLedgerDir, LEDGER_DIR_ENV, resolveLedgerDir } from './dir.js';
import { DirRecovery } from './dir-recovery.js';
import { HeldRows } from './held-rows.js';
import { InstanceFacts } from './instance-facts.js';
import { ledgerIoError } from './io-error.js';
import { type LeaseHolder, leaseBody, leasePath, markClosed } from './lease.js';
import { type ClaimContext, checkAlone, claimLease } from './lease-claim.js';
import { LeaseKeeper } from './lease-keeper.js';
import { PoolLocker } from './lock.js';
import { DEFAULT_MAX_FILE_BYTES } from './safe-fs.js';
import { readPoolFile } from './store.js';
import { sweepLeftovers } from './sweep.js';

/**
 * Options of {@link MachineLedger}.
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
  /** Alias of `dir` (kici's option name). `dir` wins when both are given. */
  explicitDir?: string;
  /**
   * A lock not refreshed for this long is taken over by the next process that
   * wants it (a holder refreshes every `staleMs / 4`). Minimum 2000.
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
   * @default `systemClock` (from `scaler-primitives`)
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

/**
 * A cross-process ledger of reservations against named machine pools, kept in
 * `<dir>/<pool>.json` and shared by every process on the host (including the
 * kici orchestrator, whose file format and lock it uses).
 *
 * Every change happens under the pool's lock: read, reap stale rows, decide,
 * write atomically. Concurrent calls on one pool in this process share one
 * lock/read/write cycle (group commit) and each still gets its own answer, in
 * call order. Reads (`getUsage`, `list`) take no lock: the file is only ever
 * replaced whole.
 *
 * Stalls: rows of this instance that vanish although it did not release them
 * (a peer reaped them while this process was stopped past `leaseTtlMs`, or an
 * operator released them) fail the next `reserve` or `reapStale` on that pool
 * once with `LedgerLeaseExpiredError` naming the agents; later calls proceed.
 *
 * @example
 * ```ts
 * import { MachineLedger } from 'scaler-primitives/ledger';
 *
 * const ledger = new MachineLedger({ instanceId: 'orchestrator-a', dir: '/var/lib/ci/ledger' });
 * ledger.registerPool('build-host', { maxCpu: 16, maxMemoryBytes: 64 * 2 ** 30 });
 * ledger.start();
 * const result = await ledger.reserve('build-host', 'agent-42', 2, 4 * 2 ** 30);
 * if (result.ok) {
 *   // start the agent; when it is gone:
 *   await ledger.release('build-host', 'agent-42');
 * } else {
 *   console.log(`refused: ${result.dimension} ${result.used}/${result.max}`);
 * }
 * await ledger.releaseAllForInstance();
 * await ledger.close();
 * ```
 */
export class MachineLedger implements PoolLedger {
  /** This orchestrator instance's id, written into every row it makes. */
  readonly instanceId: string;
  #leaseId: string;

  readonly #batches = new GroupCommit<LedgerOp, LedgerAnswer>((pool, ops) =>
    this.#parts.run(pool, ops),
  );
  // Per pool, this instance's inbox for combined answers (undefined: the
  // combining directory is not usable, the plain lock is used).
  readonly #inboxes = new Map<string, Inbox | undefined>();
  readonly #parts: LedgerParts;
  readonly #front: LedgerFrontEnd;
  #bootIdValue: string | undefined;
  #dirPromise: Promise<string> | undefined;

  /**
   * @param options - `instanceId` is required; see {@link MachineLedgerOptions}.
   * @throws TypeError when `instanceId` is not a non-empty string or a timing is out of range.
   * @throws InvalidInputError for an unknown option key (the message names the accepted
   *   ones and the nearest), or an `instanceId` longer than 256 characters.
   */
  constructor(options: MachineLedgerOptions) {
    if (typeof options !== 'object' || options === null) {
      throw new TypeError(`Expected \`options\` to be an object, got \`${String(options)}\``);
    }
    checkKnownKeys('MachineLedger options', options, MACHINE_LEDGER_OPTION_KEYS);
    checkInstanceId(options.instanceId);
    this.instanceId = options.instanceId;
    this.#front = new LedgerFrontEnd(options.instanceId, {
      closedMessage: 'This MachineLedger is closed; create a new one',
      clock: () => this.#parts.clock,
      checkPool: validatePoolName,
      ownRow: (agentId, cpus, memBytes) => this.#parts.identity.row(agentId, cpus, memBytes),
      commit: (pool, op) => this.#batches.enqueue(pool, op),
      inspect: (pool) => this.inspect(pool),
    });
    this.#leaseId = randomUUID();
    this.#bootIdValue = options.bootId;
    const telemetry = this.#front.instrument(
      options,
      'file',
      resolveClock(options.clock, options.now),
    );
    const self = this;
    this.#parts = assembleParts(options, {
      instanceId: this.instanceId,
      get leaseId() {
        return self.#leaseId;
      },
      continueLease: (leaseId) => {
        this.#leaseId = leaseId;
      },
      caps: this.#front.caps,
      inboxes: this.#inboxes,
      telemetry,
      dir: () => this.dir(),
      expectedDir: () => this.#expectedDir(),
      bootId: () => this.bootId,
      closed: () => this.#front.closed,
      settleSoon: async (pool) => {
        if (this.#front.closed) return false;
        await this.#front.submit(pool, { kind: 'reap', background: true });
        return true;
      },
    });
  }

  /**
   * This ledger's lease id, written into its rows: `<dir>/<leaseId>.lease` is
   * its lease file. A new random id at construction; the first write (or
   * {@link MachineLedger.openLease}) may switch it, once, to the lease of a
   * dead predecessor with the same `instanceId` that is still within its
   * deadline (a restart continues that lease, so the agents that watch it keep
   * running). Read it (or `lease()`) after the first write, not before.
   */
  get leaseId(): string {
    return this.#leaseId;
  }

  /** The boot id rows are written with and compared against. */
  get bootId(): string {
    this.#bootIdValue ??= readBootId(this.#parts.fs);
    return this.#bootIdValue;
  }

  /**
   * The resolved ledger directory (created on first use).
   *
   * @throws LedgerDirError when the directory is unsafe or cannot be created.
   */
  dir(): Promise<string> {
    this.#dirPromise ??= resolveLedgerDir(
      this.#parts.fs,
      this.#parts.requestedDir,
      this.#parts.env,
    );
    // A failed resolution is retried on the next call.
    this.#dirPromise.catch(() => {
      this.#dirPromise = undefined;
    });
    return this.#dirPromise;
  }

  /**
   * The ledger directory this instance reads, without creating anything:
   * `undefined` when it does not exist yet (nothing to read). Read-only methods
   * (`inspect`, `getUsage`, `list`, `pools`) use it; only a write creates the directory.
   *
   * @throws LedgerDirError when the directory exists and is unsafe.
   */
  async existingDir(): Promise<string | undefined> {
    if (this.#dirPromise) {
      const dir = await this.#dirPromise.catch(() => undefined);
      if (dir !== undefined) return dir;
    }
    return findLedgerDir(this.#parts.fs, this.#parts.requestedDir, this.#parts.env);
  }

  /**
   * Everything about a pool as this instance sees it: live rows, rows it would
   * reap and why, the stored cap. Takes no lock, writes nothing and creates
   * nothing (not even the directory).
   *
   * @throws LedgerCorruptError when the file is bad.
   * @throws LedgerIoError when the pool file cannot be read (an I/O error).
   * @throws LedgerFileError when the pool file is a link, not a regular file, not
   *   ours, writable by others or larger than `maxFileBytes`.
   * @throws LedgerDirError when the directory is unsafe.
   */
  async inspect(pool: string): Promise<PoolSnapshot> {
    validatePoolName(pool);
    const dir = await this.existingDir();
    const file = join(dir ?? this.#expectedDir(), `${pool}.json`);
    let snapshot: PoolSnapshot;
    try {
      snapshot = readSnapshot(this.#parts.fs, pool, dir, file, {
        cap: this.#front.caps.get(pool) ?? {},
        maxBytes: this.#parts.maxFileBytes,
        facts: (at, doc) => this.#parts.identity.facts(at, doc),
      });
    } catch (error) {
      throw ledgerIoError(error, { pool, path: file, mayHaveWritten: false });
    }
    if (dir !== undefined) this.#front.telemetry?.observed(pool, snapshot.cap, snapshot.live);
    return snapshot;
  }

  /**
   * The pools that have a file in the ledger directory, sorted. Creates nothing:
   * no directory, no pools.
   *
   * @throws LedgerDirError when the directory is unsafe.
   */
  async pools(): Promise<string[]> {
    const dir = await this.existingDir();
    if (dir === undefined) return [];
    try {
      return poolNames(await this.#parts.fs.promises.readdir(dir));
    } catch (error) {
      // Removed since it was resolved: nothing to read (the next write makes it again).
      if (hasErrorCode(error, 'ENOENT')) return [];
      throw ledgerIoError(error, { pool: '', path: dir, mayHaveWritten: false });
    }
  }

  /**
   * Declare the cap a pool must have. The first write creates the pool with
   * this cap; a stored pool with another cap is refused with `LedgerCapMismatchError`.
   *
   * @throws InvalidInputError for an invalid pool name.
   * @throws TypeError for a cap field that is not a finite number >= 0.
   */
  registerPool(name: string, cap: ResourceCap, options?: RegisterPoolOptions): void {
    this.#front.registerPool(name, cap, options);
  }

  /**
   * Reserve `cpus` and `memBytes` for `agentId` in `pool`; true when granted.
   *
   * @throws as `reserve`.
   */
  tryReserve(
    pool: string,
    agentId: string,
    cpus: number,
    memBytes: number,
    options?: ReserveOptions,
  ): Promise<boolean> {
    return this.#front.tryReserve(pool, agentId, cpus, memBytes, options);
  }

  /**
   * Reserve `cpus` and `memBytes` for `agentId` in `pool`. Stale rows are left
   * out of the sum (and dropped when the pool is written). A refusal says
   * which dimension did not fit and writes nothing.
   *
   * @throws TypeError when the pool is not registered, an amount is not a finite
   *   number >= 0, or the ledger is closed.
   * @throws DuplicateReservationError when the pool already holds a live row for `agentId`.
   * @throws LedgerCorruptError, LedgerCapMismatchError when the stored pool is bad (it is left as it is).
   * @throws LedgerLeaseExpiredError when rows this instance reserved in `pool` are gone
   *   although it did not release them; `agentIds` names them. This call did nothing;
   *   each loss is reported once, so the next call proceeds.
   * @throws the storage's errors: see the class.
   */
  reserve(
    pool: string,
    agentId: string,
    cpus: number,
    memBytes: number,
    options?: ReserveOptions,
  ): Promise<ReserveResult> {
    return this.#front.reserve(pool, agentId, cpus, memBytes, options);
  }

  /**
   * Take over the rows these agents hold in `pool` under this instance id but
   * another process or lease (this host before a restart), or reserve them
   * again when gone, in one write; see {@link PoolLedger.adopt}.
   *
   * @returns One answer per agent, in order.
   * @throws TypeError or InvalidInputError for bad agents; otherwise as `reserve`.
   */
  adopt(pool: string, agents: readonly AdoptRequest[]): Promise<AdoptResult[]> {
    return this.#front.adopt(pool, agents);
  }

  /**
   * Remove the reservation of `agentId` in `pool` that this instance made
   * (another instance's row answers `false`; `{ anyInstance: true }` and
   * `{ instanceId }` are the operator paths). Idempotent.
   *
   * @returns true when a row was removed.
   * @throws as `reserve`, except the registration, duplicate and lost-lease errors.
   */
  release(pool: string, agentId: string, options?: ReleaseOptions): Promise<boolean> {
    return this.#front.release(pool, agentId, options);
  }

  /**
   * Remove stale rows from `pool` now.
   *
   * @returns The number of rows removed.
   * @throws as `release`, and `LedgerLeaseExpiredError` as `reserve` (the
   *   reaper of `start()` never consumes that report).
   */
  reapStale(pool: string): Promise<number> {
    return this.#front.reapStale(pool);
  }

  /** Summed CPU and memory of `pool`'s live rows (no write). */
  getUsage(pool: string): Promise<ResourceAmount> {
    return this.#front.getUsage(pool);
  }

  /** `pool`'s live rows (no write). */
  list(pool: string): Promise<ReservationRow[]> {
    return this.#front.list(pool);
  }

  /**
   * Reap every registered pool every `intervalMs`. Idempotent; the timer is
   * unref'd and a failed round is retried on the next tick (it never throws).
   *
   * @throws TypeError when `intervalMs` is not a finite number >= 0.
   */
  start(intervalMs?: number): void {
    this.#front.start(intervalMs);
  }

  /** Stop the reaper started by `start`. */
  stop(): void {
    this.#front.stop();
  }

  /** Release every row this instance holds in every registered pool. Best effort per pool. */
  releaseAllForInstance(): Promise<void> {
    return this.#front.releaseAllForInstance();
  }

  /**
   * This instance's own lease as of now: `none` until the first call that
   * writes (or reaps) made it; `held` while the last renewal the filesystem
   * confirmed is less than two thirds of `leaseTtlMs` old; `at-risk` from then
   * until the `deadline` (`confirmedAt + leaseTtlMs`); `lost` after it, until a
   * renewal succeeds again. Peers take this instance's rows only after
   * `deadline + marginMs`. `location` is the lease file, whose mtime an agent
   * can watch.
   */
  lease(): LeaseInfo {
    return this.#parts.lease.info();
  }

  /**
   * Make (or continue) this instance's lease now, without writing a row, and
   * say how it stands. The first write does the same; a restarted host calls
   * this first thing, so that a predecessor's lease its agents watch is
   * renewed as early as possible and a second live process with the same
   * `instanceId` is refused before it does anything.
   *
   * A dead predecessor (a process of this `instanceId` on this host, same boot,
   * whose pid is gone or names a newer process) whose lease is still within its
   * deadline is continued: same `leaseId`, same lease file, renewed from now on
   * by this instance. Past its deadline a new lease is made (the agents have
   * stopped, and peers may take the old rows after the margin).
   *
   * @throws LedgerInstanceInUseError when a live process holds a lease of this
   *   `instanceId` (the message names its pid); nothing was written.
   * @throws LedgerIoError, LedgerUnavailableError or LedgerDirError when the
   *   lease cannot be written.
   */
  async openLease(): Promise<LeaseInfo> {
    this.#front.assertOpen();
    const dir = await this.dir();
    await this.#parts.lease.ensure(dir, '');
    return this.lease();
  }

  /**
   * Call `listener` on every change of this instance's lease: `lease-at-risk`
   * (renewals failed for a third of `leaseTtlMs`), `lease-lost` (the deadline
   * passed), `lease-renewed` (a renewal succeeded again after either). They
   * fire from the ledger's own unref'd timers, at those instants, with the
   * renewal's failure as `error`. Listener errors are caught and ignored.
   *
   * @returns The function that removes the listener.
   * @throws TypeError when `listener` is not a function.
   */
  onLeaseEvent(listener: (event: LeaseEvent) => void): () => void {
    return this.#parts.lease.onEvent(listener);
  }

  /**
   * Stop the timers and end this instance's lease: its file is removed and a
   * closed marker (`<leaseId>.closed`) is left in its place, so any peer, even
   * one that started a moment ago, reaps the rows it leaves behind at once
   * (without the marker, a crash, a peer waits for the lease and its margin),
   * and agents that watch the lease stop at once. Waits for operations in progress.
   */
  async close(): Promise<void> {
    this.#front.markClosed();
    this.#parts.lease.stop();
    await this.#batches.idle();
    for (const inbox of this.#inboxes.values()) inbox?.close();
    this.#inboxes.clear();
    this.#parts.locker.close();
    this.#parts.held.clear();
    if (this.#parts.lease.started()) {
      const dir = await this.dir().catch(() => undefined);
      const file = dir === undefined ? undefined : leasePath(dir, this.leaseId);
      if (dir !== undefined && file) {
        const { fs } = this.#parts;
        // Removed first: a marker beside a lease file still fresh would let
        // peers take rows whose agents still see a lease.
        const removed = await fs.promises.unlink(file).then(
          () => true,
          (error: unknown) => hasErrorCode(error, 'ENOENT'),
        );
        if (removed) markClosed(fs, dir, this.leaseId, this.#parts.leaseBody());
      }
    }
  }

  // Where the directory would be, for naming a file that does not exist.
  #expectedDir(): string {
    return this.#parts.requestedDir ?? (this.#parts.env[LEDGER_DIR_ENV] || DEFAULT_LEDGER_DIR);
  }
}

/** What the parts need from the ledger they make up. */
export interface PartsOwner {
  readonly instanceId: string;
  /** The lease id (read each time: a claim may switch it once). */
  readonly leaseId: string;
  /** Switch to a continued predecessor's lease id (before its first row). */
  continueLease(leaseId: string): void;
  readonly caps: ReadonlyMap<string, ResourceCap>;
  readonly inboxes: Map<string, Inbox | undefined>;
  readonly telemetry: LedgerTelemetry | undefined;
  dir(): Promise<string>;
  /** The directory the ledger would use, before it is resolved (for naming the lease file). */
  expectedDir(): string;
  bootId(): string;
  closed(): boolean;
  /** Queue a background reap of `pool` (false once closed; see `CycleHost.settleSoon`). */
  settleSoon(pool: string): Promise<boolean>;
}

/** A MachineLedger's parts. */
export interface LedgerParts {
  fs: LedgerFs;
  clock: Clock;
  maxFileBytes: number;
  requestedDir: string | undefined;
  env: NodeJS.ProcessEnv;
  held: HeldRows;
  identity: InstanceFacts;
  lease: LeaseKeeper;
  /** The body of this instance's lease file (and closed marker). */
  leaseBody(): string;
  locker: PoolLocker;
  cycles: FileCycle;
  /**
   * Run a batch on a pool (cross-process combining on): a ledger directory
   * found removed after a failure is made again and the batch run once more.
   */
  run(pool: string, ops: LedgerOp[]): Promise<OpAnswer[]>;
}

/**
 * Check the timings of `options`, apply the defaults and make the parts.
 *
 * @throws TypeError when a timing is out of range.
 */
export function assembleParts(options: MachineLedgerOptions, owner: PartsOwner): LedgerParts {
  const { instanceId } = owner;
  const fs = options.fs ?? defaultFs;
  const clock = resolveClock(options.clock, options.now);
  const now = () => clock.now();
  const staleMs = Math.max(2000, positiveOption('staleMs', options.staleMs, DEFAULT_STALE_MS));
  const lockTimeoutMs = positiveOption(
    'lockTimeoutMs',
    options.lockTimeoutMs,
    DEFAULT_LOCK_TIMEOUT_MS,
  );
  const leaseTtlMs = positiveOption('leaseTtlMs', options.leaseTtlMs, DEFAULT_LEASE_TTL_MS);
  const maxFileBytes = Math.floor(
    positiveOption('maxFileBytes', options.maxFileBytes, DEFAULT_MAX_FILE_BYTES),
  );
  const hooks = testHooksOf<MachineLedgerHooks>(options);
  checkKnownKeys('MachineLedger hooks', hooks, MACHINE_LEDGER_HOOK_KEYS);
  const leaseMarginMs = leaseMarginOption(options.leaseMarginMs, leaseTtlMs);
  const held = new HeldRows(instanceId, () => owner.leaseId, leaseTtlMs);
  const probe = options.isProcessAlive ?? isProcessAlive;
  const startTimeOf = options.processStartTime ?? ((pid: number) => readProcessStartTime(fs, pid));
  let own: { start: number | undefined; ns: string | undefined } | undefined;
  const self = (): LeaseHolder => {
    own ??= { start: startTimeOf(process.pid), ns: readPidNamespace(fs) };
    const holder: LeaseHolder = { instanceId, pid: process.pid, bootId: owner.bootId() };
    if (own.start !== undefined) holder.pidStartTime = own.start;
    if (own.ns !== undefined) holder.pidNs = own.ns;
    return holder;
  };
  const leaseBodyText = () => leaseBody(self());
  const claimContext = (dir: string, pool: string): ClaimContext => ({
    fs,
    dir,
    pool,
    self: self(),
    leaseTtlMs,
    marginMs: leaseMarginMs,
    now,
    probe,
    startTimeOf,
  });
  const lease = new LeaseKeeper({
    fs,
    clock,
    get leaseId() {
      return owner.leaseId;
    },
    leaseTtlMs,
    marginMs: leaseMarginMs,
    telemetry: owner.telemetry,
    // With an injected clock (a TestClock driving a fleet), stalls are in its time too.
    monotonic: hooks.monotonic ?? (options.clock === undefined ? monotonicNow : () => clock.now()),
    body: leaseBodyText,
    claim: (dir, pool) => {
      const claimed = claimLease(claimContext(dir, pool));
      if (claimed.kind === 'new') return false;
      owner.continueLease(claimed.leaseId);
      return true;
    },
    checkAlone: (dir, pool) => checkAlone(claimContext(dir, pool), owner.leaseId),
    closed: owner.closed,
    expectedDir: owner.expectedDir,
  });
  const healthySince = () => lease.healthySince();
  const identity = new InstanceFacts({
    fs,
    instanceId,
    get leaseId() {
      return owner.leaseId;
    },
    leaseTtlMs,
    leaseMarginMs,
    healthySince,
    now,
    bootId: owner.bootId,
    probe,
    startTimeOf,
  });
  const locker = new PoolLocker(fs, clock);
  const cycles = new FileCycle({
    fs,
    locker,
    caps: owner.caps,
    held,
    inboxes: owner.inboxes,
    telemetry: owner.telemetry,
    hooks,
    instanceId,
    get leaseId() {
      return owner.leaseId;
    },
    fsync: options.fsync ?? true,
    maxFileBytes,
    staleMs,
    lockStaleMs: hooks.lockStaleMs ?? staleMs,
    lockTimeoutMs,
    dir: owner.dir,
    ensureLease: (dir, pool) => lease.ensure(dir, pool),
    confirmLease: (dir, pool) => lease.confirm(dir, pool),
    facts: (dir, doc) => identity.facts(dir, doc),
    sweepLeftovers: (dir, file) =>
      sweepLeftovers(fs, dir, file, {
        leaseId: owner.leaseId,
        staleMs,
        leaseTtlMs,
        healthySince,
        now,
      }),
    settleSoon: owner.settleSoon,
  });
  const recovery = new DirRecovery({
    fs,
    lease,
    locker,
    inboxes: owner.inboxes,
    dir: owner.dir,
    closed: owner.closed,
  });
  const run = async (pool: string, ops: LedgerOp[]): Promise<OpAnswer[]> => {
    const generation = recovery.generation;
    try {
      return await cycles.run(pool, ops, true);
    } catch (error) {
      if (!(await recovery.recovered(pool, generation))) throw error;
      return cycles.run(pool, ops, true);
    }
  };
  return {
    fs,
    clock,
    maxFileBytes,
    requestedDir: options.dir ?? options.explicitDir,
    env: options.env ?? process.env,
    held,
    identity,
    lease,
    leaseBody: leaseBodyText,
    locker,
    cycles,
    run,
  };
}

/**
 * Read `pool` without a lock (the file is only ever replaced whole): its live
 * and stale rows, cap and usage. `dir` undefined: the directory does not exist,
 * the pool has no rows and the given cap.
 */
export function readSnapshot(
  fs: LedgerFs,
  pool: string,
  dir: string | undefined,
  file: string,
  options: {
    cap: ResourceCap;
    maxBytes: number;
    facts: (dir: string, doc: LedgerDocument) => LivenessFacts;
  },
): PoolSnapshot {
  const text =
    dir === undefined ? undefined : readPoolFile(fs, file, { pool, maxBytes: options.maxBytes });
  const doc =
    text === undefined ? emptyDocument(options.cap) : parseDocument(text, { pool, location: file });
  const { live, stale } =
    dir === undefined
      ? { live: [], stale: [] }
      : partitionRows(doc.reservations, options.facts(dir, doc));
  return {
    pool,
    file,
    exists: text !== undefined,
    cap: doc.cap,
    live,
    stale,
    usage: sumRows(live),
  };
}

/** The pools among the names in a ledger directory (`<pool>.json`, valid names), sorted. */
export function poolNames(names: readonly string[]): string[] {
  return names
    .filter((name) => name.endsWith('.json') && !name.startsWith('.'))
    .map((name) => name.slice(0, -'.json'.length))
    .filter((name) => {
      try {
        validatePoolName(name);
        return true;
      } catch {
        return false;
      }
    })
    .sort();
}
