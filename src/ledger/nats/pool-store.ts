/**
 * The pool keys of one NatsPoolLedger: this instance's lease and the judging of
 * peer leases, reading a pool document, and committing a batch of calls to the
 * pool's key by compare-and-set (here, or through the pool's combiner) with its
 * retries, backoff and the one-time report of a lost lease owed to each pool.
 */
import type { JetStreamClient } from '@nats-io/jetstream';
import type { KV, KvEntry } from '@nats-io/kv';
import type { NatsConnection } from '@nats-io/transport-node';
import { type Clock, sleep } from '../../clock.js';
import {
  LedgerBusyError,
  LedgerLeaseExpiredError,
  LedgerUnavailableError,
  ScalerError,
} from '../../errors.js';
import { isConnectionClosed } from '../../internal/nats-errors.js';
import type { ResourceCap } from '../../resources/types.js';
import { assertCap } from '../document/cap.js';
import {
  type DocumentSource,
  emptyDocument,
  parseDocument,
  serializeDocument,
} from '../document/codec.js';
import { sumRows } from '../document/fit.js';
import type { OpAnswer } from '../group-commit.js';
import { applyBatch, type LedgerOp } from '../ops.js';
import type { LedgerTelemetry } from '../telemetry.js';
import type { LeaseEvent, LeaseInfo, LedgerDocument } from '../types.js';
import { CasWriter, isRevisionConflict } from './cas.js';
import { Combiner } from './combiner.js';
import { backoff, type CheckedOptions, describeNatsError } from './connect.js';
import { poolKey } from './keys.js';
import { partitionByLease, ServerClock } from './liveness.js';
import type { NatsPoolLedgerHooks } from './options.js';
import { endBody, LeaseNotConfirmed, OwnLease } from './own-lease.js';
import { PeerLeases } from './peer-leases.js';
import { MIN_SAFE_NATS_SERVER_VERSION } from './server-version.js';
import type { NatsPoolSnapshot } from './types.js';

/** What the pool store of a NatsPoolLedger is made from. */
export interface PoolStoreParts {
  readonly kv: KV;
  readonly js: JetStreamClient;
  readonly nc: NatsConnection;
  readonly options: CheckedOptions;
  readonly bootId: string;
  readonly hooks: Partial<NatsPoolLedgerHooks>;
  /** This host's monotonic clock, which times the lease and the deadlines. */
  readonly monotonic: () => number;
  /** The injected clock: the lease's timers. */
  readonly timers: Clock;
  /** The registered caps, by pool (read only here). */
  readonly caps: ReadonlyMap<string, ResourceCap>;
  readonly telemetry: LedgerTelemetry | undefined;
  /** Pools with calls queued in this process (a lost lease is reported to them too). */
  queuedPools(): Iterable<string>;
  /** Queue a call received from another instance in the ledger's batches. */
  enqueue(pool: string, op: LedgerOp): Promise<unknown>;
  isClosed(): boolean;
}

/** Reads and compare-and-set writes of the pool keys of one NatsPoolLedger, under its lease. */
export class PoolStore {
  readonly #kv: KV;
  readonly #cas: CasWriter;
  readonly #bucket: string;
  readonly #instanceId: string;
  readonly #leaseMs: number;
  readonly #timeoutMs: number;
  readonly #hooks: Partial<NatsPoolLedgerHooks>;
  readonly #caps: ReadonlyMap<string, ResourceCap>;
  readonly #telemetry: LedgerTelemetry | undefined;
  readonly #monotonic: () => number;
  /** The last document this instance wrote or read in a commit, per pool, with its revision. */
  readonly #written = new Map<string, { revision: number; doc: LedgerDocument }>();
  /** The last revision of each pool key the server acknowledged to this instance. */
  readonly #acked = new Map<string, number>();
  /** Pools that have not yet been told that this instance's previous lease was lost. */
  readonly #unreported = new Set<string>();
  readonly #lease: OwnLease;
  readonly #peers: PeerLeases;
  /** The cross-process combiner; undefined with `combine: false`. */
  readonly #combiner: Combiner | undefined;

