/**
 * MachineLedger: the file-backed PoolLedger shared with the kici orchestrator.
 */
import { randomUUID } from 'node:crypto';
import { basename, join } from 'node:path';
import { type Clock, type ClockTimer, monotonicNow, resolveClock, systemClock } from '../clock.js';
import { LedgerLeaseExpiredError } from '../errors.js';
import { testHooksOf } from '../internal/test-hooks.js';
import type { ResourceAmount, ResourceCap } from '../resources/types.js';
import {
  checkAdopt,
  checkAgentId,
  checkInstanceId,
  checkKnownKeys,
  checkReserve,
  checkReserveOptions,
  positiveOption,
  registeredCap,
} from './checks.js';
import { DEFAULT_LEDGER_DIR, findLedgerDir, LEDGER_DIR_ENV, resolveLedgerDir } from './dir.js';
import {
  assertCap,
  type DocumentSource,
  emptyDocument,
  type LeaseState,
  type LivenessFacts,
  type ProcessState,
  parseDocument,
  partitionRows,
  type StaleRow,
  serializeDocument,
  sumRows,
  validatePoolName,
} from './document.js';
import { defaultFs, type LedgerFs } from './fs.js';
import { GroupCommit, type OpAnswer } from './group-commit.js';
import { leasePath, leaseState, touchLease } from './lease.js';
import { PoolLocker } from './lock.js';
import { MACHINE_LEDGER_HOOK_KEYS, type MachineLedgerHooks } from './machine-ledger-hooks.js';
import { applyBatch, type LedgerOp, releaseOp } from './ops.js';
import { isProcessAlive, readBootId, readProcessStartTime } from './proc.js';
import { DEFAULT_REAP_INTERVAL_MS, Reaper } from './reaper.js';
import { DEFAULT_MAX_FILE_BYTES } from './safe-fs.js';
import { checkWriteSize, readPoolFile, syncDir, tempPrefix } from './store.js';
import { isMovedLockName, removeTree } from './takeover.js';
import {
  createLedgerTelemetry,
  LEDGER_TELEMETRY_KEYS,
  type LedgerTelemetryOptions,
} from './telemetry.js';
import type {
  AdoptRequest,
  AdoptResult,
  LedgerDocument,
  PoolLedger,
  RegisterPoolOptions,
  ReleaseOptions,
  ReservationRow,
  ReserveOptions,
  ReserveResult,
} from './types.js';

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
   * A peer whose lease has not been refreshed for this long is gone, and its
   * rows are reaped. The lease is refreshed every `leaseTtlMs / 3`.
   * @default 30000
   */
  leaseTtlMs?: number;
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

