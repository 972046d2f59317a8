import type { JetStreamClient } from '@nats-io/jetstream';
import type { KV, KvEntry } from '@nats-io/kv';
import type { NatsConnection } from '@nats-io/transport-node';
import { type Clock, monotonicNow, resolveClock, sleep } from '../../clock.js';
import {
  LedgerBusyError,
  LedgerLeaseExpiredError,
  LedgerUnavailableError,
  ScalerError,
} from '../../errors.js';
import { isConnectionClosed } from '../../internal/nats-errors.js';
import { testHooksOf } from '../../internal/test-hooks.js';
import type { ResourceAmount, ResourceCap } from '../../resources/types.js';
import {
  checkAdopt,
  checkAgentId,
  checkReserve,
  checkReserveOptions,
  registeredCap,
} from '../checks.js';
import {
  assertCap,
  type DocumentSource,
  emptyDocument,
  parseDocument,
  serializeDocument,
  sumRows,
} from '../document.js';
import { defaultFs } from '../fs.js';
import { GroupCommit, type OpAnswer } from '../group-commit.js';
import { applyBatch, type LedgerOp, releaseOp } from '../ops.js';
import { readBootId } from '../proc.js';
import { DEFAULT_REAP_INTERVAL_MS, Reaper } from '../reaper.js';
import { createLedgerTelemetry } from '../telemetry.js';
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
} from '../types.js';
import { CasWriter, isRevisionConflict } from './cas.js';
import { Combiner } from './combiner.js';
import {
  backoff,
  type CheckedOptions,
  checkConnectOptions,
  describeNatsError,
  openBucket,
  openConnection,
  retryUntil,
} from './connect.js';
import { poolKey } from './keys.js';
import { partitionByLease, ServerClock } from './liveness.js';
import type { NatsPoolLedgerHooks } from './options.js';
import { endBody, OwnLease } from './own-lease.js';
import { PeerLeases } from './peer-leases.js';
import type { NatsPoolLedgerOptions, NatsPoolSnapshot } from './types.js';

/**
 * A cross-host ledger of reservations against named pools, kept in a NATS
 * JetStream KV bucket: one key per pool holding the same document as the file
 * ledger, every change a compare-and-set on the key's revision.
 *
 * Liveness: each instance keeps a heartbeat key (`lease.<leaseId>`) fresh.
 * A peer whose heartbeat is older than `leaseMs`, measured with the server's
 * timestamps, is fenced (an end marker is written to its heartbeat key at the
 * revision that was judged, so a late refresh and the fence cannot both win)
 * and its rows are reaped. An instance that finds its own heartbeat fenced fails its next
 * operation on each pool with `LedgerLeaseExpiredError`, then carries on under
 * a new lease.
 *
 * Concurrent calls on one pool in this process share one read and one
 * compare-and-set (group commit); each still gets its own answer, in call order.
 *
 * @example
 * ```ts
 * import { NatsPoolLedger } from 'scaler-primitives/ledger/nats';
 *
 * const ledger = await NatsPoolLedger.connect({
 *   servers: 'nats://nats.internal:4222',
 *   instanceId: 'orchestrator-eu-1',
 * });
 * ledger.registerPool('gpu', { maxCpu: 64, maxMemoryBytes: 512 * 2 ** 30 });
 * ledger.start();
 * if (await ledger.tryReserve('gpu', 'agent-7', 8, 64 * 2 ** 30)) {
 *   // start the agent; when it is gone:
 *   await ledger.release('gpu', 'agent-7');
 * }
 * await ledger.releaseAllForInstance();
 * await ledger.close();
 * ```
 */
export class NatsPoolLedger implements PoolLedger {
  /** This instance's id. */
  readonly instanceId: string;
  /** The KV bucket. */
  readonly bucket: string;
  /** The lease window in ms. */
  readonly leaseMs: number;

