/**
 * Combining across processes. One instance per pool, the combiner, is named by
 * the `leader.<pool>` key (claimed by compare-and-set, tied to its lease); the
 * others send it their calls on that pool by NATS request/reply, and it
 * commits everyone's waiting calls in one compare-and-set on the pool key.
 * The combiner is only a shortcut: every write is still a compare-and-set, so
 * the cap holds whoever writes, and writers that do not combine share the pool.
 *
 * What keeps a forwarded call from being applied late (after its sender went
 * on without it), the one new way to go wrong:
 * - the combiner starts an attempt for a forwarded call only while it still
 *   combines the pool under its current lease, that lease was confirmed by the
 *   server within a third of its window, the sender's lease is known fresh
 *   (checked again right before the write), its connection has not dropped
 *   since the call arrived, and its sender still waits for the answer
 *   (checked after the read, before the write);
 * - a sender whose request got no reply sends every later call on the pool to
 *   the same combiner (NATS keeps their order) until it has an answer, the
 *   combiner's subject has no subscriber, or the combiner's lease has ended.
 */
import { randomUUID } from 'node:crypto';
import type { KV } from '@nats-io/kv';
import type { Msg, NatsConnection, Subscription } from '@nats-io/transport-node';
import { monotonicNow, nextTurn, sleep } from '../../clock.js';
import { LedgerUnavailableError, ScalerError } from '../../errors/index.js';
import { isNatsTimeout, isNoResponders } from '../../internal/nats-errors.js';
import type { ResourceCap } from '../../resources/types.js';
import { capsEqual } from '../document/cap.js';
import type { LeaseState } from '../document/verdict.js';
import type { LedgerAnswer, LedgerOp, OpAnswer } from '../ops.js';
import {
  type CombineReply,
  decodeReply,
  decodeRequest,
  encodeReply,
  encodeRequest,
} from '../wire.js';
import type { CasWriter } from './cas.js';
import { isRevisionConflict } from './cas.js';
import {
  type CombinerRecord,
  combinerKey,
  combineSubjectPrefix,
  decodeCombinerRecord,
  encodeCombinerRecord,
} from './combine-wire.js';

/** What the combiner needs from its ledger. */
export interface CombinerHost {
  readonly nc: NatsConnection;
  readonly kv: KV;
  readonly cas: CasWriter;
  readonly bucket: string;
  readonly instanceId: string;
  readonly timeoutMs: number;
  /** The current lease id. */
  leaseId(): string;
  /** True while the lease is live and was confirmed by the server within a third of its window. */
  leaseConfirmed(): boolean;
  /**
   * Throws when this instance's lease was not confirmed recently enough to send
   * calls under it to another combiner (checked before every send).
   */
  assertSendable(): void;
  /** A peer lease's state, to judge a forwarded call's sender by (fences a lease found expired). */
  leaseState(leaseId: string): Promise<LeaseState>;
  /**
   * A combiner's lease state, to route calls by: a lease that ended may still
   * look fresh for up to its window (it refuses or does not answer what it is sent).
   */
  routingLeaseState(leaseId: string): Promise<LeaseState>;
  /** Read a lease's key at its next routing check (its combiner refused to combine under it). */
  recheckLease(leaseId: string): void;
  /** Whether a peer lease is known fresh now, without a read. */
  leaseFreshNow(leaseId: string): boolean;
  /** The error of an own call whose caller was answered before it was sent (it is never sent), or undefined. */
  withdrawn(pool: string, op: LedgerOp): Error | undefined;
  /** Own calls about to go out in a request to another instance's combiner. */
  sending(ops: readonly LedgerOp[]): void;
  /** The cap registered for a pool. */
  registeredCap(pool: string): ResourceCap | undefined;
  /** Queue a call received from another instance in this ledger's batches. */
  enqueue(pool: string, op: LedgerOp): Promise<LedgerAnswer>;
  /** Commit calls here, by compare-and-set, retrying until `deadline` (monotonic ms). */
  commitHere(pool: string, ops: LedgerOp[], deadline: number): Promise<OpAnswer[]>;
  isClosed(): boolean;
  /** Test hook: called before each request sent to another instance's combiner. */
  onForward?: (pool: string, subject: string) => void;
}

