import type { JetStreamClient } from '@nats-io/jetstream';
import type { KV } from '@nats-io/kv';
import type { NatsConnection } from '@nats-io/transport-node';
import { type Clock, monotonicNow, resolveClock } from '../../clock.js';
import { LedgerUnavailableError } from '../../errors/index.js';
import { testHooksOf } from '../../internal/test-hooks.js';
import type { ResourceAmount, ResourceCap } from '../../resources/types.js';
import { LedgerFrontEnd } from '../front-end.js';
import { defaultFs } from '../fs.js';
import { GroupCommit } from '../group-commit.js';
import type { LedgerAnswer, LedgerOp } from '../ops.js';
import { readBootId } from '../proc.js';
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
} from '../types.js';
import {
  type CheckedOptions,
  checkConnectOptions,
  describeNatsError,
  openBucket,
  openConnection,
  retryUntil,
} from './connect.js';
import { poolKey } from './keys.js';
import type { NatsPoolLedgerHooks } from './options.js';
import { PoolStore } from './pool-store.js';
import { checkServerVersion } from './server-version.js';
import type { NatsPoolLedgerOptions, NatsPoolSnapshot } from './types.js';

// Proof that the constructor is called by `connect()`: `private` binds TypeScript
// only, and a `new NatsPoolLedger(...)` from JavaScript would build a ledger
// without a bucket that fails on first use.
const CONNECTED = Symbol('NatsPoolLedger.connect');

