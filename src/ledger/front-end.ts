/**
 * The front end every ledger shares (file, NATS, memory): argument checks,
 * registered caps, the closed state, the reaper timer and the telemetry
 * wrapping of each call. A ledger makes one {@link LedgerFrontEnd} in its
 * constructor, gives it its {@link LedgerStorage} (how a pool name is checked,
 * the row it writes, how one call is committed, how a pool is read) and
 * forwards the `PoolLedger` calls to it; it implements `inspect`, `lease`,
 * `onLeaseEvent` and `close` itself.
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
import { type LedgerAnswer, type LedgerOp, releaseOp } from './ops.js';
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
  RegisterPoolOptions,
  ReleaseOptions,
  ReservationRow,
  ReserveOptions,
  ReserveResult,
} from './types.js';

/** What a ledger gives its front end: its storage. */
export interface LedgerStorage {
  /** The message of the `TypeError` a closed ledger rejects calls with. */
  closedMessage: string;
  /** The clock the reaper runs on (read when it starts). */
  clock(): Clock;
  /** Check a pool name as this storage needs it; returns the name. */
  checkPool(pool: string): string;
  /** The row this instance writes for an agent, now, under its current lease. */
  ownRow(agentId: string, cpus: number, memBytes: number): ReservationRow;
  /** Commit one checked call on `pool`; resolves with its answer, tagged with the call's kind. */
  commit(pool: string, op: LedgerOp): Promise<LedgerAnswer>;
  /** Read `pool` without writing (`list`, `getUsage`, the telemetry's background read). */
  inspect(pool: string): { live: ReservationRow[] } | Promise<{ live: ReservationRow[] }>;
}

/**
 * The shared front end of a `PoolLedger`: every public call is checked here,
 * then handed to the ledger's storage. A ledger holds one (private) and
 * forwards its `PoolLedger` methods to it.
 */
export class LedgerFrontEnd {
  /** The instance id, written into every row. */
  readonly instanceId: string;
  /** The registered caps, by pool. */
  readonly caps = new Map<string, ResourceCap>();
  /** The ledger's telemetry, when a provider was given (see {@link LedgerFrontEnd.instrument}). */
  telemetry: LedgerTelemetry | undefined;
  readonly #storage: LedgerStorage;
  readonly #reaper: Reaper;
  #closed = false;

  /** @param instanceId - Checked by the ledger before. */
  constructor(instanceId: string, storage: LedgerStorage) {
    this.instanceId = instanceId;
    this.#storage = storage;
    // The reaper's rounds are not the caller's calls: they never use up the
    // one-time lost-lease report a caller's next call on the pool is owed.
    this.#reaper = new Reaper(
      () => this.caps.keys(),
      (pool) => this.submit(pool, { kind: 'reap', background: true }),
      () => storage.clock(),
    );
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
      read: (pool) => Promise.resolve(this.#storage.inspect(pool)),
    });
    return this.telemetry;
  }

  /** Commit a checked call, unless closed, inside its telemetry span. */
  submit(pool: string, op: LedgerOp): Promise<LedgerAnswer> {
    if (this.#closed) return Promise.reject(new TypeError(this.#storage.closedMessage));
    const done = this.#storage.commit(pool, op);
    return this.telemetry?.op(pool, op, done) ?? done;
  }

  /**
   * Declare the cap a pool must have. The first write creates the pool with
   * this cap; a stored pool with another cap is refused with `LedgerCapMismatchError`.
   *
   * @throws InvalidInputError for an invalid pool name.
   * @throws TypeError for a cap field that is not a finite number >= 0.
   */
  registerPool(name: string, cap: ResourceCap, options?: RegisterPoolOptions): void {
    const pool = this.#storage.checkPool(name);
    this.caps.set(pool, registeredCap(pool, cap, options));
  }

  /** Reserve; true when granted (see `reserve`). */
  async tryReserve(
    pool: string,
    agentId: string,
    cpus: number,
    memBytes: number,
    options?: ReserveOptions,
  ): Promise<boolean> {
    return (await this.reserve(pool, agentId, cpus, memBytes, options)).ok;
  }

  /** Check a reserve call, commit it, answer its result (see `PoolLedger.reserve`). */
  async reserve(
    pool: string,
    agentId: string,
    cpus: number,
    memBytes: number,
    options?: ReserveOptions,
  ): Promise<ReserveResult> {
    this.#storage.checkPool(pool);
    checkReserve(this.caps, pool, agentId, cpus, memBytes);
    const extended = checkReserveOptions(options);
    const row = this.#storage.ownRow(agentId, cpus, memBytes);
    if (extended !== undefined) row.extended = extended;
    const answer = await this.submit(pool, { kind: 'reserve', row });
    if (answer.kind !== 'reserve') throw mismatch('reserve', answer);
    return answer.value;
  }

  /** Check an adopt call, commit it, answer one result per agent (see `PoolLedger.adopt`). */
  async adopt(pool: string, agents: readonly AdoptRequest[]): Promise<AdoptResult[]> {
    this.#storage.checkPool(pool);
    const rows = checkAdopt(this.caps, pool, agents).map(
      ({ agentId, cpus, memBytes, extended, devices }) => {
        const row = this.#storage.ownRow(agentId, cpus, memBytes);
        if (extended !== undefined) row.extended = extended;
        if (devices !== undefined) row.devices = devices;
        return row;
      },
    );
    const answer = await this.submit(pool, { kind: 'adopt', rows });
    if (answer.kind !== 'adopt') throw mismatch('adopt', answer);
    return answer.value;
  }

  /** Check a release call, commit it; true when a row was removed (see `PoolLedger.release`). */
  async release(pool: string, agentId: string, options?: ReleaseOptions): Promise<boolean> {
    this.#storage.checkPool(pool);
    checkAgentId(agentId);
    const answer = await this.submit(pool, releaseOp(agentId, this.instanceId, options));
    if (answer.kind !== 'release') throw mismatch('release', answer);
    return answer.value;
  }

  /** Remove stale rows from `pool` now; how many (see `PoolLedger.reapStale`). */
  async reapStale(pool: string): Promise<number> {
    this.#storage.checkPool(pool);
    const answer = await this.submit(pool, { kind: 'reap' });
    if (answer.kind !== 'reap') throw mismatch('reap', answer);
    return answer.value;
  }

  /** Summed CPU and memory of `pool`'s live rows (no write). */
  async getUsage(pool: string): Promise<ResourceAmount> {
    return sumRows((await this.#storage.inspect(pool)).live);
  }

  /** `pool`'s live rows (no write). */
  async list(pool: string): Promise<ReservationRow[]> {
    return (await this.#storage.inspect(pool)).live;
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
}

// A storage that answers a call with another call's answer is a bug in this
// library, never a caller's mistake.
function mismatch(kind: LedgerOp['kind'], answer: LedgerAnswer): Error {
  return new Error(
    `Internal error: a ${kind} call was answered as a ${answer.kind} call; please report it`,
  );
}
