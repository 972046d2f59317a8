/**
 * MemoryPoolLedger: the PoolLedger contract in memory, over the same pure
 * ledger layer as the file and NATS ledgers (one batch op, one fit check, one
 * release rule). Several instances share one MemoryPoolStore to play several
 * orchestrator replicas.
 */
import { randomUUID } from 'node:crypto';
import { type Clock, type ClockTimer, systemClock } from '../clock.js';
import { LedgerLeaseExpiredError } from '../errors.js';
import {
  type AdoptRequest,
  type AdoptResult,
  applyBatch,
  assertCap,
  checkAdopt,
  checkAgentId,
  checkReserve,
  checkReserveOptions,
  emptyDocument,
  type LedgerDocument,
  type LedgerOp,
  type PoolLedger,
  partitionRows,
  type RegisterPoolOptions,
  type ReleaseOptions,
  type ReservationRow,
  type ReserveOptions,
  type ReserveResult,
  registeredCap,
  releaseOp,
  sumRows,
  validatePoolName,
} from '../ledger/index.js';
import type { ResourceAmount, ResourceCap } from '../resources/index.js';
import { MemoryPoolStore } from './memory-ledger/store.js';

import type { MemoryPoolLedgerOptions, MemoryPoolSnapshot } from './memory-ledger/types.js';

export { MemoryPoolStore, type MemoryPoolStoreOptions } from './memory-ledger/store.js';
export type { MemoryPoolLedgerOptions, MemoryPoolSnapshot } from './memory-ledger/types.js';

/**
 * A {@link PoolLedger} in memory, with the ledgers' contract: all-or-nothing
 * against the cap (refusal details as the other ledgers), idempotent release of
 * this instance's own rows only (operator paths `anyInstance`, `instanceId`),
 * `releaseAllForInstance`, and stale rows by lease on the clock: after
 * `close()` a replica's rows are stale for its peers at once; after
 * {@link MemoryPoolLedger.abandon} (a simulated crash) once its lease is older
 * than `leaseTtlMs`. Rows of another boot id are stale; rows without a lease
 * are kept until released.
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
 * await clock.advance(31_000);
 * console.log(await b.reapStale('host')); // 1
 * ```
 */
export class MemoryPoolLedger implements PoolLedger {
  /** This replica's instance id. */
  readonly instanceId: string;
  /** This replica's lease id, written into its rows. */
  readonly leaseId: string;
  /** The shared state. */
  readonly store: MemoryPoolStore;

  readonly #clock: Clock;
  readonly #ttl: number;
  readonly #caps = new Map<string, ResourceCap>();
  // Per pool, the agents this instance reserved and has not released.
  readonly #held = new Map<string, Set<string>>();
  #reaper: ClockTimer | undefined;
  #closed = false;

  /**
   * @param options - `instanceId` is required; see {@link MemoryPoolLedgerOptions}.
   * @throws TypeError for a missing `instanceId`, an unknown option or a bad value.
   */
  constructor(options: MemoryPoolLedgerOptions) {
    const known = ['instanceId', 'store', 'clock', 'leaseTtlMs'];
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
    const ttl = options.leaseTtlMs ?? 30_000;
    if (typeof ttl !== 'number' || !Number.isFinite(ttl) || ttl <= 0) {
      throw new TypeError(
        `Expected \`leaseTtlMs\` to be a finite number > 0, got \`${String(ttl)}\``,
      );
    }
    this.instanceId = options.instanceId;
    this.leaseId = randomUUID();
    this.store = options.store ?? new MemoryPoolStore();
    this.#clock = options.clock ?? systemClock;
    this.#ttl = ttl;
  }

  /** Declare a pool's cap (a stored document with another cap is refused on use). */
  registerPool(name: string, cap: ResourceCap, options?: RegisterPoolOptions): void {
    this.#assertOpen();
    const pool = validatePoolName(name);
    this.#caps.set(pool, registeredCap(pool, cap, options));
  }