/** Thrown into a forwarded call the combiner will not apply (the sender is told `redirect`). */
class NotCombining extends Error {
  constructor(reason: string) {
    super(reason);
    this.name = 'NotCombining';
  }
}

/**
 * The longest a sender waits for one request to a combiner, then it sends again
 * to the same one: a combiner killed with the request is found out by the next
 * send ("no responders") within about this time.
 */
const REQUEST_TIMEOUT_MS = 1000;
/**
 * How long after a call arrives a combiner still starts an attempt for it: past
 * this, its sender has stopped waiting for that request (and sent it again, or
 * answered its caller), so a backlog left by a stall or a partition is not
 * worked through for callers that are gone.
 */
const FORWARDED_WAIT_MS = 3 * REQUEST_TIMEOUT_MS;

interface Led {
  record: CombinerRecord;
  revision: number;
}

/** The cross-process combiner of one ledger instance. */
// Answer a forwarded request.
function send(msg: Msg, reply: CombineReply): void {
  try {
    msg.respond(encodeReply(reply));
  } catch {
    // The connection is gone: the sender sees a timeout or no responders.
  }
}

export class Combiner {
  /** The subject this instance listens on while it combines pools. */
  readonly subject: string;
  /** Calls from other instances: the connection epoch they came in, and until when their sender waits. */
  private readonly forwarded = new WeakMap<LedgerOp, { epoch: number; deadline: number }>();
  /** Combiner records by pool, as last read (own records included). */
  private readonly combiners = new Map<string, Led>();
  /** Subjects that had no subscriber: their combiner is gone. */
  private readonly deadSubjects = new Set<string>();
  /** Pools with a request that got no reply: later calls go to the same combiner. */
  private readonly pending = new Map<string, CombinerRecord>();
  private epoch = 0;
  private sub: Subscription | undefined;
  /** Answers to forwarded calls not yet sent (see {@link Combiner.sendReplies}). */
  private readonly replies: Array<{ msg: Msg; reply: CombineReply }> = [];
  private repliesDue = false;

  constructor(private readonly host: CombinerHost) {
    this.subject = `${combineSubjectPrefix(host.bucket)}${randomUUID()}`;
  }

  /** Listen for calls and count connection drops. */
  start(): void {
    this.sub = this.host.nc.subscribe(this.subject, {
      callback: (error, msg) => {
        if (!error) this.serve(msg);
      },
    });
    void (async () => {
      for await (const status of this.host.nc.status()) {
        if (status.type === 'disconnect' || status.type === 'reconnect') this.epoch++;
      }
    })().catch(() => {});
  }

  /** Whether this instance combines `pool` under its current lease. */
  combines(pool: string): boolean {
    return this.combiners.get(pool)?.record.leaseId === this.host.leaseId();
  }

  /**
   * Before an attempt writes: the forwarded calls among `ops` that may not be
   * applied now (see the module comment), each with the reason. A forwarded
   * row whose sender's lease this instance does not know fresh (its last
   * heartbeat within its window, by the server's time as an upper bound) is
   * refused too: the sender writes it itself under its own confirmed lease, or
   * answers its caller (with `LedgerLeaseExpiredError` once it learns its lease was lost).
   */
  async refused(pool: string, ops: readonly LedgerOp[]): Promise<Map<LedgerOp, NotCombining>> {
    const out = new Map<LedgerOp, NotCombining>();
    const senders = new Map<string, Promise<LeaseState>>();
    const senderState = (leaseId: string) => {
      let state = senders.get(leaseId);
      if (!state) {
        state = this.host.leaseState(leaseId).catch(() => 'unknown' as const);
        senders.set(leaseId, state);
      }
      return state;
    };
    for (const op of ops) {
      const from = this.forwarded.get(op);
      if (!from) continue;
      let reason: string | undefined;
      if (from.epoch !== this.epoch) reason = 'the connection dropped since the call arrived';
      else if (monotonicNow() >= from.deadline) reason = 'its sender stopped waiting for it';
      else if (!this.combines(pool)) reason = 'this instance no longer combines the pool';
      else if (!this.host.leaseConfirmed()) reason = 'the lease was not confirmed recently enough';
      else {
        const rows = op.kind === 'reserve' ? [op.row] : op.kind === 'adopt' ? op.rows : [];
        for (const row of rows) {
          if (typeof row.leaseId !== 'string' || row.leaseId === this.host.leaseId()) continue;
          // Only under a lease known fresh: a peer may fence a lease it cannot
          // see renewed (unknown here), and the write must land before that.
          const state = await senderState(row.leaseId);
          if (state !== 'fresh') {
            reason =
              state === 'expired'
                ? "the sender's lease has ended"
                : "the sender's lease is not known fresh";
            break;
          }
        }
      }
      if (reason) out.set(op, new NotCombining(reason));
    }
    return out;
  }