  constructor(parts: PoolStoreParts) {
    const { kv, nc, options } = parts;
    this.#kv = kv;
    this.#cas = new CasWriter(
      parts.js,
      options.bucket,
      async (key) => (await kv.get(key))?.revision ?? 0,
      parts.monotonic,
    );
    this.#bucket = options.bucket;
    this.#instanceId = options.instanceId;
    this.#leaseMs = options.leaseMs;
    this.#timeoutMs = options.timeoutMs;
    this.#hooks = parts.hooks;
    this.#caps = parts.caps;
    this.#telemetry = parts.telemetry;
    this.#monotonic = parts.monotonic;
    const serverClock = new ServerClock(this.#monotonic);
    this.#lease = new OwnLease({
      kv,
      cas: this.#cas,
      bucket: this.#bucket,
      instanceId: this.#instanceId,
      bootId: parts.bootId,
      leaseMs: this.#leaseMs,
      marginMs: options.leaseMarginMs,
      monotonic: this.#monotonic,
      serverClock,
      timers: parts.timers,
      telemetry: this.#telemetry,
      onLapse: () => {
        for (const pool of this.#caps.keys()) this.#unreported.add(pool);
        for (const pool of parts.queuedPools()) this.#unreported.add(pool);
      },
      onRenewed: (lost) => this.#peers.end(lost),
    });
    this.#peers = new PeerLeases({
      kv,
      cas: this.#cas,
      leaseMs: this.#leaseMs,
      marginMs: options.leaseMarginMs,
      healthySince: () => {
        const since = this.#lease.healthySince();
        return since === undefined ? undefined : serverClock.at(since);
      },
      clock: serverClock,
      ownLeaseId: () => this.#lease.id,
      fencedBody: () => endBody(this.#instanceId, 'fenced'),
    });
    if (options.combine !== false) {
      this.#combiner = new Combiner({
        nc,
        kv,
        cas: this.#cas,
        bucket: this.#bucket,
        instanceId: this.#instanceId,
        timeoutMs: this.#timeoutMs,
        leaseId: () => this.#lease.id,
        leaseConfirmed: () => this.#lease.confirmed,
        assertSendable: () => {
          if (!this.#lease.confirmed) throw new LeaseNotConfirmed(this.#lease.info().health);
        },
        leaseState: (id) => this.#peers.state(id),
        registeredCap: (pool) => this.#caps.get(pool),
        enqueue: (pool, op) => parts.enqueue(pool, op),
        commitHere: (pool, ops) => this.#commitHere(pool, ops),
        isClosed: () => parts.isClosed(),
        ...(this.#hooks.onForward ? { onForward: this.#hooks.onForward } : {}),
      });
    }
  }

  /** This instance's current lease id (it changes after a lost lease). */
  get leaseId(): string {
    return this.#lease.id;
  }

  /** This instance's own lease as of now. */
  leaseInfo(): LeaseInfo {
    return this.#lease.info();
  }

  /** Call `listener` on every event of this instance's lease; returns the function that removes it. */
  onLeaseEvent(listener: (event: LeaseEvent) => void): () => void {
    return this.#lease.onEvent(listener);
  }

  /** Write this instance's first heartbeat (once; the caller retries until its deadline). */
  openLease(): Promise<void> {
    return this.#lease.open();
  }

  /** Keep the heartbeat fresh, watch the peers' leases, and serve the combiner. */
  async startWatching(): Promise<void> {
    this.#lease.startHeartbeat();
    await this.#peers.watch();
    this.#combiner?.start();
  }

  /** Stop the heartbeat and the watch of peer leases. */
  stop(): void {
    this.#lease.stop();
    this.#peers.stop();
  }

  /** Close the combiner and end the lease (peers reap rows left behind at once). */
  async end(): Promise<void> {
    await this.#combiner?.close();
    await this.#lease.end();
  }

  /**
   * A pool as this instance sees it now (one read; writes nothing except fencing
   * a peer lease it finds expired).
   */
  async read(pool: string): Promise<NatsPoolSnapshot> {
    const key = poolKey(pool);
    const source = this.#source(pool);
    const deadline = this.#monotonic() + this.#timeoutMs;
    for (let attempt = 0; ; attempt++) {
      try {
        await this.#ensureLease(pool);
        const entry = await this.#kv.get(key);
        this.#checkNotBehind(pool, entry?.revision ?? 0);
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

  // A key read back below a revision the server acknowledged to this instance:
  // the server lost that write (older servers, after a leader isolation), and
  // the grants it held are gone from the books. Said once per lost revision.
  #checkNotBehind(pool: string, revision: number): void {
    const acked = this.#acked.get(pool);
    if (acked === undefined || revision >= acked) return;
    this.#acked.delete(pool);
    process.emitWarning(
      `Pool ${JSON.stringify(pool)} in NATS KV ${this.#bucket}: the server acknowledged revision ${acked} of ${poolKey(pool)} to instance ${JSON.stringify(this.#instanceId)} but now holds revision ${revision}: it lost an acknowledged write, and the reservations that write held are no longer counted. Run nats-server ${MIN_SAFE_NATS_SERVER_VERSION} or later (see docs/ledger.md).`,
      { code: 'SCALER_NATS_WRITE_LOST', type: 'ScalerPrimitivesWarning' },
    );
  }

  #source(pool: string): DocumentSource {
    return { pool, location: `NATS KV ${this.#bucket}/${poolKey(pool)}` };
  }

  #documentOf(entry: KvEntry | null, source: DocumentSource): LedgerDocument | undefined {
    if (entry === null || entry.operation !== 'PUT') return undefined;
    const doc = parseDocument(entry.string(), source);
    const registered = this.#caps.get(source.pool);
    if (registered) assertCap(doc, registered, source);
    return doc;
  }

  // A batch with calls from other instances is committed here (or refused);
  // this instance's own calls go through the pool's combiner.
  async commit(pool: string, ops: LedgerOp[]): Promise<OpAnswer[]> {
    const combiner = this.#combiner;
    if (!combiner || ops.some((op) => combiner.isForwarded(op))) return this.#commitHere(pool, ops);
    // A lost lease is reported to this instance's callers whoever commits, and
    // nothing is sent under a lease the server has not confirmed within a third
    // of its window (the combiner would write the rows under it).
    const report = ops.some((op) => !(op.kind === 'reap' && op.background));
    const deadline = this.#monotonic() + this.#timeoutMs;
    for (let attempt = 0; ; attempt++) {
      let unconfirmed: unknown;
      try {
        await this.#ensureLease(pool, report);
      } catch (error) {
        if (error instanceof ScalerError) throw error;
        unconfirmed = error;
      }
      if (unconfirmed === undefined) {
        // Rows carry the lease they were sent under: the combiner keeps it.
        for (const op of ops) {
          if (op.kind === 'reserve') op.row.leaseId = this.#lease.id;
          else if (op.kind === 'adopt') for (const row of op.rows) row.leaseId = this.#lease.id;
        }
        try {
          return await combiner.commit(pool, ops);
        } catch (error) {
          // The combiner checks the lease again before every send (retries to a
          // combiner that does not answer can outlast the confirmation).
          if (!(error instanceof LeaseNotConfirmed)) throw error;
          unconfirmed = error;
        }
      }
      // An earlier send that got no answer may still be applied by its combiner.
      const maybe = ops.some((op) => 'maybeApplied' in op && op.maybeApplied === true);
      if (isConnectionClosed(unconfirmed)) throw this.#unavailable(pool, unconfirmed, maybe);
      if (this.#monotonic() >= deadline) {
        throw maybe ? this.#unavailable(pool, unconfirmed) : this.#unconfirmed(pool, unconfirmed);
      }
      await sleep(backoff(attempt, 50, 1000));
    }
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
        if (entry !== undefined) this.#checkNotBehind(pool, entry?.revision ?? 0);
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
        const refused = await this.#combiner?.refused(pool, ops);
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
        // The read and the lease judgements took time: the lease must still be confirmed.
        if (!this.#lease.confirmed) throw new LeaseNotConfirmed(this.#lease.info().health);
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
        this.#acked.set(pool, revision);
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
        if (
          lastError instanceof LeaseNotConfirmed &&
          !ops.some((op) => 'maybeApplied' in op && op.maybeApplied === true)
        ) {
          throw this.#unconfirmed(pool, lastError);
        }
        if (!conflict) throw this.#unavailable(pool, lastError);
        throw new LedgerBusyError(
          pool,
          undefined,
          `Pool ${JSON.stringify(pool)} in NATS KV ${this.#bucket}: lost ${conflicts} compare-and-set races in ${this.#timeoutMs} ms to other writers. The pool is very contended: raise \`timeoutMs\`, or split the pool into smaller pools.`,
          { cause: lastError },
        );
      }
      await sleep(conflict ? backoff(attempt, 2, 100) : backoff(attempt, 50, 1000));
    }
  }

  #unavailable(pool: string, error: unknown, maybe = true): LedgerUnavailableError {
    const why = isConnectionClosed(error)
      ? 'the connection to NATS is closed'
      : `NATS did not complete the operation within ${this.#timeoutMs} ms`;
    const outcome = maybe
      ? 'A change this call was making may or may not have been stored; a later read shows which.'
      : 'Nothing was written.';
    return new LedgerUnavailableError(
      pool,
      `Pool ${JSON.stringify(pool)} in NATS KV ${this.#bucket}: ${why} (last error: ${describeNatsError(error)}). ${outcome} Retry when the server is back.`,
      { cause: error },
    );
  }

  // The call's deadline passed before the server confirmed this instance's
  // lease: nothing was written. Past the lease's deadline, the lease is lost.
  #unconfirmed(pool: string, error: unknown): LedgerUnavailableError | LedgerLeaseExpiredError {
    const lease = this.#lease.info();
    if (lease.health === 'lost') {
      return new LedgerLeaseExpiredError(
        pool,
        `Instance ${JSON.stringify(this.#instanceId)} could not renew its lease on NATS KV ${this.#bucket} before its deadline (last error: ${describeNatsError(error)}), so nothing was written to pool ${JSON.stringify(pool)}, and its reservations there made before may be reaped by peers once the deadline plus ${lease.marginMs} ms has passed. Treat them as lost: stop or re-reserve their agents once the server is reachable.`,
      );
    }
    return new LedgerUnavailableError(
      pool,
      `Pool ${JSON.stringify(pool)} in NATS KV ${this.#bucket}: the server did not confirm this instance's lease within ${this.#timeoutMs} ms (last error: ${describeNatsError(error)}), so nothing was written. Retry when the server is back.`,
      { cause: error },
    );
  }

  /**
   * Before acting on a pool: make sure the lease is ours and confirmed. A
   * heartbeat older than a third of the window (a stall, a slow server) is
   * refreshed first; a lost lease is replaced, and reported once to each pool.
   *
   * @throws LeaseNotConfirmed (retried by the callers) when the server did not confirm it.
   */
  async #ensureLease(pool: string, report = true): Promise<void> {
    await this.#lease.refresh(pool);
    if (report && this.#unreported.delete(pool)) {
      throw new LedgerLeaseExpiredError(
        pool,
        `Instance ${JSON.stringify(this.#instanceId)} lost its lease on NATS KV ${this.#bucket} (its heartbeat was not refreshed within ${this.#leaseMs} ms and a peer ended it), so its reservations in pool ${JSON.stringify(pool)} made before may have been reaped and given to others. Treat them as lost: stop or re-reserve their agents. This instance now holds a new lease and the next call proceeds.`,
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
