/**
 * MemoryPoolLedger: the PoolLedger contract in memory, on the same front end
 * and pool document rules as the file and NATS ledgers. Several instances
 * share one MemoryPoolStore to play several orchestrator replicas.
 */
import { randomUUID } from 'node:crypto';
import { type Clock, systemClock } from '../../clock.js';
import { LedgerLeaseExpiredError } from '../../errors/index.js';
import { positiveOption } from '../../ledger/checks.js';
import { assertCap } from '../../ledger/document/cap.js';
import { emptyDocument } from '../../ledger/document/codec.js';
import { validatePoolName } from '../../ledger/document/pool-name.js';
import { partitionRows, type StaleRow } from '../../ledger/document/verdict.js';
import { LedgerFrontEnd } from '../../ledger/front-end.js';
import { applyBatch, type LedgerAnswer, type LedgerOp } from '../../ledger/ops.js';
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
} from '../../ledger/types.js';
import type { ResourceAmount, ResourceCap } from '../../resources/index.js';
import { MemoryLease } from './lease.js';
import { MemoryPoolStore, type StoreInternals, storeInternals } from './store.js';

export { MemoryPoolStore } from './store.js';

/**
 * Options of {@link MemoryPoolLedger}.
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

/**
 * A `PoolLedger` (from `scaler-primitives/ledger`) in memory, with the ledgers' contract: all-or-nothing
 * against the cap (refusal details as the other ledgers), idempotent release of
 * this instance's own rows only (operator paths `anyInstance`, `instanceId`),
 * `releaseAllForInstance`, and stale rows by lease on the clock: after
 * `close()` a replica's rows are stale for its peers at once; after
 * {@link MemoryPoolLedger.abandon} (a simulated crash) once its last renewal is
 * older than `leaseTtlMs + leaseMarginMs`. Rows of another boot id are stale;
 * rows without a lease are kept until released.
 *
 * Its lease keeps the rules of every ledger: renewed on the clock every
 * `leaseTtlMs / 3`; {@link MemoryPoolLedger.lease} and
 * {@link MemoryPoolLedger.onLeaseEvent} say when it is at risk (two thirds of
 * the lease without a confirmed renewal) and lost (the deadline); a peer is
 * judged expired only while this replica itself renews without a break; a
 * reserve is never written under an unconfirmed lease.
 * {@link MemoryPoolLedger.failRenewals} makes renewals fail, to test what a
 * host does when its lease is at risk.
 *
 * It is a fair embedded ledger for a single-process host too (one manager, no
 * other process sharing the machine). Its limits: nothing survives the
 * process, and other processes cannot see it, so it cannot keep two
 * orchestrators on one host within one cap; use `MachineLedger` for that.
 *
 * @example
 * ```ts
 * import { MemoryPoolLedger, MemoryPoolStore, TestClock } from 'scaler-primitives/testing';
 * const clock = new TestClock('2026-01-05T09:00:00Z');
 * const store = new MemoryPoolStore();
 * const a = new MemoryPoolLedger({ instanceId: 'a', store, clock });
 * const b = new MemoryPoolLedger({ instanceId: 'b', store, clock });
 * for (const l of [a, b]) l.registerPool('host', { maxCpu: 8, maxMemoryBytes: 16 * 2 ** 30 });
 * await a.reserve('host', 'agent-1', 4, 2 ** 30);
 * a.abandon(); // a crashes
 * await clock.advance(34_000); // leaseTtlMs (30 s) + leaseMarginMs (3 s) since its last renewal
 * console.log(await b.reapStale('host')); // 1
 * ```
 */
export class MemoryPoolLedger implements PoolLedger {
  /** This replica's instance id, written into its rows. */
  readonly instanceId: string;
  /** This replica's lease id, written into its rows. */
  readonly leaseId: string;
  /** The shared state. */
  readonly store: MemoryPoolStore;
  readonly #internals: StoreInternals;

  readonly #clock: Clock;
  readonly #ttl: number;
  // Per pool, the agents this instance reserved and has not released.
  readonly #held = new Map<string, Set<string>>();
  readonly #lease: MemoryLease;
  readonly #front: LedgerFrontEnd;

