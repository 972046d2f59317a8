/**
 * The pool keys of one NatsPoolLedger: this instance's lease and the judging of
 * peer leases, reading a pool document, and committing a batch of calls to the
 * pool's key by compare-and-set (here, or through the pool's combiner) with its
 * retries, backoff and the one-time report of a lost lease owed to each pool.
 */
import type { JetStreamClient } from '@nats-io/jetstream';
import type { KV, KvEntry } from '@nats-io/kv';
import type { NatsConnection } from '@nats-io/transport-node';
import { type Clock, type ClockTimer, sleep } from '../../clock.js';
import {
  LedgerBusyError,
  LedgerLeaseExpiredError,
  LedgerOutcomeUnknownError,
  LedgerUnavailableError,
  ScalerError,
} from '../../errors/index.js';
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
import type { LedgerAnswer, OpAnswer } from '../ops.js';
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
  enqueue(pool: string, op: LedgerOp): Promise<LedgerAnswer>;
  isClosed(): boolean;
}

/** What became of a call whose caller was answered at its deadline (see {@link PoolStore.abandon}). */
export type Abandoned = 'not-sent' | 'unknown';

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
  /** Each own call's deadline (monotonic ms): when its caller is answered, whatever happens. */
  readonly #deadlines = new WeakMap<LedgerOp, number>();
  /** Own calls that went out in a write or a request to a combiner (they may be written). */
  readonly #sent = new WeakSet<LedgerOp>();
  /** Own calls answered at their deadline: never started (`not-sent`), or settled later (`unknown`). */
  readonly #abandoned = new WeakMap<LedgerOp, Abandoned>();
  /**
   * Per pool, the agents whose reserve or release this instance's caller was
   * told the outcome of is unknown ("treat the reserve as not granted, the
   * release as done"): the next batch on the pool releases each first.
   */
  readonly #unsettled = new Map<string, Set<string>>();
  readonly #timers: Clock;
  /** Per pool, the timer of the next settling round while calls are unsettled. */
  readonly #settleTimers = new Map<string, ClockTimer>();
  #stopped = false;
  readonly #enqueue: (pool: string, op: LedgerOp) => Promise<LedgerAnswer>;

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
    this.#timers = parts.timers;
    this.#enqueue = parts.enqueue;
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
      monotonic: this.#monotonic,
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
        routingLeaseState: (id) => this.#peers.routingState(id),
        recheckLease: (id) => this.#peers.recheck(id),
        leaseFreshNow: (id) => this.#peers.freshNow(id),
        withdrawn: (pool, op) => this.#withdrawn(pool, op),
        sending: (ops) => {
          for (const op of ops) this.#sent.add(op);
        },
        registeredCap: (pool) => this.#caps.get(pool),
        enqueue: (pool, op) => parts.enqueue(pool, op),
        commitHere: (pool, ops, deadline) => this.#commitHere(pool, ops, deadline),
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

  /**
   * Keep the heartbeat fresh and serve the combiner. The peers' leases are
   * watched from the first judgement of rows on (see peer-leases.ts).
   */
  startHeartbeatAndCombiner(): void {
    this.#lease.startHeartbeat();
    this.#combiner?.start();
  }

  /** Stop the heartbeat and the watch of peer leases. */
  stop(): void {
    this.#stopped = true;
    for (const timer of this.#settleTimers.values()) this.#timers.clearTimeout(timer);
    this.#settleTimers.clear();
    this.#lease.stop();
    this.#peers.stop();
  }

  /** Give an own call its deadline (monotonic ms), before it is queued. */
  track(op: LedgerOp, deadline: number): void {
    this.#deadlines.set(op, deadline);
  }

  /**
   * The caller of `op` is answered now, at its deadline: a call not yet sent
   * is never sent from now on (`not-sent`); one that went out may still be
   * written, and is settled when its batch ends (`unknown`: a reserve granted
   * after all is released, a release not done is done again).
   */
  abandon(op: LedgerOp): Abandoned {
    const how: Abandoned = this.#sent.has(op) ? 'unknown' : 'not-sent';
    this.#abandoned.set(op, how);
    return how;
  }

  /** The error for an own call answered at its deadline before it was sent, or undefined. */
  #withdrawn(pool: string, op: LedgerOp): Error | undefined {
    return this.#abandoned.get(op) === 'not-sent'
      ? this.deadlineError(pool, op, 'not-sent')
      : undefined;
  }

  /** The number of agents on `pool` whose calls are still to be settled (tests). */
  unsettledCount(pool: string): number {
    return this.#unsettled.get(pool)?.size ?? 0;
  }

  /** The error a call answered at its deadline gets (see {@link PoolStore.abandon}). */
  deadlineError(pool: string, op: LedgerOp, how: Abandoned): Error {
    const agents = agentsOf(op);
    if (how === 'unknown' && agents.length > 0 && op.kind !== 'reap') {
      return new LedgerOutcomeUnknownError(
        pool,
        agents,
        `Pool ${JSON.stringify(pool)} in NATS KV ${this.#bucket}: NATS did not answer the ${op.kind} of ${agents.map((a) => `agent ${JSON.stringify(a)}`).join(', ')} within ${this.#timeoutMs} ms, so its outcome is unknown. Treat a reserve as not granted and a release as done: this instance settles ${agents.length === 1 ? 'it' : 'them'} so as soon as NATS answers (a row written for such a reserve is removed).`,
      );
    }
    return new LedgerUnavailableError(
      pool,
      `Pool ${JSON.stringify(pool)} in NATS KV ${this.#bucket}: NATS did not complete the operation within ${this.#timeoutMs} ms (this ${op.kind} call ${how === 'unknown' ? 'was sent but not answered' : 'was not sent: the server did not answer, or earlier calls on the pool were still waiting for it'}). ${how === 'unknown' ? 'A change it was making may or may not have been stored; a later read shows which.' : 'Nothing was written.'} Retry when the server is back.`,
    );
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
          throw this.#unavailable(pool, error, false);
        }
        await sleep(this.#pause(backoff(attempt, 50, 500), deadline));
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

  /**
   * Commit one batch of calls on `pool` (the group commit's cycle). Calls whose
   * caller was answered before the batch started are not sent; calls left
   * unsettled by earlier batches are released first, in the same write; a call
   * that may have been written but got no answer by its deadline is answered
   * `LedgerOutcomeUnknownError` and settled by a later batch.
   */
  async commit(pool: string, ops: LedgerOp[]): Promise<OpAnswer[]> {
    const now = this.#monotonic();
    const answers: OpAnswer[] = new Array(ops.length);
    const send: LedgerOp[] = [];
    const at: number[] = [];
    ops.forEach((op, i) => {
      const own = !this.#combiner?.isForwarded(op);
      const deadline = own ? this.#deadlines.get(op) : this.#combiner?.deadlineOf(op);
      if (own && (this.#abandoned.has(op) || (deadline !== undefined && now >= deadline))) {
        this.#abandoned.set(op, 'not-sent');
        answers[i] = { ok: false, error: this.deadlineError(pool, op, 'not-sent') };
        return;
      }
      send.push(op);
      at.push(i);
    });
    if (send.length === 0) return answers;
    const cleanup = this.#cleanupOps(pool);
    const batch = cleanup.length === 0 ? send : [...cleanup, ...send];
    // The batch runs until the last of its calls' deadlines (the reaper's and
    // the settling releases have none of their own: `timeoutMs` from now).
    let deadline = 0;
    for (const op of send) {
      deadline = Math.max(
        deadline,
        this.#deadlines.get(op) ?? this.#combiner?.deadlineOf(op) ?? now + this.#timeoutMs,
      );
    }
    if (deadline === 0) deadline = now + this.#timeoutMs;
    let got: OpAnswer[];
    try {
      got = await this.#run(pool, batch, deadline);
    } catch (error) {
      got = batch.map(() => ({ ok: false, error }));
    }
    cleanup.forEach((op, i) => {
      if (got[i]?.ok && op.kind === 'release') this.#unsettled.get(pool)?.delete(op.agentId);
    });
    send.forEach((op, j) => {
      const answer = got[cleanup.length + j]!;
      answers[at[j]!] = this.#combiner?.isForwarded(op) ? answer : this.#settle(pool, op, answer);
    });
    if (this.#unsettled.get(pool)?.size === 0) this.#unsettled.delete(pool);
    this.#scheduleSettle(pool);
    return answers;
  }

  // The releases that settle this instance's unsettled calls on `pool`, first
  // in the batch: a later reserve of the same agent in the batch (its caller
  // was told to treat the first as not granted) then finds the agent free.
  #cleanupOps(pool: string): LedgerOp[] {
    const agents = this.#unsettled.get(pool);
    if (!agents?.size) return [];
    return [...agents].map((agentId) => ({
      kind: 'release',
      agentId,
      instanceId: this.#instanceId,
    }));
  }

  // An own call's answer, settled: a call whose outcome is unknown (it may have
  // been written, no answer came) is answered `LedgerOutcomeUnknownError` and
  // its agent is released by a later batch; so is a call answered at its
  // deadline whose batch then wrote it.
  #settle(pool: string, op: LedgerOp, answer: OpAnswer): OpAnswer {
    if (op.kind !== 'reserve' && op.kind !== 'adopt' && op.kind !== 'release') return answer;
    const abandoned = this.#abandoned.get(op) === 'unknown';
    const maybe = op.maybeApplied === true;
    let unsettled: string[] = [];
    if (answer.ok) {
      if (abandoned && op.kind === 'reserve' && answer.kind === 'reserve' && answer.value.ok) {
        unsettled = [op.row.agentId];
      } else if (abandoned && op.kind === 'adopt' && answer.kind === 'adopt') {
        const results = answer.value;
        unsettled = op.rows.filter((_, i) => results[i]?.ok === true).map((row) => row.agentId);
      }
    } else if (!isFinalError(answer.error) && (maybe || (abandoned && op.kind === 'release'))) {
      unsettled = agentsOf(op);
    }
    if (unsettled.length > 0) {
      const set = this.#unsettled.get(pool) ?? new Set<string>();
      for (const agentId of unsettled) set.add(agentId);
      this.#unsettled.set(pool, set);
    }
    if (answer.ok || abandoned) return answer;
    if (unsettled.length > 0) {
      return { ok: false, error: this.#outcomeUnknown(pool, op, answer.error) };
    }
    // Not written: a batch-wide "may or may not" is not true of this call.
    const error = answer.error;
    if (
      !maybe &&
      error instanceof ScalerError &&
      error.code === 'ERR_LEDGER_UNAVAILABLE' &&
      error.message.includes(MAYBE_STORED)
    ) {
      return { ok: false, error: this.#unavailable(pool, error.cause ?? error, false) };
    }
    return answer;
  }

  #outcomeUnknown(pool: string, op: LedgerOp, cause: unknown): LedgerOutcomeUnknownError {
    const agents = agentsOf(op);
    return new LedgerOutcomeUnknownError(
      pool,
      agents,
      `Pool ${JSON.stringify(pool)} in NATS KV ${this.#bucket}: the ${op.kind} of ${agents.map((a) => `agent ${JSON.stringify(a)}`).join(', ')} was sent but NATS did not confirm it within ${this.#timeoutMs} ms (last error: ${describeNatsError(cause)}), so its outcome is unknown. Treat a reserve as not granted and a release as done: this instance settles ${agents.length === 1 ? 'it' : 'them'} so as soon as NATS answers (a row written for such a reserve is removed).`,
      { cause },
    );
  }

  // While calls on `pool` are unsettled, a settling round (a background reap,
  // which carries the releases) runs every second, whether or not callers call.
  #scheduleSettle(pool: string): void {
    if (this.#stopped || !this.#unsettled.has(pool) || this.#settleTimers.has(pool)) return;
    const timer = this.#timers.setTimeout(() => {
      this.#settleTimers.delete(pool);
      if (this.#stopped) return;
      this.#enqueue(pool, { kind: 'reap', background: true }).catch(() => {});
    }, 1000);
    timer.unref();
    this.#settleTimers.set(pool, timer);
  }

  // A batch with calls from other instances is committed here (or refused);
  // this instance's own calls go through the pool's combiner.
  async #run(pool: string, ops: LedgerOp[], deadline: number): Promise<OpAnswer[]> {
    const combiner = this.#combiner;
    if (!combiner || ops.some((op) => combiner.isForwarded(op))) {
      return this.#commitHere(pool, ops, deadline);
    }
    // A lost lease is reported to this instance's callers whoever commits, and
    // nothing is sent under a lease the server has not confirmed within a third
    // of its window (the combiner would write the rows under it).
    const report = ops.some((op) => !(op.kind === 'reap' && op.background));
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
          return await combiner.commit(pool, ops, deadline);
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
      await sleep(this.#pause(backoff(attempt, 50, 500), deadline));
    }
  }

  // A pause between attempts, never past the deadline.
  #pause(ms: number, deadline: number): number {
    return Math.max(0, Math.min(ms, deadline - this.#monotonic()));
  }

  async #commitHere(pool: string, ops: LedgerOp[], deadline: number): Promise<OpAnswer[]> {
    const key = poolKey(pool);
    const source = this.#source(pool);
    const registered = this.#caps.get(pool);
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
        // Calls from other instances that may not be applied now are answered
        // apart, and so are own calls answered at their deadline before they were sent.
        const refused: Map<LedgerOp, Error> = new Map(
          (await this.#combiner?.refused(pool, ops)) ?? [],
        );
        for (const op of ops) {
          const withdrawn = this.#withdrawn(pool, op);
          if (withdrawn) refused.set(op, withdrawn);
        }
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
        // The read and the lease judgements took time: the lease must still be
        // confirmed, and the senders of forwarded rows still known fresh.
        if (!this.#lease.confirmed) throw new LeaseNotConfirmed(this.#lease.info().health);
        if (this.#combiner && !this.#combiner.sendersFresh(applied)) {
          throw new Error("a forwarded call's sender lease is no longer known fresh");
        }
        for (const op of applied) if (local(op)) this.#sent.add(op);
        // The answers of the last batch leave in the same socket write as this one.
        this.#combiner?.sendReplies();
        let revision: number;
        try {
          // A deleted or purged key still has a revision to compare against.
          revision = await this.#cas.write(key, data, baseRevision, {
            timeoutMs: Math.max(200, Math.min(2000, deadline - this.#monotonic())),
          });
        } catch (error) {
          if (!isRevisionConflict(error)) {
            // No answer: the write may have landed. The retry recognizes our own rows.
            for (const op of applied) {
              if (op.kind === 'reserve' || op.kind === 'release' || op.kind === 'adopt') {
                op.maybeApplied = true;
              }
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
      await sleep(
        this.#pause(conflict ? backoff(attempt, 2, 100) : backoff(attempt, 50, 500), deadline),
      );
    }
  }

  #unavailable(pool: string, error: unknown, maybe = true): LedgerUnavailableError {
    const why = isConnectionClosed(error)
      ? 'the connection to NATS is closed'
      : `NATS did not complete the operation within ${this.#timeoutMs} ms`;
    const outcome = maybe
      ? `A change this call was making ${MAYBE_STORED}; a later read shows which.`
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

/** What an unavailable error says of a change that may have been stored. */
const MAYBE_STORED = 'may or may not have been stored';

/** The agents a call names. */
function agentsOf(op: LedgerOp): string[] {
  if (op.kind === 'reserve') return [op.row.agentId];
  if (op.kind === 'adopt') return op.rows.map((row) => row.agentId);
  if (op.kind === 'release') return [op.agentId];
  return [];
}

// Errors after which a call is known not written or its rows are judged
// elsewhere: a lost lease (its rows are reaped by peers), a bad document or
// cap, a duplicate. Anything else (no answer, busy) leaves a sent call unknown.
function isFinalError(error: unknown): boolean {
  return (
    error instanceof ScalerError &&
    error.code !== 'ERR_LEDGER_UNAVAILABLE' &&
    error.code !== 'ERR_LEDGER_BUSY'
  );
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
