import type { JetStreamClient } from '@nats-io/jetstream';
import type { KV } from '@nats-io/kv';
import type { NatsConnection } from '@nats-io/transport-node';
import { type Clock, monotonicNow, resolveClock } from '../../clock.js';
import { LedgerUnavailableError } from '../../errors.js';
import { testHooksOf } from '../../internal/test-hooks.js';
import type { ResourceAmount, ResourceCap } from '../../resources/types.js';
import {
  checkAdopt,
  checkAgentId,
  checkReserve,
  checkReserveOptions,
  registeredCap,
} from '../checks.js';
import { defaultFs } from '../fs.js';
import { GroupCommit } from '../group-commit.js';
import { type LedgerOp, releaseOp } from '../ops.js';
import { readBootId } from '../proc.js';
import { DEFAULT_REAP_INTERVAL_MS, Reaper } from '../reaper.js';
import { createLedgerTelemetry } from '../telemetry.js';
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

  readonly #nc: NatsConnection;
  readonly #ownsConnection: boolean;
  readonly #bootId: string;
  readonly #caps = new Map<string, ResourceCap>();
  readonly #batches = new GroupCommit<LedgerOp>((pool, ops) => this.#store.commit(pool, ops));
  readonly #reaper = new Reaper(
    () => this.#caps.keys(),
    // The reaper's own rounds must not use up the one-time lost-lease report
    // that a caller's next operation on the pool is owed.
    (pool) => this.#enqueue(pool, { kind: 'reap', background: true }),
    () => this.#timeSource,
  );
  /** The pool keys: lease, reads and compare-and-set commits (pool-store.ts). */
  readonly #store: PoolStore;
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
    this.#nc = nc;
    this.#ownsConnection = ownsConnection;
    this.instanceId = options.instanceId;
    this.bucket = options.bucket;
    this.leaseMs = options.leaseMs;
    this.#bootId = options.bootId ?? readBootId(defaultFs);
    const hooks = testHooksOf<NatsPoolLedgerHooks>(options);
    this.#timeSource = resolveClock(options.clock, undefined);
    this.#telemetry = createLedgerTelemetry(options, 'nats', {
      clock: this.#timeSource,
      pools: () => this.#caps.keys(),
      read: (pool) => this.inspect(pool),
    });
    this.#store = new PoolStore({
      kv,
      js,
      nc,
      options,
      bootId: this.#bootId,
      hooks,
      monotonic: hooks.monotonic ?? monotonicNow,
      timers: this.#timeSource,
      caps: this.#caps,
      telemetry: this.#telemetry,
      queuedPools: () => this.#batches.pools(),
      enqueue: (pool, op) => this.#enqueue(pool, op),
      isClosed: () => this.#closed,
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
   * @throws NatsServerVersionError when the server is older than
   *   `MIN_SAFE_NATS_SERVER_VERSION` and `serverVersionPolicy` is `'refuse'` (with
   *   `'warn'`, the default, a `SCALER_NATS_SERVER_VERSION` process warning instead).
   */
  static async connect(options: NatsPoolLedgerOptions): Promise<NatsPoolLedger> {
    const checked = checkConnectOptions(options);
    const { nc, owns } = await openConnection(checked);
    try {
      checkServerVersion(nc.info?.version, checked.serverVersionPolicy);
      const deadline = monotonicNow() + checked.timeoutMs;
      const { js, kv } = await openBucket(nc, checked, deadline);
      const ledger = new NatsPoolLedger(kv, js, nc, owns, checked);
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
      await ledger.#store.startWatching();
      return ledger;
    } catch (error) {
      if (owns) await nc.close().catch(() => {});
      throw error;
    }
  }

  /** This instance's current lease id, written into its rows (it changes after a lost lease). */
  get leaseId(): string {
    return this.#store.leaseId;
  }

  /**
   * This instance's own lease as of now: its id, when the server last
   * confirmed a heartbeat (`confirmedAt`, the ledger clock instant that
   * heartbeat was sent), the deadline (`confirmedAt + leaseMs`), the health
   * and where the heartbeat key is (`{ kind: 'nats', bucket, key }`).
   *
   * @example
   * ```ts
   * import type { NatsPoolLedger } from 'scaler-primitives/ledger/nats';
   * declare const ledger: NatsPoolLedger;
   * const { health, deadline } = ledger.lease();
   * if (health !== 'held') console.warn(`lease ${health}, deadline ${deadline}`);
   * ```
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
   * @throws LedgerUnavailableError when the server did not answer within `timeoutMs`
   *   (also when it did not confirm this instance's lease: then nothing was written).
   * @throws LedgerLeaseExpiredError when this instance's lease was lost since its
   *   last operation on this pool (its rows may have been reaped; the next call works),
   *   or could not be renewed before its deadline (nothing written).
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
      leaseId: this.#store.leaseId,
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
    poolKey(pool);
    this.#assertOpen();
    return this.#store.read(pool);
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
    this.#store.stop();
    await this.#batches.idle();
    await this.#store.end();
    if (this.#ownsConnection) await this.#nc.close().catch(() => {});
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
}
