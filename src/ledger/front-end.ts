/**
 * The front end every ledger shares (file, NATS, memory): argument checks,
 * registered caps, the closed state, the reaper timer and the telemetry
 * wrapping of each call. A ledger extends it and supplies only its storage:
 * how a pool name is checked, the row it writes, how one call is committed,
 * and how a pool is read.
 */
import type { Clock } from '../clock.js';
import type { ResourceAmount, ResourceCap } from '../resources/types.js';
import {
  checkAdopt,
  checkAgentId,
  checkReserve,
  checkReserveOptions,
  registeredCap,
} from './checks.js';
import { sumRows } from './document/fit.js';
import { type LedgerOp, releaseOp } from './ops.js';
import { DEFAULT_REAP_INTERVAL_MS, Reaper } from './reaper.js';
import {
  createLedgerTelemetry,
  type LedgerBackendName,
  type LedgerTelemetry,
  type LedgerTelemetryOptions,
} from './telemetry.js';
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

/** What a ledger's `inspect` answers at least. */
export interface PoolRows {
  /** Rows that count against the cap. */
  live: ReservationRow[];
}

/**
 * The shared front end of a {@link PoolLedger}: every public call is checked
 * here, then handed to the ledger's storage through {@link LedgerFrontEnd.commit}.
 */
export abstract class LedgerFrontEnd implements PoolLedger {
  /** This instance's id, written into every row it makes. */
  readonly instanceId: string;

  /** The registered caps, by pool. */
  protected readonly caps = new Map<string, ResourceCap>();
  /** The ledger's telemetry, when a provider was given (see {@link LedgerFrontEnd.instrument}). */
  protected telemetry: LedgerTelemetry | undefined;
  readonly #closedMessage: string;
  readonly #reaper: Reaper;
  #closed = false;