/**
 * A cross-host ledger of reservations against named pools, kept in a NATS
 * JetStream KV bucket: one key per pool holding the same document as the file
 * ledger, every change a compare-and-set on the key's revision.
 *
 * Liveness: each instance keeps a heartbeat key (`lease.<leaseId>`) fresh and
 * knows its own deadline ({@link NatsPoolLedger.lease}, {@link NatsPoolLedger.onLeaseEvent}).
 * A peer whose heartbeat is older than `leaseMs` plus `leaseMarginMs`, measured
 * with the server's timestamps while this instance's own heartbeats were confirmed, is fenced (an end marker is written to its heartbeat key at the
 * revision that was judged, so a late refresh and the fence cannot both win)
 * and its rows are reaped. An instance that finds its own heartbeat fenced fails its next
 * operation on each pool with `LedgerLeaseExpiredError`, then carries on under
 * a new lease. A restart with the same `instanceId` within the lease continues
 * it (a compare-and-set that fences the old session: that one, if it still
 * runs, fails every later call with `LedgerInstanceInUseError`).
 *
 * Concurrent calls on one pool in this process share one read and one
 * compare-and-set (group commit); each still gets its own answer, in call order.
 *
 * Every call answers within `timeoutMs`: `LedgerUnavailableError` when nothing
 * was sent (nothing was written), `LedgerOutcomeUnknownError` when a write went
 * out without an answer (treat a reserve as not granted, a release as done: the
 * ledger releases such a row itself once NATS answers).
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
  /** This orchestrator instance's id, written into every row it makes. */
  readonly instanceId: string;
  /** The KV bucket. */
  readonly bucket: string;
  /** The lease window in ms. */
  readonly leaseMs: number;

  readonly #nc: NatsConnection;
  readonly #ownsConnection: boolean;
  readonly #bootId: string;
  readonly #batches = new GroupCommit<LedgerOp, LedgerAnswer>((pool, ops) =>
    this.#store.commit(pool, ops),
  );
  /** The pool keys: lease, reads and compare-and-set commits (pool-store.ts). */
  readonly #store: PoolStore;
  readonly #timeSource: Clock;
  readonly #front: LedgerFrontEnd;
  readonly #timeoutMs: number;
  readonly #monotonic: () => number;

  private constructor(
    token: symbol,
    kv: KV,
    js: JetStreamClient,
    nc: NatsConnection,
    ownsConnection: boolean,
    options: CheckedOptions,
  ) {
    if (token !== CONNECTED) {
      throw new TypeError(
        'NatsPoolLedger has no public constructor: use `await NatsPoolLedger.connect(options)`, which connects, opens its KV bucket and takes a lease.',
      );
    }
    const clock = resolveClock(options.clock, undefined);
    this.instanceId = options.instanceId;
    this.#front = new LedgerFrontEnd(options.instanceId, {
      closedMessage: 'This NatsPoolLedger is closed; connect a new one',
      clock: () => clock,
      checkPool: (pool) => {
        poolKey(pool);
        return pool;
      },
      ownRow: (agentId, cpus, memBytes) => this.#ownRow(agentId, cpus, memBytes),
      commit: (pool, op) => this.#call(pool, op),
      inspect: (pool) => this.inspect(pool),
    });
    this.#nc = nc;
    this.#ownsConnection = ownsConnection;
    this.bucket = options.bucket;
    this.leaseMs = options.leaseMs;
    this.#bootId = options.bootId ?? readBootId(defaultFs);
    const hooks = testHooksOf<NatsPoolLedgerHooks>(options);
    this.#timeSource = clock;
    this.#timeoutMs = options.timeoutMs;
    this.#monotonic = hooks.monotonic ?? monotonicNow;
    const telemetry = this.#front.instrument(options, 'nats', clock);
    this.#store = new PoolStore({
      kv,
      js,
      nc,
      options,
      bootId: this.#bootId,
      hooks,
      monotonic: this.#monotonic,
      timers: clock,
      caps: this.#front.caps,
      telemetry,
      queuedPools: () => this.#batches.pools(),
      enqueue: (pool, op) => this.#front.submit(pool, op),
      isClosed: () => this.#front.closed,
    });
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
   * @throws LedgerInstanceInUseError when the lease of `instanceId` is held by a
   *   process alive on this host (same boot id, pid and process start time):
   *   stop it, or use another `instanceId`. A predecessor that is gone (or on
   *   another host) and whose lease is within its deadline is not an error:
   *   this ledger continues its lease (see {@link NatsPoolLedger.leaseId}).
   * @throws NatsServerVersionError when the server is part of a cluster, older than
   *   `MIN_SAFE_NATS_SERVER_VERSION`, and `serverVersionPolicy` is `'refuse'` (with
   *   `'warn'`, the default, a `SCALER_NATS_SERVER_VERSION` process warning instead;
   *   with `'ignore'`, nothing).
   */
  static async connect(options: NatsPoolLedgerOptions): Promise<NatsPoolLedger> {
    const checked = checkConnectOptions(options);
    const { nc, owns } = await openConnection(checked);
    try {
      checkServerVersion(
        nc.info?.version,
        checked.serverVersionPolicy,
        typeof nc.info?.cluster === 'string' && nc.info.cluster !== '',
      );
      const deadline = monotonicNow() + checked.timeoutMs;
      const { js, kv } = await openBucket(nc, checked, deadline);
      const ledger = new NatsPoolLedger(CONNECTED, kv, js, nc, owns, checked);
      await retryUntil(
        deadline,
        () => ledger.#store.openLease(),
        (error) =>
          new LedgerUnavailableError(
            '',
            `Cannot write this instance's heartbeat to the NATS KV bucket ${JSON.stringify(checked.bucket)}: ${describeNatsError(error)}.`,
            { cause: error },
          ),
      );
      ledger.#store.startHeartbeatAndCombiner();
      return ledger;
    } catch (error) {
      if (owns) await nc.close().catch(() => {});
      throw error;
    }
  }

  /**
   * This instance's current lease id, written into its rows. After `connect()`
   * it is either a new lease or, when a process with the same `instanceId`
   * (a restart) left a lease still within its deadline, that same lease,
   * continued so that agents fencing on its heartbeat key keep running
   * (its rows are then this instance's own). It changes after a lost lease
   * (fenced by a peer); read it when you need it rather than keeping a copy.
   */
  get leaseId(): string {
    return this.#store.leaseId;
  }

  /**
   * Declare the cap a pool must have. The first write creates the pool with
   * this cap; a stored pool with another cap is refused with `LedgerCapMismatchError`.
   *
   * @throws InvalidInputError for an invalid pool name.
   * @throws TypeError for a cap field that is not a finite number >= 0.
   */
  registerPool(name: string, cap: ResourceCap, options?: RegisterPoolOptions): void {
    this.#front.registerPool(name, cap, options);
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

  /** `pool`'s live rows (no write). */
  list(pool: string): Promise<ReservationRow[]> {
    return this.#front.list(pool);
  }

  /**
   * Reap every registered pool every `intervalMs`. Idempotent; the timer is
   * unref'd and a failed round is retried on the next tick (it never throws).
   *
   * @throws TypeError when `intervalMs` is not a finite number >= 0.
   */
  start(intervalMs?: number): void {
    this.#front.start(intervalMs);
  }

  /** Stop the reaper started by `start`. */
  stop(): void {
    this.#front.stop();
  }

  /** Release every row this instance holds in every registered pool. Best effort per pool. */
  releaseAllForInstance(): Promise<void> {
    return this.#front.releaseAllForInstance();
  }

  /**
   * This instance's own lease as of now: its id, when the server last
   * confirmed a heartbeat (`confirmedAt`, the ledger clock instant that
   * heartbeat was sent), the deadline (`confirmedAt + leaseMs`), the health
   * and where the heartbeat key is (`{ kind: 'nats', bucket, key }`).
   */
  lease(): LeaseInfo {
    return this.#store.leaseInfo();
  }

  /**
   * Call `listener` on every event of this instance's lease: `lease-at-risk`
   * once no heartbeat was confirmed for two thirds of `leaseMs`, `lease-lost`
   * at the deadline or at once when a peer fenced the lease (the agents under
   * it must stop; the lease is replaced by a new one), `lease-renewed` at the
   * next confirmation (with the new lease id after a fence). Fired from the
   * ledger's own unref'd timers; a listener that throws is ignored.
   *
   * @returns A function that removes the listener.
   * @throws TypeError when `listener` is not a function.
   */
  onLeaseEvent(listener: (event: LeaseEvent) => void): () => void {
    return this.#store.onLeaseEvent(listener);
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
    poolKey(pool);
    this.#front.assertOpen();
    const read = this.#store.read(pool);
    return new Promise((resolve, reject) => {
      const timer = this.#timeSource.setTimeout(() => {
        reject(
          new LedgerUnavailableError(
            pool,
            `Pool ${JSON.stringify(pool)} in NATS KV ${this.bucket}: NATS did not answer the read within ${this.#timeoutMs} ms. Nothing was written. Retry when the server is back.`,
          ),
        );
      }, this.#timeoutMs);
      read.then(
        (snapshot) => {
          this.#timeSource.clearTimeout(timer);
          resolve(snapshot);
        },
        (error: unknown) => {
          this.#timeSource.clearTimeout(timer);
          reject(error);
        },
      );
    });
  }

  /**
   * Stop the timers, wait for operations in progress, end the lease (its
   * heartbeat key gets an end marker, so peers reap rows left behind at once) and close
   * the connection when the ledger opened it.
   */
  async close(): Promise<void> {
    if (this.#front.closed) return;
    this.#front.markClosed();
    this.#store.stop();
    await this.#batches.idle();
    await this.#store.end();
    if (this.#ownsConnection) await this.#nc.close().catch(() => {});
  }

  // Every call is answered within `timeoutMs`, whatever NATS does: at the
  // deadline a call still queued is never sent ("nothing was written"), and one
  // that was sent is answered `LedgerOutcomeUnknownError` and settled by the
  // store once NATS answers (see PoolStore.abandon).
  #call(pool: string, op: LedgerOp): Promise<LedgerAnswer> {
    this.#store.track(op, this.#monotonic() + this.#timeoutMs);
    const done = this.#batches.enqueue(pool, op);
    return new Promise((resolve, reject) => {
      const timer = this.#timeSource.setTimeout(() => {
        reject(this.#store.deadlineError(pool, op, this.#store.abandon(op)));
      }, this.#timeoutMs);
      done.then(
        (value) => {
          this.#timeSource.clearTimeout(timer);
          resolve(value);
        },
        (error: unknown) => {
          this.#timeSource.clearTimeout(timer);
          reject(error);
        },
      );
    });
  }

  #ownRow(agentId: string, cpus: number, memBytes: number): ReservationRow {
    return {
      instanceId: this.instanceId,
      pid: process.pid,
      bootId: this.#bootId,
      agentId,
      cpus,
      memBytes,
      reservedAt: this.#timeSource.now(),
      leaseId: this.#store.leaseId,
    };
  }
}