  /**
   * Right before a write: true when every forwarded row among `applied` is
   * still under a sender lease known fresh without a read (`refused` found it
   * so, but the read and the decision took time).
   */
  sendersFresh(applied: readonly LedgerOp[]): boolean {
    for (const op of applied) {
      if (!this.forwarded.has(op)) continue;
      const rows = op.kind === 'reserve' ? [op.row] : op.kind === 'adopt' ? op.rows : [];
      for (const row of rows) {
        if (typeof row.leaseId !== 'string' || row.leaseId === this.host.leaseId()) continue;
        if (!this.host.leaseFreshNow(row.leaseId)) return false;
      }
    }
    return true;
  }

  /** Whether `op` came from another instance (its row keeps the sender's lease). */
  isForwarded(op: LedgerOp): boolean {
    return this.forwarded.has(op);
  }

  /** Until when the sender of a forwarded call waits for its answer (monotonic ms). */
  deadlineOf(op: LedgerOp): number | undefined {
    return this.forwarded.get(op)?.deadline;
  }

  /**
   * Commit `ops` on `pool`: here when this instance combines it, else through
   * its combiner, until `deadline` (monotonic ms).
   */
  async commit(pool: string, ops: LedgerOp[], deadline: number): Promise<OpAnswer[]> {
    // Calls whose callers were answered before they were sent are never sent.
    const withdrawn = new Map<LedgerOp, Error>();
    let live = ops;
    const answer = (got: OpAnswer[]): OpAnswer[] => {
      if (withdrawn.size === 0) return got;
      const answers = got[Symbol.iterator]();
      return ops.map((op) => {
        const error = withdrawn.get(op);
        return error ? { ok: false, error } : answers.next().value!;
      });
    };
    for (let attempt = 0; ; attempt++) {
      const target = await this.route(pool);
      for (const op of live) {
        const error = this.host.withdrawn(pool, op);
        if (error) withdrawn.set(op, error);
      }
      if (withdrawn.size > 0) live = live.filter((op) => !withdrawn.has(op));
      if (live.length === 0) return answer([]);
      if (target === 'here') return answer(await this.host.commitHere(pool, live, deadline));
      this.host.assertSendable();
      this.host.sending(live);
      const outcome = await this.forward(pool, target, live, deadline);
      if (outcome !== 'again') return answer(outcome);
      if (monotonicNow() >= deadline) {
        throw new LedgerUnavailableError(
          pool,
          `Pool ${JSON.stringify(pool)} in NATS KV ${this.host.bucket}: its combiner (instance ${JSON.stringify(target.instanceId)}) did not answer within ${this.host.timeoutMs} ms. A change this call was making may or may not have been stored; a later read shows which.`,
        );
      }
      await sleep(Math.max(0, Math.min(50, 2 ** attempt, deadline - monotonicNow())));
    }
  }

  /**
   * Send the answers of forwarded calls decided so far. Answers wait for this
   * until the microtasks of their batch have run: the pool store calls it right
   * before its next compare-and-set write, so that they leave in one socket
   * write with it (nats.js writes what is queued once the microtasks have
   * run), and the next turn of the event loop sends whatever is left. An
   * answer is never held for I/O: a write that must first read or wait lets
   * the event loop turn.
   */
  sendReplies(): void {
    for (const { msg, reply } of this.replies.splice(0)) send(msg, reply);
  }

  // Queue an answer to a forwarded call (see `sendReplies`).
  private reply(msg: Msg, reply: CombineReply): void {
    this.replies.push({ msg, reply });
    if (this.repliesDue) return;
    this.repliesDue = true;
    void nextTurn().then(() => {
      this.repliesDue = false;
      this.sendReplies();
    });
  }