  readonly #kv: KV;
  readonly #cas: CasWriter;
  readonly #nc: NatsConnection;
  readonly #ownsConnection: boolean;
  readonly #timeoutMs: number;
  readonly #bootId: string;
  readonly #hooks: Partial<NatsPoolLedgerHooks>;
  readonly #caps = new Map<string, ResourceCap>();
  readonly #batches = new GroupCommit<LedgerOp>((pool, ops) => this.#commit(pool, ops));
  /** The last document this instance wrote or read in a commit, per pool, with its revision. */
  readonly #written = new Map<string, { revision: number; doc: LedgerDocument }>();
  /** The cross-process combiner; undefined with `combine: false`. */
  #combiner: Combiner | undefined;
  readonly #reaper = new Reaper(
    () => this.#caps.keys(),
    // The reaper's own rounds must not use up the one-time lost-lease report
    // that a caller's next operation on the pool is owed.
    (pool) => this.#enqueue(pool, { kind: 'reap', background: true }),
    () => this.#timeSource,
  );
  readonly #monotonic: () => number;
  /** Pools that have not yet been told that this instance's previous lease was lost. */
  readonly #unreported = new Set<string>();
  readonly #lease: OwnLease;
  readonly #peers: PeerLeases;
  readonly #timeSource: Clock;
  #closed = false;
  readonly #telemetry;

  private constructor(
    kv: KV,
    js: JetStreamClient,
    nc: NatsConnection,
    ownsConnection: boolean,
    options: CheckedOptions,
  ) {
    this.#kv = kv;
    this.#cas = new CasWriter(js, options.bucket);
    this.#nc = nc;
    this.#ownsConnection = ownsConnection;
    this.instanceId = options.instanceId;
    this.bucket = options.bucket;
    this.leaseMs = options.leaseMs;
    this.#timeoutMs = options.timeoutMs;
    this.#bootId = options.bootId ?? readBootId(defaultFs);
    this.#hooks = testHooksOf<NatsPoolLedgerHooks>(options);
    this.#monotonic = this.#hooks.monotonic ?? monotonicNow;
    this.#timeSource = resolveClock(options.clock, undefined);
    const serverClock = new ServerClock(this.#monotonic);
    this.#lease = new OwnLease({
      kv,
      cas: this.#cas,
      instanceId: this.instanceId,
      bootId: this.#bootId,
      leaseMs: this.leaseMs,
      monotonic: this.#monotonic,
      serverClock,
      timers: this.#timeSource,
      onLapse: () => {
        for (const pool of this.#caps.keys()) this.#unreported.add(pool);
        for (const pool of this.#batches.pools()) this.#unreported.add(pool);
      },
      onRenewed: (lost) => this.#peers.end(lost),
    });
    this.#peers = new PeerLeases({
      kv,
      cas: this.#cas,
      leaseMs: this.leaseMs,
      clock: serverClock,
      ownLeaseId: () => this.#lease.id,
      fencedBody: () => endBody(this.instanceId, 'fenced'),
    });
    this.#telemetry = createLedgerTelemetry(options, 'nats', {
      clock: this.#timeSource,
      pools: () => this.#caps.keys(),
      read: (pool) => this.inspect(pool),
    });
    if (options.combine !== false) {
      this.#combiner = new Combiner({
        nc,
        kv,
        cas: this.#cas,
        bucket: this.bucket,
        instanceId: this.instanceId,
        timeoutMs: this.#timeoutMs,
        leaseId: () => this.#lease.id,
        leaseConfirmed: () => this.#lease.confirmed,
        leaseState: (id) => this.#peers.state(id),
        registeredCap: (pool) => this.#caps.get(pool),
        enqueue: (pool, op) => this.#enqueue(pool, op),
        commitHere: (pool, ops) => this.#commitHere(pool, ops),
        isClosed: () => this.#closed,
        ...(this.#hooks.onForward ? { onForward: this.#hooks.onForward } : {}),
      });
    }
  }

  /**
   * Connect, open (or create) the bucket and take a lease.
   *
   * @throws InvalidInputError for options that are not an object or hold an
   *   unknown key (the message names it, the nearest accepted key and all of them).
   * @throws TypeError for a missing `instanceId`, both or neither of `nc` and
   *   `servers`, or a timing, replica count or bucket name out of range.
   * @throws LedgerUnavailableError when the servers cannot be reached, JetStream
   *   is not enabled, or the bucket cannot be opened within `timeoutMs`.
   */
  static async connect(options: NatsPoolLedgerOptions): Promise<NatsPoolLedger> {
    const checked = checkConnectOptions(options);
    const { nc, owns } = await openConnection(checked);
    try {
      const deadline = monotonicNow() + checked.timeoutMs;
      const { js, kv } = await openBucket(nc, checked, deadline);
      const ledger = new NatsPoolLedger(kv, js, nc, owns, checked);
      await retryUntil(
        deadline,
        () => ledger.#lease.open(),
        (error) =>
          new LedgerUnavailableError(
            '',
            `Cannot write this instance's heartbeat to the NATS KV bucket ${JSON.stringify(checked.bucket)}: ${describeNatsError(error)}.`,
            { cause: error },
          ),
      );
      ledger.#lease.startHeartbeat();
      await ledger.#peers.watch();
      ledger.#combiner?.start();
      return ledger;
    } catch (error) {
      if (owns) await nc.close().catch(() => {});
      throw error;
    }
  }

  /** This instance's current lease id, written into its rows (it changes after a lost lease). */
  get leaseId(): string {
    return this.#lease.id;
  }

  /**
   * Declare the cap a pool must have. The first write creates the pool key with
   * this cap; a stored document with another cap is refused with `LedgerCapMismatchError`.
   *
   * @throws InvalidInputError for a pool name that is invalid or cannot be a KV key.
   * @throws TypeError for a cap field that is not a finite number >= 0.
   */
  registerPool(name: string, cap: ResourceCap, options?: RegisterPoolOptions): void {
    poolKey(name);
    this.#caps.set(name, registeredCap(name, cap, options));
  }

  /**
   * Reserve `cpus` and `memBytes` for `agentId` in `pool`; true when granted.
   *
   * @throws see {@link NatsPoolLedger.reserve}.
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
   * Reserve `cpus` and `memBytes` for `agentId` in `pool`. Rows of expired
   * leases are left out of the sum (and dropped when the key is written).
   * A refusal says which dimension did not fit and writes nothing.
   *
   * @throws TypeError when the pool is not registered or an amount is not a finite number >= 0.
   * @throws DuplicateReservationError when the pool already holds a live row for `agentId`.
   * @throws LedgerCorruptError, LedgerCapMismatchError when the stored document is bad (it is left as it is).
   * @throws LedgerBusyError when the compare-and-set kept losing until `timeoutMs`.
   * @throws LedgerUnavailableError when the server did not answer within `timeoutMs`.
   * @throws LedgerLeaseExpiredError when this instance's lease was lost since its
   *   last operation on this pool (its rows may have been reaped); the next call works.
   */
  async reserve(
    pool: string,
    agentId: string,
    cpus: number,
    memBytes: number,
    options?: ReserveOptions,
  ): Promise<ReserveResult> {
    poolKey(pool);
    checkReserve(this.#caps, pool, agentId, cpus, memBytes);
    const extended = checkReserveOptions(options);
    const row = this.#ownRow(agentId, cpus, memBytes, extended);
    return (await this.#enqueue(pool, { kind: 'reserve', row })) as ReserveResult;
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
      bootId: this.#bootId,
      agentId,
      cpus,
      memBytes,
      reservedAt: this.#timeSource.now(),
      leaseId: this.#lease.id,
    };
    if (extended !== undefined) row.extended = extended;
    return row;
  }

  /**
   * Take over the rows these agents hold in `pool` under this instance id but
   * another lease (this host before a restart), or reserve them again when
   * gone; see {@link PoolLedger.adopt}. One compare-and-set write for all of them.
   *
   * @returns One answer per agent, in order.
   * @throws TypeError or InvalidInputError for bad agents; otherwise as {@link NatsPoolLedger.reserve}.
   */
  async adopt(pool: string, agents: readonly AdoptRequest[]): Promise<AdoptResult[]> {
    poolKey(pool);
    const rows = checkAdopt(this.#caps, pool, agents).map(({ agentId, cpus, memBytes, extended }) =>
      this.#ownRow(agentId, cpus, memBytes, extended),
    );
    return (await this.#enqueue(pool, { kind: 'adopt', rows })) as AdoptResult[];
  }

  /**
   * Remove the reservation of `agentId` in `pool` that this instance made
   * (another instance's row answers `false`; see {@link PoolLedger.release} for
   * the operator paths `anyInstance` and `instanceId`). Idempotent.
   *
   * @returns true when a row was removed.
   * @throws as {@link NatsPoolLedger.reserve} (except the duplicate and registration errors).
   */
  async release(pool: string, agentId: string, options?: ReleaseOptions): Promise<boolean> {
    poolKey(pool);
    checkAgentId(agentId);
    return (await this.#enqueue(pool, releaseOp(agentId, this.instanceId, options))) as boolean;
  }

  /**
   * Remove the rows of expired leases from `pool` now.
   *
   * @returns The number of rows removed.
   * @throws as {@link NatsPoolLedger.release}.
   */
  async reapStale(pool: string): Promise<number> {
    poolKey(pool);
    return (await this.#enqueue(pool, { kind: 'reap' })) as number;
  }

  /**
   * Summed CPU and memory of `pool`'s live rows (one read, no write).
   *
   * @throws as {@link NatsPoolLedger.inspect}.
   */
  async getUsage(pool: string): Promise<ResourceAmount> {
    return (await this.inspect(pool)).usage;
  }

  /**
   * `pool`'s live rows (one read, no write).
   *
   * @throws as {@link NatsPoolLedger.inspect}.
   */
  async list(pool: string): Promise<ReservationRow[]> {
    return (await this.inspect(pool)).live;
  }

  /**
   * Everything about a pool as this instance sees it now: live rows, rows of
   * expired leases, the stored cap and the key's revision. Writes nothing
   * (except fencing a peer lease it finds expired).
   *
   * @throws LedgerCorruptError when the stored document is bad.
   * @throws LedgerUnavailableError, LedgerLeaseExpiredError as {@link NatsPoolLedger.reserve}.
   */
  async inspect(pool: string): Promise<NatsPoolSnapshot> {
    const key = poolKey(pool);
    this.#assertOpen();
    const source = this.#source(pool);
    const deadline = this.#monotonic() + this.#timeoutMs;
    for (let attempt = 0; ; attempt++) {
      try {
        await this.#ensureLease(pool);
        const entry = await this.#kv.get(key);
        const doc = this.#documentOf(entry, source) ?? emptyDocument(this.#caps.get(pool) ?? {});
        const { live, stale } = partitionByLease(
          doc.reservations,
          await this.#peers.facts(doc.reservations),
        );
        this.#telemetry?.observed(pool, doc.cap, live);
        return {
          pool,
          key,
          revision: entry?.revision ?? 0,
          cap: doc.cap,
          live,
          stale,
          usage: sumRows(live),
        };
      } catch (error) {
        if (error instanceof ScalerError) throw error;
        if (isConnectionClosed(error) || this.#monotonic() >= deadline) {
          throw this.#unavailable(pool, error);
        }
        await sleep(backoff(attempt, 50, 1000));
      }
    }
  }

  /**
   * Reap every registered pool every `intervalMs`. Idempotent; the timer is
   * unref'd and a failed round is retried on the next tick (it never throws).
   */
  start(intervalMs = DEFAULT_REAP_INTERVAL_MS): void {
    this.#reaper.start(intervalMs);
  }

  /** Stop the reaper started by {@link NatsPoolLedger.start}. */
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
   * Stop the timers, wait for operations in progress, end the lease (its
   * heartbeat key gets an end marker, so peers reap rows left behind at once) and close
   * the connection when the ledger opened it.
   */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.#reaper.close();
    this.#telemetry?.close();
    this.#lease.stop();
    this.#peers.stop();
    await this.#batches.idle();
    await this.#combiner?.close();
    await this.#lease.end();
    if (this.#ownsConnection) await this.#nc.close().catch(() => {});
  }

  #source(pool: string): DocumentSource {
    return { pool, location: `NATS KV ${this.bucket}/${poolKey(pool)}` };
  }

  #documentOf(entry: KvEntry | null, source: DocumentSource): LedgerDocument | undefined {
    if (entry === null || entry.operation !== 'PUT') return undefined;
    const doc = parseDocument(entry.string(), source);
    const registered = this.#caps.get(source.pool);
    if (registered) assertCap(doc, registered, source);
    return doc;
  }

  #assertOpen(): void {
    if (this.#closed) throw new TypeError('This NatsPoolLedger is closed; connect a new one');
  }

  #enqueue(pool: string, op: LedgerOp): Promise<unknown> {
    if (this.#closed) {
      return Promise.reject(new TypeError('This NatsPoolLedger is closed; connect a new one'));
    }
    return (
      this.#telemetry?.op(pool, op, this.#batches.enqueue(pool, op)) ??
      this.#batches.enqueue(pool, op)
    );
  }

  // A batch with calls from other instances is committed here (or refused);
  // this instance's own calls go through the pool's combiner.
  async #commit(pool: string, ops: LedgerOp[]): Promise<OpAnswer[]> {
    const combiner = this.#combiner;
    if (!combiner || ops.some((op) => combiner.isForwarded(op))) return this.#commitHere(pool, ops);
    try {
      // A lost lease is reported to this instance's callers whoever commits.
      await this.#ensureLease(
        pool,
        ops.some((op) => !(op.kind === 'reap' && op.background)),
      );
    } catch (error) {
      if (error instanceof ScalerError) throw error;
      // The server is unreachable: the commit below retries until its deadline.
    }
    // Rows carry the lease they were sent under: the combiner keeps it.
    for (const op of ops) {
      if (op.kind === 'reserve') op.row.leaseId = this.#lease.id;
      else if (op.kind === 'adopt') for (const row of op.rows) row.leaseId = this.#lease.id;
    }
    return combiner.commit(pool, ops);
  }

  async #commitHere(pool: string, ops: LedgerOp[]): Promise<OpAnswer[]> {
    const key = poolKey(pool);
    const source = this.#source(pool);
    const registered = this.#caps.get(pool);
    const deadline = this.#monotonic() + this.#timeoutMs;
    let conflicts = 0;
    const local = (op: LedgerOp) => this.#combiner?.isForwarded(op) !== true;
    const report = ops.some((op) => local(op) && !(op.kind === 'reap' && op.background));
    for (let attempt = 0; ; attempt++) {
      let lastError: unknown;
      try {
        await this.#ensureLease(pool, report);
        // The pool's combiner starts from the document it last wrote (no read):
        // when another writer moved the key since, the write loses and the retry reads.
        const cached =
          attempt === 0 && this.#combiner?.combines(pool) ? this.#written.get(pool) : undefined;
        this.#written.delete(pool);
        const entry = cached ? undefined : await this.#kv.get(key);
        const base =
          cached?.doc ?? this.#documentOf(entry ?? null, source) ?? emptyDocument(registered ?? {});
        const baseRevision = cached?.revision ?? entry?.revision ?? 0;
        const partition = partitionByLease(
          base.reservations,
          await this.#peers.facts(base.reservations),
        );
        for (const op of ops)
          if (op.kind === 'reserve' && local(op)) op.row.leaseId = this.#lease.id;
          else if (op.kind === 'adopt' && local(op)) {
            for (const row of op.rows) row.leaseId = this.#lease.id;
          }
        // Calls from other instances that may not be applied now are answered apart.
        const refused = this.#combiner?.refused(pool, ops);
        const applied = refused?.size ? ops.filter((op) => !refused.has(op)) : ops;
        const outcome = withRefused(ops, refused, applyBatch(pool, base, partition, applied));
        // Answers from a document no write confirmed must come from a fresh read.
        if (!outcome.dirty && cached) continue;
        if (!outcome.dirty) {
          this.#telemetry?.observed(pool, base.cap, partition.live);
          this.#written.set(pool, { revision: baseRevision, doc: base });
          return outcome.answers;
        }
        const data = serializeDocument(outcome.doc);
        let revision: number;
        try {
          // A deleted or purged key still has a revision to compare against.
          revision = await this.#cas.write(key, data, baseRevision);
        } catch (error) {
          if (!isRevisionConflict(error)) {
            // No answer: the write may have landed. The retry recognizes our own rows.
            for (const op of applied) {
              if (op.kind === 'reserve' || op.kind === 'release') op.maybeApplied = true;
            }
          }
          throw error;
        }
        this.#written.set(pool, { revision, doc: outcome.doc });
        this.#telemetry?.committed(
          pool,
          outcome.doc.cap,
          outcome.doc.reservations,
          partition.stale,
        );
        this.#hooks.afterCommit?.(pool, revision, outcome.doc);
        return outcome.answers;
      } catch (error) {
        if (error instanceof ScalerError) throw error;
        lastError = error;
      }
      const conflict = isRevisionConflict(lastError);
      if (conflict) {
        conflicts++;
        this.#hooks.onConflict?.(pool);
        this.#telemetry?.conflict(pool);
      }
      if (isConnectionClosed(lastError)) throw this.#unavailable(pool, lastError);
      if (this.#monotonic() >= deadline) {
        if (!conflict) throw this.#unavailable(pool, lastError);
        throw new LedgerBusyError(
          pool,
          undefined,
          `Pool ${JSON.stringify(pool)} in NATS KV ${this.bucket}: lost ${conflicts} compare-and-set races in ${this.#timeoutMs} ms to other writers. The pool is very contended: raise \`timeoutMs\`, or split the pool into smaller pools.`,
          { cause: lastError },
        );
      }
      await sleep(conflict ? backoff(attempt, 2, 100) : backoff(attempt, 50, 1000));
    }
  }

  #unavailable(pool: string, error: unknown): LedgerUnavailableError {
    const why = isConnectionClosed(error)
      ? 'the connection to NATS is closed'
      : `NATS did not complete the operation within ${this.#timeoutMs} ms`;
    return new LedgerUnavailableError(
      pool,
      `Pool ${JSON.stringify(pool)} in NATS KV ${this.bucket}: ${why} (last error: ${describeNatsError(error)}). A change this call was making may or may not have been stored; a later read shows which. Retry when the server is back.`,
      { cause: error },
    );
  }

  /**
   * Before acting on a pool: make sure the lease is ours. A heartbeat older than
   * half the window (a stall, a slow server) is refreshed first; a lost lease is
   * replaced, and reported once to each pool.
   */
  async #ensureLease(pool: string, report = true): Promise<void> {
    await this.#lease.refresh();
    if (report && this.#unreported.delete(pool)) {
      throw new LedgerLeaseExpiredError(
        pool,
        `Instance ${JSON.stringify(this.instanceId)} lost its lease on NATS KV ${this.bucket} (its heartbeat was not refreshed within ${this.leaseMs} ms and a peer ended it), so its reservations in pool ${JSON.stringify(pool)} made before may have been reaped and given to others. Treat them as lost: stop or re-reserve their agents. This instance now holds a new lease and the next call proceeds.`,
      );
    }
  }
}

/** A batch outcome over `applied` ops, answered for every op of `ops` (refused ones with their error). */
function withRefused(
  ops: readonly LedgerOp[],
  refused: ReadonlyMap<LedgerOp, Error> | undefined,
  outcome: ReturnType<typeof applyBatch>,
): ReturnType<typeof applyBatch> {
  if (!refused?.size) return outcome;
  const answers = outcome.answers[Symbol.iterator]();
  return {
    ...outcome,
    answers: ops.map((op) => {
      const error = refused.get(op);
      return error ? { ok: false, error } : answers.next().value!;
    }),
  };
}