  /** Reserve; true when granted. */
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
   * Reserve `cpus` and `memBytes` for `agentId`; a refusal writes nothing and
   * says which dimension did not fit.
   *
   * @throws TypeError, DuplicateReservationError, LedgerCapMismatchError as the
   *   other ledgers; LedgerLeaseExpiredError once when rows this instance held
   *   vanished although it did not release them.
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
    this.#assertOpen();
    this.#checkHeld(pool);
    const row = this.#ownRow(agentId, cpus, memBytes, extended);
    const result = this.#apply(pool, { kind: 'reserve', row }) as ReserveResult;
    if (result.ok) this.#heldOf(pool).add(agentId);
    return result;
  }

  // The row this instance writes for an agent, now, under its current lease.
  #ownRow(
    agentId: string,
    cpus: number,
    memBytes: number,
    extended: Readonly<Record<string, number>> | undefined,
  ): ReservationRow {
    const row: ReservationRow = {
      instanceId: this.instanceId,
      pid: process.pid,
      bootId: this.store.bootId,
      agentId,
      cpus,
      memBytes,
      reservedAt: this.#clock.now(),
      leaseId: this.leaseId,
    };
    if (extended !== undefined) row.extended = extended;
    return row;
  }

  /**
   * Take over this instance's rows for these agents (another replica or lease
   * of the same instance id, e.g. before a restart), or reserve them again
   * when gone, in one step; see `PoolLedger.adopt`.
   *
   * @returns One answer per agent, in order.
   * @throws TypeError or InvalidInputError for bad agents; otherwise as {@link MemoryPoolLedger.reserve}.
   */
  async adopt(pool: string, agents: readonly AdoptRequest[]): Promise<AdoptResult[]> {
    validatePoolName(pool);
    const requests = checkAdopt(this.#caps, pool, agents);
    this.#assertOpen();
    const rows = requests.map(({ agentId, cpus, memBytes, extended }) =>
      this.#ownRow(agentId, cpus, memBytes, extended),
    );
    const results = this.#apply(pool, { kind: 'adopt', rows }) as AdoptResult[];
    results.forEach((result, i) => {
      if (result.ok) this.#heldOf(pool).add(rows[i]!.agentId);
    });
    return results;
  }

  /**
   * Remove this instance's row for `agentId` (another instance's row answers
   * `false`; `{ anyInstance: true }` or `{ instanceId }` are the operator paths).
   * Idempotent.
   */
  async release(pool: string, agentId: string, options?: ReleaseOptions): Promise<boolean> {
    validatePoolName(pool);
    checkAgentId(agentId);
    const op = releaseOp(agentId, this.instanceId, options);
    this.#assertOpen();
    const removed = this.#apply(pool, op) as boolean;
    this.#held.get(pool)?.delete(agentId);
    return removed;
  }

  /** Remove stale rows now; the number removed. */
  async reapStale(pool: string): Promise<number> {
    validatePoolName(pool);
    this.#assertOpen();
    this.#checkHeld(pool);
    return this.#apply(pool, { kind: 'reap' }) as number;
  }

  /** Summed CPU and memory of the pool's live rows. */
  async getUsage(pool: string): Promise<ResourceAmount> {
    return sumRows(await this.list(pool));
  }

  /** The pool's live rows (copies). */
  async list(pool: string): Promise<ReservationRow[]> {
    return this.inspect(pool).live.map((row) => structuredClone(row));
  }

  /** Live rows and the rows this instance would reap now, with reasons (the store's objects: do not change them). */
  inspect(pool: string): MemoryPoolSnapshot {
    validatePoolName(pool);
    const doc = this.store.get(pool);
    if (doc === undefined) return { live: [], stale: [] };
    return this.#partition(doc);
  }

  /** Reap every registered pool every `intervalMs` (unref'd timer). Idempotent. */
  start(intervalMs = 30_000): void {
    this.#assertOpen();
    if (this.#reaper !== undefined) return;
    if (typeof intervalMs !== 'number' || !Number.isFinite(intervalMs) || intervalMs <= 0) {
      throw new TypeError(
        `Expected \`intervalMs\` to be a finite number > 0, got \`${String(intervalMs)}\``,
      );
    }
    this.#reaper = this.#clock.setInterval(() => {
      for (const pool of this.#caps.keys()) this.#apply(pool, { kind: 'reap' });
    }, intervalMs);
    this.#reaper.unref();
  }

  /** Stop the reaper. */
  stop(): void {
    this.#clock.clearInterval(this.#reaper);
    this.#reaper = undefined;
  }

  /** Release every row this instance holds in every registered pool. */
  async releaseAllForInstance(): Promise<void> {
    this.#assertOpen();
    for (const pool of this.#caps.keys()) {
      this.#apply(pool, { kind: 'releaseInstance', instanceId: this.instanceId });
      this.#held.get(pool)?.clear();
    }
  }

  /** Stop the timers and end the lease: rows left behind are stale for peers at once. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#shut();
    this.store.endLease(this.leaseId, 'ended', this.#clock.now());
  }

  /**
   * Simulate a crash: stop everything without ending the lease, so peers judge
   * the rows left behind stale only once the lease is older than `leaseTtlMs`.
   */
  abandon(): void {
    if (this.#closed) return;
    this.#shut();
    this.store.endLease(this.leaseId, 'abandoned', this.#clock.now());
  }

  #shut(): void {
    this.#closed = true;
    this.stop();
  }

  #assertOpen(): void {
    if (this.#closed) throw new TypeError('This MemoryPoolLedger is closed; create a new one');
  }

  // One read-decide-write, synchronously: nothing else runs in between.
  #apply(pool: string, op: LedgerOp): unknown {
    this.store.openLease(this.leaseId, this.instanceId);
    const stored = this.store.get(pool);
    const registered = this.#caps.get(pool);
    if (stored && registered) assertCap(stored, registered, this.#source(pool));
    const base = stored ?? emptyDocument(registered ?? {});
    const outcome = applyBatch(pool, base, this.#partition(base), [op]);
    if (outcome.dirty) this.store.put(pool, outcome.doc);
    const answer = outcome.answers[0]!;
    if (!answer.ok) throw answer.error;
    return answer.value;
  }

  #partition(doc: LedgerDocument) {
    const now = this.#clock.now();
    return partitionRows(doc.reservations, {
      bootId: this.store.bootId,
      instanceId: this.instanceId,
      // One process: a row of this instance id is this replica's, or one it adopts.
      processState: () => 'alive',
      leaseState: (leaseId) => this.store.leaseState(leaseId, now, this.#ttl),
    });
  }

  // Rows this instance holds that are gone although it did not release them
  // (a peer reaped them after a lapse, or an operator released them): reported
  // once, as the other ledgers do.
  #checkHeld(pool: string): void {
    const held = this.#held.get(pool);
    if (!held || held.size === 0) return;
    const doc = this.store.get(pool);
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