  /** Step down from every pool (their combiner keys are ended) and stop listening. */
  async close(): Promise<void> {
    this.sendReplies();
    await Promise.allSettled(
      [...this.combiners.entries()]
        .filter(([pool]) => this.combines(pool))
        .map(([pool, led]) =>
          this.host.cas.write(
            combinerKey(pool),
            JSON.stringify({ ended: 'closed', by: this.host.instanceId }),
            led.revision,
          ),
        ),
    );
    this.combiners.clear();
    // Not drain: on a connection that is reconnecting, drain waits for the server.
    // A request still buffered here goes unanswered; its sender retries elsewhere.
    try {
      this.sub?.unsubscribe();
    } catch {
      // The connection is closed: nothing listens any more.
    }
  }

  // Where to send calls on `pool`: here, or a combiner's record.
  private async route(pool: string): Promise<'here' | CombinerRecord> {
    const pending = this.pending.get(pool);
    if (pending) {
      if ((await this.host.routingLeaseState(pending.leaseId)) !== 'expired') return pending;
      this.pending.delete(pool);
    }
    const known = this.combiners.get(pool);
    if (known && !this.deadSubjects.has(known.record.subject)) {
      if (known.record.leaseId === this.host.leaseId()) return 'here';
      // A combiner whose lease ended (fenced by a peer, or closed) combines nothing.
      if ((await this.host.routingLeaseState(known.record.leaseId)) !== 'expired') {
        return known.record;
      }
    }
    return this.elect(pool);
  }

  // Read the combiner key; follow a live combiner, or claim a pool nobody combines.
  // A lost claim reads the key again and follows the winner: when a fleet
  // starts or its combiner dies, every instance claims at once, and all but
  // one writing directly meanwhile is a storm of lost races on the pool key.
  private async elect(pool: string): Promise<'here' | CombinerRecord> {
    for (let attempt = 0; ; attempt++) {
      try {
        return await this.claimOrFollow(pool);
      } catch (error) {
        if (error instanceof ScalerError) throw error;
        if (!isRevisionConflict(error)) {
          this.combiners.delete(pool);
          return 'here';
        }
        // A second lost claim: the key moves too fast to follow; write directly
        // meanwhile (the winner is read next time).
        if (attempt >= 1) return 'here';
      }
    }
  }

  private async claimOrFollow(pool: string): Promise<'here' | CombinerRecord> {
    const key = combinerKey(pool);
    const entry = await this.host.kv.get(key);
    const record =
      entry !== null && entry.operation === 'PUT'
        ? decodeCombinerRecord(entry.string(), this.host.bucket)
        : undefined;
    if (record && entry && record.leaseId === this.host.leaseId()) {
      if (record.subject === this.subject) {
        this.combiners.set(pool, { record, revision: entry.revision });
        return 'here';
      }
      // This process continued the lease of one that combined the pool
      // (a restart): claim it with this process's subject, below.
    } else if (record && entry) {
      // A combiner whose subject had no subscriber is gone (its process, or its
      // connection: then it refuses what it had), whatever its lease says.
      const gone =
        this.deadSubjects.has(record.subject) ||
        (await this.host.routingLeaseState(record.leaseId)) === 'expired';
      if (!gone) {
        this.combiners.set(pool, { record, revision: entry.revision });
        return record;
      }
    }
    // Nobody combines the pool (or its combiner is gone): claim it. One
    // claim per revision of the record wins; the others follow the winner.
    const mine: CombinerRecord = {
      leaseId: this.host.leaseId(),
      instanceId: this.host.instanceId,
      subject: this.subject,
    };
    const revision = await this.host.cas.write(
      key,
      encodeCombinerRecord(mine),
      entry?.revision ?? 0,
    );
    this.combiners.set(pool, { record: mine, revision });
    return 'here';
  }