// Every key of MachineLedgerOptions: any other key is refused (a typo must not
// silently fall back to a default).
const OPTION_KEYS = [
  'instanceId',
  'dir',
  'explicitDir',
  'staleMs',
  'lockTimeoutMs',
  'leaseTtlMs',
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

const DEFAULT_STALE_MS = 10_000;
const DEFAULT_LOCK_TIMEOUT_MS = 15_000;
const DEFAULT_LEASE_TTL_MS = 30_000;

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
 *   console.log(`no room: ${result.dimension} ${result.used}/${result.max}`);
 * }
 * await ledger.releaseAllForInstance();
 * await ledger.close();
 * ```
 */
export class MachineLedger implements PoolLedger {
  /** This instance's id. */
  readonly instanceId: string;
  /** This ledger's lease id, written into its rows. */
  readonly leaseId: string;

  readonly #fs: LedgerFs;
  readonly #locker: PoolLocker;
  readonly #caps = new Map<string, ResourceCap>();
  readonly #batches = new GroupCommit<LedgerOp>((pool, ops) => this.#commit(pool, ops));
  // The reaper's rounds are not the caller's operations: they never report a
  // lost lease (the report waits for the next call the caller makes).
  readonly #reaper = new Reaper(
    () => this.#caps.keys(),
    (pool) => this.#enqueue(pool, { kind: 'reap', background: true }),
    () => this.#clock,
  );
  // Per pool, the agents this instance reserved and has not released.
  readonly #held = new Map<string, Set<string>>();
  readonly #clock: Clock;
  readonly #now: () => number;
  readonly #probe: (pid: number) => boolean;
  readonly #startTimeOf: (pid: number) => number | undefined;
  readonly #staleMs: number;
  readonly #lockStaleMs: number;
  readonly #lockTimeoutMs: number;
  readonly #leaseTtlMs: number;
  readonly #fsync: boolean;
  readonly #maxFileBytes: number;
  readonly #requestedDir: string | undefined;
  readonly #env: NodeJS.ProcessEnv;
  readonly #hooks: Partial<MachineLedgerHooks>;
  #bootIdValue: string | undefined;
  #ownStartTime: number | undefined;
  #dirPromise: Promise<string> | undefined;
  #leaseReady: Promise<void> | undefined;
  #leaseTimer: ClockTimer | undefined;
  #leaseRefreshedAt = Number.NEGATIVE_INFINITY;
  readonly #monotonic: () => number;
  #closed = false;
  readonly #telemetry;

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
    checkKnownKeys('MachineLedger options', options, OPTION_KEYS);
    checkInstanceId(options.instanceId);
    this.instanceId = options.instanceId;
    this.leaseId = randomUUID();
    this.#fs = options.fs ?? defaultFs;
    this.#locker = new PoolLocker(this.#fs);
    this.#clock = resolveClock(options.clock, options.now);
    this.#now = () => this.#clock.now();
    this.#probe = options.isProcessAlive ?? isProcessAlive;
    this.#startTimeOf = options.processStartTime ?? ((pid) => readProcessStartTime(this.#fs, pid));
    this.#staleMs = Math.max(2000, positiveOption('staleMs', options.staleMs, DEFAULT_STALE_MS));
    this.#lockTimeoutMs = positiveOption(
      'lockTimeoutMs',
      options.lockTimeoutMs,
      DEFAULT_LOCK_TIMEOUT_MS,
    );
    this.#leaseTtlMs = positiveOption('leaseTtlMs', options.leaseTtlMs, DEFAULT_LEASE_TTL_MS);
    this.#fsync = options.fsync ?? true;
    this.#maxFileBytes = Math.floor(
      positiveOption('maxFileBytes', options.maxFileBytes, DEFAULT_MAX_FILE_BYTES),
    );
    this.#requestedDir = options.dir ?? options.explicitDir;
    this.#env = options.env ?? process.env;
    this.#hooks = testHooksOf<MachineLedgerHooks>(options);
    checkKnownKeys('MachineLedger hooks', this.#hooks, MACHINE_LEDGER_HOOK_KEYS);
    this.#monotonic = this.#hooks.monotonic ?? monotonicNow;
    this.#lockStaleMs = this.#hooks.lockStaleMs ?? this.#staleMs;
    this.#bootIdValue = options.bootId;
    this.#telemetry = createLedgerTelemetry(options, 'file', {
      clock: this.#clock,
      pools: () => this.#caps.keys(),
      read: (pool) => this.inspect(pool),
    });
  }

  /** The boot id rows are written with and compared against. */
  get bootId(): string {
    this.#bootIdValue ??= readBootId(this.#fs);
    return this.#bootIdValue;
  }

  /**
   * The resolved ledger directory (created on first use).
   *
   * @throws LedgerDirError when the directory is unsafe or cannot be created.
   */
  dir(): Promise<string> {
    this.#dirPromise ??= resolveLedgerDir(this.#fs, this.#requestedDir, this.#env);
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
    return findLedgerDir(this.#fs, this.#requestedDir, this.#env);
  }

  /**
   * Declare the cap a pool must have. The first write creates the file with this
   * cap; a file with another cap is refused with `LedgerCapMismatchError`.
   *
   * @throws InvalidInputError for an invalid pool name.
   * @throws TypeError for a cap field that is not a finite number >= 0.
   */
  registerPool(name: string, cap: ResourceCap, options?: RegisterPoolOptions): void {
    const pool = validatePoolName(name);
    this.#caps.set(pool, registeredCap(pool, cap, options));
  }

  /**
   * Reserve `cpus` and `memBytes` for `agentId` in `pool`; true when granted.
   * A refusal writes nothing.
   *
   * @throws see {@link MachineLedger.reserve}.
   */
  async tryReserve(
    pool: string,
    agentId: string,
    cpus: number,
    memBytes: number,
    options?: ReserveOptions,
  ): Promise<boolean> {
    return (await this.reserve(pool, agentId, cpus, memBytes, options)).ok;
  }

  /**
   * Reserve `cpus` and `memBytes` for `agentId` in `pool`. Stale rows are left
   * out of the sum (and removed when the file is written). A refusal says which
   * dimension did not fit and writes nothing.
   *
   * @throws TypeError when the pool is not registered or an amount is not a finite number >= 0.
   * @throws DuplicateReservationError when the pool already holds a live row for `agentId`.
   * @throws LedgerCorruptError, LedgerCapMismatchError when the file is bad (it is left as it is).
   * @throws LedgerBusyError when the lock could not be taken before `lockTimeoutMs`.
   * @throws LedgerLockCompromisedError when the lock was lost before the write (nothing written).
   * @throws LedgerDirError when the directory is unsafe.
   * @throws LedgerLeaseExpiredError when rows this instance reserved in `pool` are gone
   *   although it did not release them (a peer reaped them while this process was stalled
   *   past `leaseTtlMs`, or an operator released them). Its `agentIds` name them: treat
   *   their capacity as lost and stop or re-reserve those agents. This call did nothing;
   *   each loss is reported once, so the next call proceeds.
   */
  async reserve(
    pool: string,
    agentId: string,
    cpus: number,
    memBytes: number,
    options?: ReserveOptions,
  ): Promise<ReserveResult> {
    validatePoolName(pool);
    checkReserve(this.#caps, pool, agentId, cpus, memBytes);
    const extended = checkReserveOptions(options);
    const row = this.#row(agentId, cpus, memBytes);
    if (extended !== undefined) row.extended = extended;
    return (await this.#enqueue(pool, { kind: 'reserve', row })) as ReserveResult;
  }

  /**
   * Take over the rows these agents hold in `pool` under this instance id but
   * another process (this host before a restart), or reserve them again when
   * gone; see {@link PoolLedger.adopt}. One locked write for all of them.
   *
   * @returns One answer per agent, in order.
   * @throws TypeError or InvalidInputError for bad agents; otherwise as {@link MachineLedger.reserve}.
   */
  async adopt(pool: string, agents: readonly AdoptRequest[]): Promise<AdoptResult[]> {
    validatePoolName(pool);
    const rows = checkAdopt(this.#caps, pool, agents).map(
      ({ agentId, cpus, memBytes, extended }) => {
        const row = this.#row(agentId, cpus, memBytes);
        if (extended !== undefined) row.extended = extended;
        return row;
      },
    );
    return (await this.#enqueue(pool, { kind: 'adopt', rows })) as AdoptResult[];
  }

  /**
   * Remove the reservation of `agentId` in `pool` that this instance made
   * (another instance's row answers `false`; see {@link PoolLedger.release} for
   * the operator paths `anyInstance` and `instanceId`). Idempotent.
   *
   * @returns true when a row was removed.
   * @throws as {@link MachineLedger.reserve} (except the duplicate and registration errors,
   *   and `LedgerLeaseExpiredError`: a release never carries that report, it waits for the
   *   next `reserve` or `reapStale` on the pool).
   */
  async release(pool: string, agentId: string, options?: ReleaseOptions): Promise<boolean> {
    validatePoolName(pool);
    checkAgentId(agentId);
    return (await this.#enqueue(pool, releaseOp(agentId, this.instanceId, options))) as boolean;
  }

  /**
   * Remove stale rows from `pool` now.
   *
   * @returns The number of rows removed.
   * @throws as {@link MachineLedger.release}, and `LedgerLeaseExpiredError` as
   *   {@link MachineLedger.reserve} (the periodic reaper of `start()` never consumes that report).
   */
  async reapStale(pool: string): Promise<number> {
    validatePoolName(pool);
    return (await this.#enqueue(pool, { kind: 'reap' })) as number;
  }

  /** Summed CPU and memory of `pool`'s live rows (no lock, no write). */
  async getUsage(pool: string): Promise<ResourceAmount> {
    return (await this.inspect(pool)).usage;
  }

  /** `pool`'s live rows (no lock, no write). */
  async list(pool: string): Promise<ReservationRow[]> {
    return (await this.inspect(pool)).live;
  }

  /**
   * Everything about a pool as this instance sees it: live rows, rows it would
   * reap and why, the stored cap. Takes no lock, writes nothing and creates
   * nothing (not even the directory).
   *
   * @throws LedgerCorruptError when the file is bad.
   * @throws LedgerFileError when the pool file is a link, not a regular file, not
   *   ours, writable by others or larger than `maxFileBytes`.
   * @throws LedgerDirError when the directory is unsafe.
   */
  async inspect(pool: string): Promise<PoolSnapshot> {
    validatePoolName(pool);
    const dir = await this.existingDir();
    const file = join(dir ?? this.#expectedDir(), `${pool}.json`);
    const text =
      dir === undefined
        ? undefined
        : readPoolFile(this.#fs, file, { pool, maxBytes: this.#maxFileBytes });
    const doc =
      text === undefined
        ? emptyDocument(this.#caps.get(pool) ?? {})
        : parseDocument(text, { pool, location: file });
    const { live, stale } =
      dir === undefined
        ? { live: [], stale: [] }
        : partitionRows(doc.reservations, this.#facts(dir, doc));
    if (dir !== undefined) this.#telemetry?.observed(pool, doc.cap, live);
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

  // Where the directory would be, for naming a file that does not exist.
  #expectedDir(): string {
    return this.#requestedDir ?? (this.#env[LEDGER_DIR_ENV] || DEFAULT_LEDGER_DIR);
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
    const names = await this.#fs.promises.readdir(dir);
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

  /**
   * Start reaping every registered pool every `intervalMs`. Idempotent; the timer
   * is unref'd and a failed round is retried on the next tick.
   */
  start(intervalMs = DEFAULT_REAP_INTERVAL_MS): void {
    this.#reaper.start(intervalMs);
  }

  /** Stop the reaper started by {@link MachineLedger.start}. */
  stop(): void {
    this.#reaper.stop();
  }

  /** Release every row this instance holds in every registered pool. Best effort per pool. */
  async releaseAllForInstance(): Promise<void> {
    await Promise.allSettled(
      [...this.#caps.keys()].map((pool) =>
        this.#enqueue(pool, { kind: 'releaseInstance', instanceId: this.instanceId }),
      ),
    );
  }

  /**
   * Stop the timers and end this instance's lease (its file is removed), so
   * peers reap rows it leaves behind. Waits for operations in progress.
   */
  async close(): Promise<void> {
    this.#closed = true;
    this.#reaper.close();
    this.#telemetry?.close();
    this.#clock.clearInterval(this.#leaseTimer);
    this.#leaseTimer = undefined;
    await this.#batches.idle();
    this.#held.clear();
    if (this.#leaseReady) {
      const dir = await this.dir().catch(() => undefined);
      const file = dir === undefined ? undefined : leasePath(dir, this.leaseId);
      if (file) await this.#fs.promises.unlink(file).catch(() => {});
    }
  }

  #enqueue(pool: string, op: LedgerOp): Promise<unknown> {
    if (this.#closed) {
      return Promise.reject(new TypeError('This MachineLedger is closed; create a new one'));
    }
    return (
      this.#telemetry?.op(pool, op, this.#batches.enqueue(pool, op)) ??
      this.#batches.enqueue(pool, op)
    );
  }

  // One lock/read/write cycle per batch of queued calls.
  async #commit(pool: string, ops: LedgerOp[]): Promise<OpAnswer[]> {
    const dir = await this.dir();
    await this.#ensureLease(dir);
    const file = join(dir, `${pool}.json`);
    const source: DocumentSource = { pool, location: file };
    const registered = this.#caps.get(pool);
    const waitStart = this.#telemetry?.lockWaitStart();
    const handle = await this.#locker.acquire(pool, join(dir, `${pool}.lock`), {
      staleMs: this.#lockStaleMs,
      timeoutMs: this.#lockTimeoutMs,
    });
    const lockedAt = this.#telemetry?.lockAcquired(pool, waitStart, ops);
    let answers: OpAnswer[];
    let wrote = false;
    try {
      const text = readPoolFile(this.#fs, file, { pool, maxBytes: this.#maxFileBytes });
      const doc = text === undefined ? undefined : parseDocument(text, source);
      if (doc && registered) assertCap(doc, registered, source);
      const base = doc ?? emptyDocument(registered ?? {});
      const lost = this.#lostReport(pool, file, base, ops);
      const partition = partitionRows(base.reservations, this.#facts(dir, base));
      const applied = lost ? ops.filter((_, i) => i !== lost.index) : ops;
      const outcome = applyBatch(pool, base, partition, applied);
      answers = outcome.answers;
      if (lost) answers.splice(lost.index, 0, { ok: false, error: lost.error });
      // Refusals, no-op releases and reads never rewrite the file; a file that
      // does not exist yet is created only by a change.
      if (outcome.dirty) {
        await this.#hooks.beforeCommit?.(pool);
        const text = serializeDocument(outcome.doc);
        checkWriteSize(file, text, { pool, maxBytes: this.#maxFileBytes });
        // Fenced: the temp file sits in our token directory inside the lock, so
        // a holder whose lock was taken over cannot rename it into place.
        await handle.write(file, text, { fsync: this.#fsync });
        wrote = true;
      }
      if (lost) for (const agentId of lost.error.agentIds) this.#held.get(pool)?.delete(agentId);
      this.#track(pool, ops, answers);
      this.#telemetry?.committed(
        pool,
        outcome.doc.cap,
        outcome.doc.reservations,
        wrote ? partition.stale : [],
      );
      if (ops.some((op) => op.kind === 'reap')) this.#sweepLeftovers(dir, file);
    } finally {
      await handle.release();
      this.#telemetry?.lockReleased(pool, lockedAt);
    }
    // The rename is visible to every process already; making it survive a power
    // loss does not need the lock, so the directory fsync runs after the release
    // (callers still hear back only once it is durable).
    if (wrote && this.#fsync) await syncDir(this.#fs, dir);
    return answers;
  }

  // Under the pool lock: remove temp files that writers of this pool left when
  // they were killed (older than the stale window, so no live writer owns
  // them), and lease files expired for ten lease windows. Best effort.
  #sweepLeftovers(dir: string, file: string): void {
    // Temp files carry real mtimes: their age is judged on the system clock.
    const now = systemClock.now();
    const prefix = tempPrefix(file);
    let names: string[];
    try {
      names = this.#fs.readdirSync(dir);
    } catch {
      return;
    }
    const lockName = `${basename(file, '.json')}.lock`;
    for (const name of names) {
      if (isMovedLockName(name, lockName)) {
        // A taker that died before removing the lock it moved away.
        try {
          if (now - this.#fs.lstatSync(join(dir, name)).mtimeMs > this.#staleMs) {
            removeTree(this.#fs, join(dir, name));
          }
        } catch {
          // Gone already.
        }
        continue;
      }
      const temp = name.startsWith(prefix) && name.endsWith('.tmp');
      const lease = name.endsWith('.lease') && name !== `${this.leaseId}.lease`;
      if (!temp && !lease) continue;
      const path = join(dir, name);
      try {
        // lstat: a link is judged (and removed) as itself, never by its target.
        const stat = this.#fs.lstatSync(path);
        if (!stat.isFile() && !stat.isSymbolicLink()) continue;
        const age = (lease ? this.#now() : now) - stat.mtimeMs;
        if (temp ? age > this.#staleMs : age > 10 * this.#leaseTtlMs) this.#fs.unlinkSync(path);
      } catch {
        // Gone already, or not ours to remove.
      }
    }
  }

  // Under the pool lock, before deciding: the agents this instance holds whose
  // row is gone from the document although this process did not release them
  // (a peer reaped them while this instance was stalled past its lease, or an
  // operator removed them). The report goes to the batch's first reserve or
  // reapStale call, which fails and does nothing; the other calls proceed, and
  // once the batch is written the lost agents are forgotten. Releases never
  // carry the report (failing one would strand a row), and neither do the
  // reaper's rounds: without such a call the report waits for the next batch.
  #lostReport(
    pool: string,
    file: string,
    doc: LedgerDocument,
    ops: LedgerOp[],
  ): { index: number; error: LedgerLeaseExpiredError } | undefined {
    const held = this.#held.get(pool);
    if (!held || held.size === 0) return undefined;
    const index = ops.findIndex(
      (op) => op.kind === 'reserve' || (op.kind === 'reap' && !op.background),
    );
    if (index < 0) return undefined;
    // A row this batch releases anyway is no loss the caller needs to hear of.
    if (ops.some((op) => op.kind === 'releaseInstance' && op.instanceId === this.instanceId)) {
      return undefined;
    }
    const releasing = new Set(ops.flatMap((op) => (op.kind === 'release' ? [op.agentId] : [])));
    const present = new Set(
      doc.reservations
        .filter(
          (row) =>
            row.instanceId === this.instanceId && (row.leaseId ?? this.leaseId) === this.leaseId,
        )
        .map((row) => row.agentId),
    );
    const lost = [...held].filter((agentId) => !present.has(agentId) && !releasing.has(agentId));
    if (lost.length === 0) return undefined;
    const one = lost.length === 1;
    const names = lost.map((agentId) => JSON.stringify(agentId)).join(', ');
    const error = new LedgerLeaseExpiredError(
      pool,
      `Instance ${JSON.stringify(this.instanceId)} lost its reservation${one ? '' : 's'} for ${names} in pool ${JSON.stringify(pool)} (${file}): ${one ? 'the row is' : 'the rows are'} gone although this process did not release ${one ? 'it' : 'them'}. Either this process was stalled (stopped, or its event loop blocked) for longer than leaseTtlMs (${this.#leaseTtlMs} ms) and a peer reaped its rows, or an operator released them. Treat that capacity as lost: stop those agents, or reserve them again. This call did nothing; the next call proceeds.`,
      lost,
    );
    return { index, error };
  }

  // After a successful cycle: remember what this instance now holds.
  #track(pool: string, ops: LedgerOp[], answers: OpAnswer[]): void {
    let held = this.#held.get(pool);
    ops.forEach((op, i) => {
      const answer = answers[i];
      if (!answer?.ok) return;
      if (op.kind === 'adopt') {
        (answer.value as AdoptResult[]).forEach((result, j) => {
          if (!result.ok) return;
          if (!held) {
            held = new Set();
            this.#held.set(pool, held);
          }
          held.add(op.rows[j]!.agentId);
        });
      } else if (op.kind === 'reserve' && (answer.value as ReserveResult).ok) {
        if (!held) {
          held = new Set();
          this.#held.set(pool, held);
        }
        held.add(op.row.agentId);
      } else if (op.kind === 'release') {
        held?.delete(op.agentId);
      } else if (op.kind === 'releaseInstance' && op.instanceId === this.instanceId) {
        held?.clear();
      }
    });
  }

  #row(agentId: string, cpus: number, memBytes: number): ReservationRow {
    const row: ReservationRow = {
      instanceId: this.instanceId,
      pid: process.pid,
      bootId: this.bootId,
      agentId,
      cpus,
      memBytes,
      reservedAt: this.#now(),
    };
    const start = this.#selfStartTime();
    if (start !== undefined) row.pidStartTime = start;
    row.leaseId = this.leaseId;
    return row;
  }

  #selfStartTime(): number | undefined {
    this.#ownStartTime ??= this.#startTimeOf(process.pid);
    return this.#ownStartTime;
  }

  // Gather the liveness facts the pure rule needs, one probe per pid and lease.
  #facts(dir: string, doc: LedgerDocument): LivenessFacts {
    const bootId = this.bootId;
    const leases = new Map<string, LeaseState>();
    const processes = new Map<string, ProcessState>();
    const now = this.#now();
    for (const row of doc.reservations) {
      if (row.bootId !== bootId) continue;
      if (row.instanceId === this.instanceId) {
        const key = `${row.pid}:${row.pidStartTime ?? ''}`;
        if (!processes.has(key)) processes.set(key, this.#processStateOf(row));
      } else if (typeof row.leaseId === 'string' && !leases.has(row.leaseId)) {
        leases.set(
          row.leaseId,
          row.leaseId === this.leaseId
            ? 'fresh'
            : leaseState(this.#fs, dir, row.leaseId, now, this.#leaseTtlMs),
        );
      }
    }
    return {
      bootId,
      instanceId: this.instanceId,
      processState: (row) => processes.get(`${row.pid}:${row.pidStartTime ?? ''}`) ?? 'alive',
      leaseState: (leaseId) => leases.get(leaseId) ?? 'unknown',
    };
  }

  #processStateOf(row: ReservationRow): ProcessState {
    if (row.pid === process.pid) {
      const own = this.#selfStartTime();
      if (row.pidStartTime === undefined || own === undefined || row.pidStartTime === own) {
        return 'alive';
      }
      return 'reused';
    }
    if (!this.#probe(row.pid)) return 'gone';
    if (row.pidStartTime === undefined) return 'alive';
    const start = this.#startTimeOf(row.pid);
    return start === undefined || start === row.pidStartTime ? 'alive' : 'reused';
  }

  // The lease exists before the first row that names it is written, and is
  // refreshed every third of its window by an unref'd timer. A refresh older
  // than half the window (measured on the monotonic clock) means this process
  // stalled: the lease is refreshed before acting, so rows written now are not
  // judged by a lease that looks expired. Only a refresh: whether rows were
  // lost is decided from the document (see checkHeld), never from the stall.
  async #ensureLease(dir: string): Promise<void> {
    const file = leasePath(dir, this.leaseId)!;
    const body = `${JSON.stringify({ instanceId: this.instanceId, pid: process.pid, bootId: this.bootId })}\n`;
    const refresh = async () => {
      const started = this.#monotonic();
      await touchLease(this.#fs, file, this.#now(), body);
      this.#leaseRefreshedAt = Math.max(this.#leaseRefreshedAt, started);
    };
    if (!this.#leaseReady) {
      const ready = refresh().then(() => {
        if (this.#closed) return;
        this.#leaseTimer = this.#clock.setInterval(
          () => {
            refresh().catch(() => {});
          },
          Math.max(100, Math.floor(this.#leaseTtlMs / 3)),
        );
        this.#leaseTimer.unref();
      });
      this.#leaseReady = ready;
      ready.catch(() => {
        if (this.#leaseReady === ready) this.#leaseReady = undefined;
      });
      return ready;
    }
    await this.#leaseReady;
    if (this.#monotonic() - this.#leaseRefreshedAt > this.#leaseTtlMs / 2) await refresh();
  }
}
