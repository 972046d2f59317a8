/**
 * The front end every ledger shares (file, NATS, memory): argument checks,
 * registered caps, the closed state, the reaper timer and the telemetry
 * wrapping of each call. A ledger extends {@link LedgerFrontEnd}, calls
 * {@link attachStorage} in its constructor with what only it knows (how a pool
 * name is checked, the row it writes, how one call is committed) and keeps
 * the {@link LedgerCore} it gets back; it implements `inspect`, `lease`,
 * `onLeaseEvent` and `close` itself.
 *
 * The shared state lives in `LedgerCore`, not in protected members, so the
 * published declarations of the ledgers show only their public methods.
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

/** What a ledger supplies to the shared front end: its storage. */
export interface LedgerStorage {
  /** The message of the `TypeError` a closed ledger rejects calls with. */
  closedMessage: string;
  /** The clock the reaper runs on (read when it starts). */
  clock(): Clock;
  /** Check a pool name as this storage needs it; returns the name. */
  checkPool(pool: string): string;
  /** The row this instance writes for an agent, now, under its current lease. */
  ownRow(agentId: string, cpus: number, memBytes: number): ReservationRow;
  /** Commit one checked call on `pool`; resolves with its answer. */
  commit(pool: string, op: LedgerOp): Promise<unknown>;
}

/** The state a ledger shares with its front end. */
export class LedgerCore {
  /** The registered caps, by pool. */
  readonly caps = new Map<string, ResourceCap>();
  /** The ledger's telemetry, when a provider was given (see {@link LedgerCore.instrument}). */
  telemetry: LedgerTelemetry | undefined;
  readonly #ledger: LedgerFrontEnd;
  readonly #storage: LedgerStorage;
  readonly #reaper: Reaper;
  #closed = false;

  constructor(ledger: LedgerFrontEnd, storage: LedgerStorage) {
    this.#ledger = ledger;
    this.#storage = storage;
    // The reaper's rounds are not the caller's calls: they never use up the
    // one-time lost-lease report a caller's next call on the pool is owed.
    this.#reaper = new Reaper(
      () => this.caps.keys(),
      (pool) => this.submit(pool, { kind: 'reap', background: true }),
      () => storage.clock(),
    );
  }

  /** The ledger's storage. */
  get storage(): LedgerStorage {
    return this.#storage;
  }

  /** The periodic reaper of `start` and `stop`. */
  get reaper(): Reaper {
    return this.#reaper;
  }

  /** Whether `close` has begun. */
  get closed(): boolean {
    return this.#closed;
  }

  /** Refuse calls from now on; stop the reaper and the telemetry. */
  markClosed(): void {
    this.#closed = true;
    this.#reaper.close();
    this.telemetry?.close();
  }

  /** @throws TypeError when the ledger is closed. */
  assertOpen(): void {
    if (this.#closed) throw new TypeError(this.#storage.closedMessage);
  }

  /**
   * Make the ledger's telemetry (none without a provider in `options`).
   *
   * @throws TypeError for bad telemetry options.
   */
  instrument(
    options: LedgerTelemetryOptions,
    backend: LedgerBackendName,
    clock: Clock,
  ): LedgerTelemetry | undefined {
    this.telemetry = createLedgerTelemetry(options, backend, {
      clock,
      pools: () => this.caps.keys(),
      read: (pool) => Promise.resolve(this.#ledger.inspect(pool)),
    });
    return this.telemetry;
  }

  /** Commit a checked call, unless closed, inside its telemetry span. */
  submit(pool: string, op: LedgerOp): Promise<unknown> {
    if (this.#closed) return Promise.reject(new TypeError(this.#storage.closedMessage));
    const done = this.#storage.commit(pool, op);
    return this.telemetry?.op(pool, op, done) ?? done;
  }
}

let attach: (ledger: LedgerFrontEnd, storage: LedgerStorage) => LedgerCore;

/**
 * Give `ledger` its storage (once, in its constructor); returns the state it
 * shares with its front end.
 */
export function attachStorage(ledger: LedgerFrontEnd, storage: LedgerStorage): LedgerCore {
  return attach(ledger, storage);
}

/**
 * The shared front end of a `PoolLedger`: every public call is checked
 * here, then handed to the ledger's storage.
 */
export abstract class LedgerFrontEnd implements PoolLedger {
  /** This instance's id, written into every row it makes. */
  readonly instanceId: string;
  #core: LedgerCore | undefined;

  static {
    attach = (ledger, storage) => {
      ledger.#core = new LedgerCore(ledger, storage);
      return ledger.#core;
    };
  }

  /** @param instanceId - Checked by the ledger before. */
  protected constructor(instanceId: string) {
    this.instanceId = instanceId;
  }

  abstract inspect(pool: string): { live: ReservationRow[] } | Promise<{ live: ReservationRow[] }>;
  abstract lease(): LeaseInfo;
  abstract onLeaseEvent(listener: (event: LeaseEvent) => void): () => void;
  abstract close(): Promise<void>;

  get #front(): LedgerCore {
    return this.#core!;
  }

  /**
   * Declare the cap a pool must have. The first write creates the pool with
   * this cap; a stored pool with another cap is refused with `LedgerCapMismatchError`.
   *
   * @throws InvalidInputError for an invalid pool name.
   * @throws TypeError for a cap field that is not a finite number >= 0.
   */
  registerPool(name: string, cap: ResourceCap, options?: RegisterPoolOptions): void {
    const pool = this.#front.storage.checkPool(name);
    this.#front.caps.set(pool, registeredCap(pool, cap, options));
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
    this.#front.storage.checkPool(pool);
    checkReserve(this.#front.caps, pool, agentId, cpus, memBytes);
    const extended = checkReserveOptions(options);
    const row = this.#front.storage.ownRow(agentId, cpus, memBytes);
    if (extended !== undefined) row.extended = extended;
    return (await this.#front.submit(pool, { kind: 'reserve', row })) as ReserveResult;
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
    this.#front.storage.checkPool(pool);
    const rows = checkAdopt(this.#front.caps, pool, agents).map(
      ({ agentId, cpus, memBytes, extended, devices }) => {
        const row = this.#front.storage.ownRow(agentId, cpus, memBytes);
        if (extended !== undefined) row.extended = extended;
        if (devices !== undefined) row.devices = devices;
        return row;
      },
    );
    return (await this.#front.submit(pool, { kind: 'adopt', rows })) as AdoptResult[];
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
    this.#front.storage.checkPool(pool);
    checkAgentId(agentId);
    return (await this.#front.submit(
      pool,
      releaseOp(agentId, this.instanceId, options),
    )) as boolean;
  }

  /**
   * Remove stale rows from `pool` now.
   *
   * @returns The number of rows removed.
   * @throws as `release`, and `LedgerLeaseExpiredError` as `reserve` (the
   *   reaper of `start()` never consumes that report).
   */
  async reapStale(pool: string): Promise<number> {
    this.#front.storage.checkPool(pool);
    return (await this.#front.submit(pool, { kind: 'reap' })) as number;
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
    this.#front.reaper.start(intervalMs);
  }

  /** Stop the reaper started by `start`. */
  stop(): void {
    this.#front.reaper.stop();
  }

  /** Release every row this instance holds in every registered pool. Best effort per pool. */
  async releaseAllForInstance(): Promise<void> {
    await Promise.allSettled(
      [...this.#front.caps.keys()].map((pool) =>
        this.#front.submit(pool, { kind: 'releaseInstance', instanceId: this.instanceId }),
      ),
    );
  }
}
