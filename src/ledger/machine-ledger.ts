/**
 * MachineLedger: the file-backed PoolLedger shared with the kici orchestrator.
 * This file is its public face; the locked cycle (with cross-process
 * combining) is `file-cycle.ts`, the options `machine-ledger-options.ts`.
 */
import { randomUUID } from 'node:crypto';
import { join } from 'node:path';
import { resolveClock } from '../clock.js';
import type { ResourceAmount, ResourceCap } from '../resources/types.js';
import {
  checkAdopt,
  checkAgentId,
  checkInstanceId,
  checkKnownKeys,
  checkReserve,
  checkReserveOptions,
  registeredCap,
} from './checks.js';
import type { Inbox } from './combine-waiter.js';
import { DEFAULT_LEDGER_DIR, findLedgerDir, LEDGER_DIR_ENV, resolveLedgerDir } from './dir.js';
import { validatePoolName } from './document.js';
import { hasErrorCode } from './fs.js';
import { GroupCommit } from './group-commit.js';
import { ledgerIoError } from './io-error.js';
import { leasePath } from './lease.js';
import {
  MACHINE_LEDGER_OPTION_KEYS,
  type MachineLedgerOptions,
  type PoolSnapshot,
} from './machine-ledger-options.js';
import {
  assembleParts,
  type LedgerParts,
  poolNames,
  readSnapshot,
} from './machine-ledger-parts.js';
import { type LedgerOp, releaseOp } from './ops.js';
import { readBootId } from './proc.js';
import { DEFAULT_REAP_INTERVAL_MS, Reaper } from './reaper.js';
import { createLedgerTelemetry } from './telemetry.js';
import type {
  AdoptRequest,
  AdoptResult,
  LeaseEvent,
  LeaseInfo,
  PoolLedger,
  RegisterPoolOptions,
  ReleaseOptions,
  ReservationRow,
  ReserveOptions,
  ReserveResult,
} from './types.js';

export type { MachineLedgerOptions, PoolSnapshot } from './machine-ledger-options.js';

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

  readonly #caps = new Map<string, ResourceCap>();
  readonly #batches = new GroupCommit<LedgerOp>((pool, ops) => this.#parts.run(pool, ops));
  // The reaper's rounds are not the caller's operations: they never report a
  // lost lease (the report waits for the next call the caller makes).
  readonly #reaper = new Reaper(
    () => this.#caps.keys(),
    (pool) => this.#enqueue(pool, { kind: 'reap', background: true }),
    () => this.#parts.clock,
  );
  // Per pool, this instance's inbox for combined answers (undefined: the
  // combining directory is not usable, the plain lock is used).
  readonly #inboxes = new Map<string, Inbox | undefined>();
  readonly #parts: LedgerParts;
  #bootIdValue: string | undefined;
  #dirPromise: Promise<string> | undefined;
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
    checkKnownKeys('MachineLedger options', options, MACHINE_LEDGER_OPTION_KEYS);
    checkInstanceId(options.instanceId);
    this.instanceId = options.instanceId;
    this.leaseId = randomUUID();
    this.#bootIdValue = options.bootId;
    this.#telemetry = createLedgerTelemetry(options, 'file', {
      clock: resolveClock(options.clock, options.now),
      pools: () => this.#caps.keys(),
      read: (pool) => this.inspect(pool),
    });
    this.#parts = assembleParts(options, {
      instanceId: this.instanceId,
      leaseId: this.leaseId,
      caps: this.#caps,
      inboxes: this.#inboxes,
      telemetry: this.#telemetry,
      dir: () => this.dir(),
      expectedDir: () => this.#expectedDir(),
      bootId: () => this.bootId,
      closed: () => this.#closed,
    });
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
   * @throws LedgerIoError when a file-system call failed (full disk, no inode left,
   *   read-only filesystem...): `errno`, `path`, and `mayHaveWritten` (false: nothing written).
   * @throws LedgerOutcomeUnknownError when another process that combines calls took this
   *   one and may have written it, and neither its answer nor the pool file could settle
   *   it: treat it as not granted; the next successful write on the pool removes its row.
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
    const row = this.#parts.identity.row(agentId, cpus, memBytes);
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
        const row = this.#parts.identity.row(agentId, cpus, memBytes);
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
        cap: this.#caps.get(pool) ?? {},
        maxBytes: this.#parts.maxFileBytes,
        facts: (at, doc) => this.#parts.identity.facts(at, doc),
      });
    } catch (error) {
      throw ledgerIoError(error, { pool, path: file, mayHaveWritten: false });
    }
    if (dir !== undefined) this.#telemetry?.observed(pool, snapshot.cap, snapshot.live);
    return snapshot;
  }

  // Where the directory would be, for naming a file that does not exist.
  #expectedDir(): string {
    return this.#parts.requestedDir ?? (this.#parts.env[LEDGER_DIR_ENV] || DEFAULT_LEDGER_DIR);
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
   * This instance's own lease as of now: `none` until the first call that
   * writes (or reaps) made it; `held` while the last renewal the filesystem
   * confirmed is less than two thirds of `leaseTtlMs` old; `at-risk` from then
   * until the `deadline` (`confirmedAt + leaseTtlMs`); `lost` after it, until a
   * renewal succeeds again. Peers take this instance's rows only after
   * `deadline + marginMs`. `location` is the lease file, whose mtime an agent
   * can watch.
   *
   * @example
   * ```ts
   * import type { MachineLedger } from 'scaler-primitives/ledger';
   * declare const ledger: MachineLedger;
   * const { health, deadline } = ledger.lease();
   * if (health !== 'held') console.warn(`lease ${health}, deadline ${new Date(deadline ?? 0).toISOString()}`);
   * ```
   */
  lease(): LeaseInfo {
    return this.#parts.lease.info();
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
   *
   * @example
   * ```ts
   * import type { MachineLedger } from 'scaler-primitives/ledger';
   * declare const ledger: MachineLedger;
   * declare function stopSpawning(): void;
   * const off = ledger.onLeaseEvent((event) => {
   *   if (event.type === 'lease-at-risk') stopSpawning();
   * });
   * off(); // no more events
   * ```
   */
  onLeaseEvent(listener: (event: LeaseEvent) => void): () => void {
    return this.#parts.lease.onEvent(listener);
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
    this.#parts.lease.stop();
    await this.#batches.idle();
    for (const inbox of this.#inboxes.values()) inbox?.close();
    this.#inboxes.clear();
    this.#parts.locker.close();
    this.#parts.held.clear();
    if (this.#parts.lease.started()) {
      const dir = await this.dir().catch(() => undefined);
      const file = dir === undefined ? undefined : leasePath(dir, this.leaseId);
      if (file) await this.#parts.fs.promises.unlink(file).catch(() => {});
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
}