  /**
   * @param instanceId - Checked by the subclass before.
   * @param closedMessage - The message of the `TypeError` a closed ledger rejects calls with.
   * @param clock - The clock the reaper runs on (read when it starts).
   */
  protected constructor(instanceId: string, closedMessage: string, clock: () => Clock) {
    this.instanceId = instanceId;
    this.#closedMessage = closedMessage;
    // The reaper's rounds are not the caller's calls: they never use up the
    // one-time lost-lease report a caller's next call on the pool is owed.
    this.#reaper = new Reaper(
      () => this.caps.keys(),
      (pool) => this.submit(pool, { kind: 'reap', background: true }),
      clock,
    );
  }

  /** Check a pool name as this storage needs it; returns the name. */
  protected abstract checkPool(pool: string): string;
  /** The row this instance writes for an agent, now, under its current lease. */
  protected abstract ownRow(agentId: string, cpus: number, memBytes: number): ReservationRow;
  /** Commit one checked call on `pool`; resolves with its answer. */
  protected abstract commit(pool: string, op: LedgerOp): Promise<unknown>;

  abstract inspect(pool: string): PoolRows | Promise<PoolRows>;
  abstract lease(): LeaseInfo;
  abstract onLeaseEvent(listener: (event: LeaseEvent) => void): () => void;
  abstract close(): Promise<void>;

  /**
   * Declare the cap a pool must have. The first write creates the pool with
   * this cap; a stored pool with another cap is refused with `LedgerCapMismatchError`.
   *
   * @throws InvalidInputError for an invalid pool name.
   * @throws TypeError for a cap field that is not a finite number >= 0.
   */
  registerPool(name: string, cap: ResourceCap, options?: RegisterPoolOptions): void {
    const pool = this.checkPool(name);
    this.caps.set(pool, registeredCap(pool, cap, options));
  }

  /**
   * Reserve `cpus` and `memBytes` for `agentId` in `pool`; true when granted.
   *
   * @throws as `reserve`.
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
   * @throws the storage's errors: see the ledger class.
   */
  async reserve(
    pool: string,
    agentId: string,
    cpus: number,
    memBytes: number,
    options?: ReserveOptions,
  ): Promise<ReserveResult> {
    this.checkPool(pool);
    checkReserve(this.caps, pool, agentId, cpus, memBytes);
    const extended = checkReserveOptions(options);
    const row = this.ownRow(agentId, cpus, memBytes);
    if (extended !== undefined) row.extended = extended;
    return (await this.submit(pool, { kind: 'reserve', row })) as ReserveResult;
  }

  /**
   * Take over the rows these agents hold in `pool` under this instance id but
   * another process or lease (this host before a restart), or reserve them
   * again when gone, in one write; see {@link PoolLedger.adopt}.
   *
   * @returns One answer per agent, in order.
   * @throws TypeError or InvalidInputError for bad agents; otherwise as `reserve`.
   */
  async adopt(pool: string, agents: readonly AdoptRequest[]): Promise<AdoptResult[]> {
    this.checkPool(pool);
    const rows = checkAdopt(this.caps, pool, agents).map(
      ({ agentId, cpus, memBytes, extended }) => {
        const row = this.ownRow(agentId, cpus, memBytes);
        if (extended !== undefined) row.extended = extended;
        return row;
      },
    );
    return (await this.submit(pool, { kind: 'adopt', rows })) as AdoptResult[];
  }

  /**
   * Remove the reservation of `agentId` in `pool` that this instance made
   * (another instance's row answers `false`; `{ anyInstance: true }` and
   * `{ instanceId }` are the operator paths). Idempotent.
   *
   * @returns true when a row was removed.
   * @throws as `reserve`, except the registration, duplicate and lost-lease errors.
   */
  async release(pool: string, agentId: string, options?: ReleaseOptions): Promise<boolean> {
    this.checkPool(pool);
    checkAgentId(agentId);
    return (await this.submit(pool, releaseOp(agentId, this.instanceId, options))) as boolean;
  }

  /**
   * Remove stale rows from `pool` now.
   *
   * @returns The number of rows removed.
   * @throws as `release`, and `LedgerLeaseExpiredError` as `reserve` (the
   *   reaper of `start()` never consumes that report).
   */
  async reapStale(pool: string): Promise<number> {
    this.checkPool(pool);
    return (await this.submit(pool, { kind: 'reap' })) as number;
  }

  /** Summed CPU and memory of `pool`'s live rows (no write). */
  async getUsage(pool: string): Promise<ResourceAmount> {
    return sumRows(await this.list(pool));
  }

  /** `pool`'s live rows (no write). */
  async list(pool: string): Promise<ReservationRow[]> {
    return (await this.inspect(pool)).live;
  }

  /**
   * Reap every registered pool every `intervalMs`. Idempotent; the timer is
   * unref'd and a failed round is retried on the next tick (it never throws).
   *
   * @throws TypeError when `intervalMs` is not a finite number >= 0.
   */
  start(intervalMs = DEFAULT_REAP_INTERVAL_MS): void {
    this.#reaper.start(intervalMs);
  }

  /** Stop the reaper started by `start`. */
  stop(): void {
    this.#reaper.stop();
  }

  /** Release every row this instance holds in every registered pool. Best effort per pool. */
  async releaseAllForInstance(): Promise<void> {
    await Promise.allSettled(
      [...this.caps.keys()].map((pool) =>
        this.submit(pool, { kind: 'releaseInstance', instanceId: this.instanceId }),
      ),
    );
  }

  /** Whether `close` has begun. */
  protected get closed(): boolean {
    return this.#closed;
  }

  /** Refuse calls from now on; stop the reaper and the telemetry. */
  protected markClosed(): void {
    this.#closed = true;
    this.#reaper.close();
    this.telemetry?.close();
  }

  /** @throws TypeError when the ledger is closed. */
  protected assertOpen(): void {
    if (this.#closed) throw new TypeError(this.#closedMessage);
  }

  /**
   * Make this ledger's telemetry (none without a provider in `options`).
   *
   * @throws TypeError for bad telemetry options.
   */
  protected instrument(
    options: LedgerTelemetryOptions,
    backend: LedgerBackendName,
    clock: Clock,
  ): LedgerTelemetry | undefined {
    this.telemetry = createLedgerTelemetry(options, backend, {
      clock,
      pools: () => this.caps.keys(),
      read: (pool) => Promise.resolve(this.inspect(pool)),
    });
    return this.telemetry;
  }

  /** Commit a checked call, unless closed, inside its telemetry span. */
  protected submit(pool: string, op: LedgerOp): Promise<unknown> {
    if (this.#closed) return Promise.reject(new TypeError(this.#closedMessage));
    const done = this.commit(pool, op);
    return this.telemetry?.op(pool, op, done) ?? done;
  }
}