  /**
   * @param options - `instanceId` is required; see `MemoryPoolLedgerOptions`.
   * @throws TypeError for a missing `instanceId`, an unknown option or a bad value.
   */
  constructor(options: MemoryPoolLedgerOptions) {
    const known = ['instanceId', 'store', 'clock', 'leaseTtlMs', 'leaseMarginMs'];
    for (const key of Object.keys(options ?? {})) {
      if (!known.includes(key)) {
        throw new TypeError(
          `Unknown MemoryPoolLedger option \`${key}\`: the accepted options are ${known.map((k) => `\`${k}\``).join(', ')}`,
        );
      }
    }
    if (typeof options?.instanceId !== 'string' || options.instanceId === '') {
      throw new TypeError(
        `Expected \`instanceId\` to be a non-empty string, got \`${String(options?.instanceId)}\``,
      );
    }
    if (options.store !== undefined && !(options.store instanceof MemoryPoolStore)) {
      throw new TypeError('Expected `store` to be a MemoryPoolStore');
    }
    const ttl = positiveOption('leaseTtlMs', options.leaseTtlMs, 30_000);
    const margin = options.leaseMarginMs ?? Math.max(1000, Math.ceil(ttl / 10));
    if (
      typeof margin !== 'number' ||
      !Number.isFinite(margin) ||
      margin < 0 ||
      (options.leaseMarginMs !== undefined && margin >= ttl)
    ) {
      throw new TypeError(
        `Expected \`leaseMarginMs\` to be a finite number >= 0 and < \`leaseTtlMs\` (${ttl}), got \`${String(margin)}\``,
      );
    }
    const clock = options.clock ?? systemClock;
    this.instanceId = options.instanceId;
    this.#front = new LedgerFrontEnd(options.instanceId, {
      closedMessage: 'This MemoryPoolLedger is closed; create a new one',
      clock: () => clock,
      checkPool: validatePoolName,
      ownRow: (agentId, cpus, memBytes) => this.#ownRow(agentId, cpus, memBytes),
      commit: (pool, op) => this.#commit(pool, op),
      inspect: (pool) => this.inspect(pool),
    });
    this.leaseId = randomUUID();
    this.store = options.store ?? new MemoryPoolStore();
    this.#internals = storeInternals(this.store);
    this.#clock = clock;
    this.#ttl = ttl;
    this.#internals.openLease(this.leaseId, this.instanceId, clock.now());
    this.#lease = new MemoryLease(this.leaseId, ttl, margin, clock, (now) =>
      this.#internals.renewLease(this.leaseId, now),
    );
  }

  /**
   * This replica's own lease as of now (health, last confirmed renewal,
   * deadline, `leaseMs`, `marginMs`, location `{ kind: 'memory' }`). The lease
   * starts when the ledger is made, so its health is never `none`; after
   * `close()` or `abandon()` it is `lost`.
   */
  lease(): LeaseInfo {
    return this.#lease.info();
  }

  /**
   * Call `listener` on each change of this replica's lease: `lease-at-risk`
   * (two thirds of the lease without a confirmed renewal), `lease-lost` (the
   * deadline passed), `lease-renewed` (confirmed again). The events fire from
   * timers on the ledger's clock. Listener errors are caught.
   *
   * @returns The function that removes the listener.
   * @throws TypeError when `listener` is not a function.
   */
  onLeaseEvent(listener: (event: LeaseEvent) => void): () => void {
    return this.#lease.listen(listener);
  }

  /**
   * Make this replica's lease renewals fail (`true`) or work again (`false`),
   * as a storage outage or a cut-off network would: while on, the lease goes
   * `lease-at-risk` two thirds of a lease after the last confirmed renewal and
   * `lease-lost` at its deadline; peers take its rows once the deadline plus
   * the margin has passed (and only peers whose own renewals work); `reserve`
   * and `adopt` are refused with `LedgerUnavailableError` once the last
   * renewal is older than a third of the lease; this replica judges no peer
   * expired. Turned off, the lease is renewed at once (`lease-renewed` when it
   * was at risk or lost). Other calls (`release`, `list`) keep working.
   *
   * @param on - Whether renewals fail from now on.
   * @throws TypeError when `on` is not a boolean, or the ledger is closed.
   */
  failRenewals(on: boolean): void {
    if (typeof on !== 'boolean') {
      throw new TypeError(`Expected \`on\` to be a boolean, got \`${String(on)}\``);
    }
    this.#front.assertOpen();
    this.#lease.setFailing(on);
  }

  /**
   * Declare a pool's cap (a stored document with another cap is refused on use).
   *
   * @throws TypeError when the ledger is closed, or as `PoolLedger.registerPool`.
   */
  registerPool(name: string, cap: ResourceCap, options?: RegisterPoolOptions): void {
    this.#front.assertOpen();
    this.#front.registerPool(name, cap, options);
  }

  /** The pool's live rows (copies). */
  async list(pool: string): Promise<ReservationRow[]> {
    return this.inspect(pool).live.map((row) => structuredClone(row));
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

  /** Stop the reaper started by `start`. */
  stop(): void {
    this.#front.stop();
  }

  /**
   * Live rows and the rows this instance would reap now, with reasons (the
   * store's objects: do not change them).
   */
  inspect(pool: string): {
    /** Rows that count against the cap. */
    live: ReservationRow[];
    /** Rows a reap would remove now, each with why. */
    stale: StaleRow[];
  } {
    validatePoolName(pool);
    const doc = this.#internals.get(pool);
    if (doc === undefined) return { live: [], stale: [] };
    return this.#partition(doc);
  }

  /**
   * Reap every registered pool every `intervalMs` (unref'd timer). Idempotent.
   *
   * @throws TypeError when the ledger is closed or `intervalMs` is not a finite number > 0.
   */
  start(intervalMs = 30_000): void {
    this.#front.assertOpen();
    positiveOption('intervalMs', intervalMs, 30_000);
    this.#front.start(intervalMs);
  }

  /**
   * Release every row this instance holds in every registered pool.
   *
   * @throws TypeError when the ledger is closed.
   */
  async releaseAllForInstance(): Promise<void> {
    this.#front.assertOpen();
    await this.#front.releaseAllForInstance();
  }

  /** Stop the timers and end the lease: rows left behind are stale for peers at once. */
  async close(): Promise<void> {
    if (this.#front.closed) return;
    this.#shut();
    this.#internals.endLease(this.leaseId, 'ended');
  }

  /**
   * Simulate a crash: stop everything (renewals too) without ending the
   * lease, so peers judge the rows left behind stale only once its last
   * renewal is older than `leaseTtlMs + leaseMarginMs`.
   */
  abandon(): void {
    if (this.#front.closed) return;
    this.#shut();
    this.#internals.endLease(this.leaseId, 'abandoned');
  }

  #ownRow(agentId: string, cpus: number, memBytes: number): ReservationRow {
    return {
      instanceId: this.instanceId,
      pid: process.pid,
      bootId: this.store.bootId,
      agentId,
      cpus,
      memBytes,
      reservedAt: this.#clock.now(),
      leaseId: this.leaseId,
    };
  }

  // One read-decide-write, synchronously (it runs before the first await):
  // nothing else runs in between.
  async #commit(pool: string, op: LedgerOp): Promise<LedgerAnswer> {
    if (op.kind === 'reserve' || (op.kind === 'reap' && op.background !== true)) {
      this.#checkHeld(pool);
    }
    if (op.kind === 'reserve' || op.kind === 'adopt') this.#lease.ensureConfirmed(pool);
    const answer = this.#apply(pool, op);
    if (op.kind === 'reserve' && answer.kind === 'reserve') {
      if (answer.value.ok) this.#heldOf(pool).add(op.row.agentId);
    } else if (op.kind === 'adopt' && answer.kind === 'adopt') {
      answer.value.forEach((result, i) => {
        if (result.ok) this.#heldOf(pool).add(op.rows[i]!.agentId);
      });
    } else if (op.kind === 'release') {
      this.#held.get(pool)?.delete(op.agentId);
    } else if (op.kind === 'releaseInstance') {
      this.#held.get(pool)?.clear();
    }
    return answer;
  }

  #shut(): void {
    this.#front.markClosed();
    this.#lease.stop();
  }

  #apply(pool: string, op: LedgerOp): LedgerAnswer {
    const stored = this.#internals.get(pool);
    const registered = this.#front.caps.get(pool);
    if (stored && registered) assertCap(stored, registered, this.#source(pool));
    const base = stored ?? emptyDocument(registered ?? {});
    const outcome = applyBatch(pool, base, this.#partition(base), [op]);
    if (outcome.dirty) this.#internals.put(pool, outcome.doc);
    const answer = outcome.answers[0]!;
    if (!answer.ok) throw answer.error;
    return answer;
  }

  #partition(doc: LedgerDocument) {
    const now = this.#clock.now();
    return partitionRows(doc.reservations, {
      bootId: this.store.bootId,
      instanceId: this.instanceId,
      // One process: a row of this instance id is this replica's, or one it adopts.
      processState: () => 'alive',
      leaseState: (leaseId) =>
        this.#internals.leaseState(
          leaseId,
          now,
          this.#ttl + this.#lease.marginMs,
          this.#lease.healthySince,
        ),
    });
  }

  // Rows this instance holds that are gone although it did not release them
  // (a peer reaped them after a lapse, or an operator released them): reported
  // once, as the other ledgers do.
  #checkHeld(pool: string): void {
    const held = this.#held.get(pool);
    if (!held || held.size === 0) return;
    const doc = this.#internals.get(pool);
    const present = new Set(
      (doc?.reservations ?? [])
        .filter((row) => row.instanceId === this.instanceId)
        .map((row) => row.agentId),
    );
    const lost = [...held].filter((agentId) => !present.has(agentId));
    if (lost.length === 0) return;
    for (const agentId of lost) held.delete(agentId);
    throw new LedgerLeaseExpiredError(
      pool,
      `Instance ${JSON.stringify(this.instanceId)} lost its reservations for ${lost.map((a) => JSON.stringify(a)).join(', ')} in memory pool ${JSON.stringify(pool)}: the rows are gone although this instance did not release them (a peer reaped them after its lease lapsed, or an operator released them). Treat that capacity as lost. This call did nothing; the next call proceeds.`,
      lost,
    );
  }

  #heldOf(pool: string): Set<string> {
    let held = this.#held.get(pool);
    if (!held) {
      held = new Set();
      this.#held.set(pool, held);
    }
    return held;
  }

  #source(pool: string) {
    return { pool, location: `memory store (pool ${pool})` };
  }
}