  // Send `ops` to a combiner. 'again' means route anew (nothing of `ops` is left with it).
  private async forward(
    pool: string,
    target: CombinerRecord,
    ops: LedgerOp[],
    deadline: number,
  ): Promise<OpAnswer[] | 'again'> {
    const cap = this.host.registeredCap(pool) ?? {};
    this.host.onForward?.(pool, target.subject);
    let reply: CombineReply;
    try {
      const msg = await this.host.nc.request(target.subject, encodeRequest({ pool, cap, ops }), {
        timeout: Math.max(100, Math.min(deadline - monotonicNow(), REQUEST_TIMEOUT_MS)),
      });
      reply = decodeReply(msg.data, pool, ops);
    } catch (error) {
      if (isNoResponders(error)) {
        // Nothing listens: the combiner is gone and cannot apply anything it had.
        this.deadSubjects.add(target.subject);
        if (this.deadSubjects.size > 1000) this.deadSubjects.clear();
        this.pending.delete(pool);
        this.combiners.delete(pool);
        return 'again';
      }
      if (isNatsTimeout(error)) {
        // It may still apply them: everything on this pool goes to it until it answers.
        this.pending.set(pool, target);
        for (const op of ops) {
          if (op.kind === 'reserve' || op.kind === 'release' || op.kind === 'adopt') {
            op.maybeApplied = true;
          }
          // Its write may have removed the row: a retry that finds none reports the release
          // as done (it cannot tell that from a release of an agent already gone).
          if (op.kind === 'release') op.removedBefore = true;
        }
        return 'again';
      }
      if (error instanceof TypeError || error instanceof SyntaxError) {
        // A malformed reply: the combiner is done with the request but says nothing usable.
        this.pending.delete(pool);
        for (const op of ops)
          if (op.kind === 'reserve' || op.kind === 'release') op.maybeApplied = true;
        return this.host.commitHere(pool, ops, deadline);
      }
      throw error;
    }
    this.pending.delete(pool);
    switch (reply.kind) {
      case 'answers':
        return reply.answers;
      case 'redirect':
        // Its record may still name it under a lease that ended (fenced or
        // deleted) although it was seen fresh: the next routing reads the lease.
        this.host.recheckLease(target.leaseId);
        this.combiners.delete(pool);
        return 'again';
      default:
        reply.maybeApplied.forEach((maybe, i) => {
          const op = ops[i]!;
          if (maybe && (op.kind === 'reserve' || op.kind === 'release')) op.maybeApplied = true;
        });
        return this.host.commitHere(pool, ops, deadline);
    }
  }

  // Answer a request from another instance.
  private serve(msg: Msg): void {
    const epoch = this.epoch;
    // A sender waits at most one request timeout for the answer, then sends its
    // calls again (to this combiner): no attempt starts for them a while after that.
    const deadline = monotonicNow() + FORWARDED_WAIT_MS;
    const respond = (reply: CombineReply) => send(msg, reply);
    let request: ReturnType<typeof decodeRequest>;
    try {
      request = decodeRequest(msg.data);
    } catch (error) {
      respond({
        kind: 'direct',
        maybeApplied: [],
        reason: `malformed request: ${(error as Error).message}`.slice(0, 300),
      });
      return;
    }
    const { pool, ops } = request;
    const registered = this.host.registeredCap(pool);
    if (this.host.isClosed() || !this.combines(pool)) {
      respond({ kind: 'redirect', reason: 'this instance does not combine the pool' });
      return;
    }
    if (!registered || !capsEqual(registered, request.cap)) {
      respond({
        kind: 'direct',
        maybeApplied: ops.map(() => false),
        reason: 'the sender registered another cap',
      });
      return;
    }
    for (const op of ops) this.forwarded.set(op, { epoch, deadline });
    void Promise.allSettled(ops.map((op) => this.host.enqueue(pool, op))).then((settled) => {
      // A refused call (see `refused`) or a failed batch: this instance will not
      // apply these calls any more; the sender does them itself, told which
      // ones an unanswered write of ours may have carried.
      const failed = settled.find(
        (s) =>
          s.status === 'rejected' &&
          !(s.reason instanceof ScalerError && s.reason.code === 'ERR_DUPLICATE_RESERVATION'),
      );
      if (failed) {
        this.reply(msg, {
          kind: 'direct',
          maybeApplied: ops.map((op) => 'maybeApplied' in op && op.maybeApplied === true),
          reason: String((failed as PromiseRejectedResult).reason?.message ?? 'failed').slice(
            0,
            300,
          ),
        });
        return;
      }
      this.reply(msg, {
        kind: 'answers',
        answers: settled.map((s) =>
          s.status === 'fulfilled'
            ? { ok: true, ...s.value }
            : { ok: false, error: (s as PromiseRejectedResult).reason },
        ),
      });
    });
  }
}
