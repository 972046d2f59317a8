import type { CapDimension } from '../resources/cap-fields.js';
import type { ResourceAmount, ResourceCap } from '../resources/types.js';

/**
 * One reservation in a pool: who holds it (instance, process, boot) and how much.
 *
 * The seven named fields are the wire format shared with the kici orchestrator's
 * ledger. Everything else is optional and additive; a reader keeps fields it
 * does not know when it rewrites the document.
 */
export interface ReservationRow {
  /** The orchestrator instance that made the reservation. */
  instanceId: string;
  /** The process id of the writer, in the writer's PID namespace. */
  pid: number;
  /** The Linux boot id (`/proc/sys/kernel/random/boot_id`) when the row was written. */
  bootId: string;
  /** The agent this reservation is for; unique within a pool. */
  agentId: string;
  /** Reserved CPU, in cores. */
  cpus: number;
  /** Reserved memory, in bytes. */
  memBytes: number;
  /** When the row was written, in epoch milliseconds. */
  reservedAt: number;
  /**
   * The writer's process start time (`/proc/<pid>/stat` field 22, clock ticks
   * since boot). With `pid` it identifies the process even after the pid is reused.
   */
  pidStartTime?: number;
  /**
   * The writer's lease id. While the lease is fresh the row is live, whichever
   * PID namespace the writer runs in; once it expires peers reap the row.
   * Rows without a lease (kici's, or any writer that keeps no lease) stay live until released or the host reboots.
   */
  leaseId?: string;
  /**
   * Extended resources held, whole counts by name (`{ "nvidia.com/gpu": 1 }`).
   * Absent when none. The kici ledger (0.9.1) keeps this field when it rewrites
   * the document and never counts it; only this library's writers do.
   */
  extended?: Record<string, number>;
  /**
   * Device ids held, by extended resource name (`{ "nvidia.com/gpu": ["1", "3"] }`):
   * assigned by the ledger when the pool's cap lists device ids for a resource
   * the row holds. Absent when none. kici 0.9.1 keeps the field and never reads it.
   */
  devices?: Record<string, string[]>;
  /** Fields written by other writers, kept as they are. */
  [extra: string]: unknown;
}

/**
 * The whole state of one pool: the `<dir>/<pool>.json` file, or one KV value.
 */
export interface LedgerDocument {
  /** Format version; this library reads and writes version 1. */
  version: 1;
  /** The pool's cap; every writer must have registered the same one. */
  cap: ResourceCap;
  /**
   * The cap features the cap uses beyond the baseline fields; absent when it
   * uses none. A writer that does not know one of them refuses the pool.
   */
  capFeatures?: string[];
  /** Every reservation, live or not yet reaped. */
  reservations: ReservationRow[];
  /** Fields written by other writers, kept as they are. */
  [extra: string]: unknown;
}

/**
 * The answer to {@link PoolLedger.reserve}: granted, or refused with the
 * dimension that did not fit and the numbers behind the refusal.
 */
export type ReserveResult =
  | {
      /** Granted: the row is written. */
      ok: true;
      /**
       * The device ids assigned, by extended resource name, when the pool's
       * cap lists device ids for a requested resource; absent otherwise.
       */
      devices?: Record<string, string[]>;
    }
  | ReserveRefusal;

/**
 * The refusal half of {@link ReserveResult}: nothing was written.
 */
export interface ReserveRefusal {
  /** Refused: nothing was written. */
  ok: false;
  /** The pool. */
  pool: string;
  /**
   * The dimension that did not fit: `cpu`, `memory`, `agents` (the pool's
   * `maxAgents`) or an extended resource name. CPU is checked first.
   */
  dimension: CapDimension;
  /** What was asked for, in cores, bytes, agents or a count. */
  requested: number;
  /** What live rows already hold, in cores, bytes, agents or a count. */
  used: number;
  /**
   * The pool's cap in that dimension. For an extended resource the cap
   * neither caps (`maxExtended`) nor `provides`, 0: the pool has none.
   */
  max: number;
  /** True when the request exceeds the cap on its own: retrying cannot help. */
  neverFits: boolean;
}

/**
 * The answer to {@link PoolLedger.adopt} for one agent: its row was taken over
 * (`adopted: true`) or, being gone, reserved again (`adopted: false`); or it
 * was gone and did not fit any more (a refusal, as {@link ReserveResult}); or
 * another instance holds a live row for that agent id (`heldBy`; never taken).
 * Nothing is written for a refused agent.
 */
export type AdoptResult = AdoptGranted | ReserveRefusal | AdoptHeldBy;

/**
 * {@link AdoptResult}: the agent holds a row now.
 */
export interface AdoptGranted {
  /** Always true. */
  ok: true;
  /** True when its old row was taken over; false when a new row was reserved. */
  adopted: boolean;
  /** The device ids the agent's row holds now, by resource; absent when none. */
  devices?: Record<string, string[]>;
}

/**
 * {@link AdoptResult}: another instance holds a live row for the agent id; nothing written.
 */
export interface AdoptHeldBy {
  /** Always false. */
  ok: false;
  /** The instance whose live row the agent id has. */
  heldBy: string;
}

/**
 * One agent to {@link PoolLedger.adopt}: what its row holds.
 */
export interface AdoptRequest {
  /** The agent. */
  agentId: string;
  /** CPU in cores. */
  cpus: number;
  /** Memory in bytes. */
  memBytes: number;
  /** Extended resources, whole counts by name. */
  extended?: Record<string, number>;
  /**
   * The device ids the agent uses, by resource (as its grant or its last
   * adoption answered). A row taken over keeps these ids (or its own, when
   * absent); a row reserved again claims them when no other live row holds
   * them (else the agent is refused with that resource as the dimension), or
   * gets the lowest free ids when absent.
   */
  devices?: Record<string, string[]>;
}

/**
 * The most agents one {@link PoolLedger.adopt} call takes.
 */
export const MAX_ADOPT = 10_000;

/**
 * Options of {@link PoolLedger.release}; every field is an operator path.
 */
export interface ReleaseOptions {
  /**
   * Remove the agent's row whichever instance made it (an operator repairing a
   * pool; the CLI's `ledger release`). Not with `instanceId`.
   * @default false
   */
  anyInstance?: boolean;
  /**
   * Remove the agent's row only when this instance made it (another instance's
   * id included: an explicit operator path). Not with `anyInstance`.
   * @default the calling ledger's own instance id
   */
  instanceId?: string;
}

/**
 * Options of {@link PoolLedger.reserve} beyond the kici-shaped four arguments.
 */
export interface ReserveOptions {
  /**
   * Extended resources to hold, whole counts by name (`{ "nvidia.com/gpu": 1 }`).
   * Written into the row's `extended` field (zero counts are left out) and
   * counted against the pool cap's `maxExtended`; a resource the cap neither
   * caps nor `provides` is refused with that resource as the dimension.
   */
  extended?: Record<string, number>;
}

/**
 * Options of {@link PoolLedger.registerPool}.
 */
export interface RegisterPoolOptions {
  /**
   * The pool is shared with kici writers (`@kici-dev/orchestrator` <= 0.9.1):
   * refuse a cap they cannot enforce (`maxAgents`) with an error saying why.
   * @default false
   */
  kiciCompatible?: boolean;
}

/**
 * How an instance's own lease stands, as the instance itself knows it:
 *
 * - `none`: no lease yet (nothing was reserved);
 * - `held`: the store confirmed a renewal less than two thirds of the lease ago;
 * - `at-risk`: renewals have been failing for at least a third of the lease
 *   (nothing confirmed for two thirds of it); act now, the deadline is near;
 * - `lost`: the deadline has passed. Peers may take this instance's rows once
 *   `deadline + marginMs` has passed too.
 */
export type LeaseHealth = 'none' | 'held' | 'at-risk' | 'lost';

/**
 * Where an instance's lease lives, for an agent-side fence that watches it.
 */
export type LeaseLocation =
  | {
      /** A lease file on this host (MachineLedger): its mtime is the last renewal. */
      kind: 'file';
      /** The lease file's absolute path. */
      path: string;
    }
  | {
      /** A heartbeat key in a NATS JetStream KV bucket (NatsPoolLedger). */
      kind: 'nats';
      /** The bucket. */
      bucket: string;
      /** The heartbeat key; a new revision is a renewal. */
      key: string;
    }
  | {
      /** In memory (MemoryPoolLedger): nothing outside the process can watch it. */
      kind: 'memory';
    };

/**
 * What an instance knows of its own lease at one instant.
 */
export interface LeaseInfo {
  /** See {@link LeaseHealth}. */
  health: LeaseHealth;
  /** The lease id written into this instance's rows. */
  leaseId: string;
  /**
   * When the store last confirmed a renewal, in epoch ms on the ledger's clock:
   * the instant the confirmed renewal was sent, so never later than the store's
   * own record of it. `undefined` before the first.
   */
  confirmedAt: number | undefined;
  /**
   * `confirmedAt + leaseMs`: from this instant on this instance can no longer
   * count on its rows. `undefined` before the first renewal.
   */
  deadline: number | undefined;
  /** The lease length in ms. */
  leaseMs: number;
  /** What peers add to the deadline before they take rows (clock drift between the two sides). */
  marginMs: number;
  /** Where the lease lives. */
  location: LeaseLocation;
}

/**
 * A change of an instance's own lease:
 *
 * - `lease-at-risk`: renewals have failed for a third of the lease;
 * - `lease-lost`: the deadline passed without a confirmed renewal;
 * - `lease-renewed`: a renewal was confirmed again after one of the two above.
 */
export interface LeaseEvent {
  /** What happened. */
  type: 'lease-at-risk' | 'lease-lost' | 'lease-renewed';
  /** The lease as of the event. */
  lease: LeaseInfo;
  /** The last renewal failure, when one is known. */
  error?: unknown;
}

/**
 * A cross-process ledger of reservations against named pools. Implemented by
 * the file-backed `MachineLedger` and by the NATS JetStream KV ledger.
 */
export interface PoolLedger {
  /** Declare the cap a pool must have; every operation on the pool checks the stored cap against it. */
  registerPool(name: string, cap: ResourceCap, options?: RegisterPoolOptions): void;
  /** Reserve and answer only whether it was granted (kici's signature, plus optional extended resources). */
  tryReserve(
    pool: string,
    agentId: string,
    cpus: number,
    memBytes: number,
    options?: ReserveOptions,
  ): Promise<boolean>;
  /** Reserve, and on refusal say which dimension did not fit and by how much. */
  reserve(
    pool: string,
    agentId: string,
    cpus: number,
    memBytes: number,
    options?: ReserveOptions,
  ): Promise<ReserveResult>;
  /**
   * Remove the agent's reservation, fail closed: only a row this instance made
   * is removed, and another instance's row answers `false` and stays (an id
   * mix-up between two orchestrators must not free capacity still in use).
   * Idempotent; true when a row was removed. The operator path
   * `{ anyInstance: true }` removes the row whoever made it, and
   * `{ instanceId }` removes it only when that instance made it. A restarted
   * host that takes over its old agents does it by an explicit adoption (same
   * `instanceId`, or reserving again), not by releasing rows it does not own.
   */
  release(pool: string, agentId: string, options?: ReleaseOptions): Promise<boolean>;
  /**
   * Take over the rows these agents hold in `pool` under this ledger's
   * instance id but another process or lease (this host before it
   * restarted), all in one write: each row is rewritten with this process's
   * identity and the given amounts, live or already stale, so it is never
   * counted twice nor given away in between. An agent with no row of this
   * instance (reaped while the host was down) gets a new one if it fits. A
   * live row of another instance is never taken (`heldBy`). Answers one
   * {@link AdoptResult} per agent, in order. Optional: without it a restarted
   * manager recovers by `reserve`, which cannot take over a row still live.
   */
  adopt?(pool: string, agents: readonly AdoptRequest[]): Promise<AdoptResult[]>;
  /** Remove stale rows now; resolves to the number of rows reaped. */
  reapStale(pool: string): Promise<number>;
  /** The summed CPU and memory of the pool's live rows. */
  getUsage(pool: string): Promise<ResourceAmount>;
  /** The pool's live rows. */
  list(pool: string): Promise<ReservationRow[]>;
  /** Start the periodic reaper over every registered pool (unref'd timer; default 30000 ms). */
  start(intervalMs?: number): void;
  /** Stop the periodic reaper. */
  stop(): void;
  /** Release every row this instance holds in every registered pool (graceful shutdown). */
  releaseAllForInstance(): Promise<void>;
  /**
   * Stop timers and end this instance's lease. Rows are not released here (call
   * {@link PoolLedger.releaseAllForInstance} first); rows left behind become stale
   * for peers once the lease has ended, and a peer's `reapStale` (or its reaper)
   * removes them. The rule per ledger:
   *
   * - `MachineLedger`: `close()` removes the lease file `<dir>/<leaseId>.lease`,
   *   so its rows are stale at once (`lease-expired`) for a peer that has renewed
   *   its own lease for `leaseTtlMs + leaseMarginMs`. A process that dies without
   *   `close()` leaves the file: its rows go stale once the file's mtime is older
   *   than `leaseTtlMs + leaseMarginMs` (default 33 s), or at once for a peer of
   *   the same `instanceId` whose pid probe finds the process gone, or after a reboot.
   * - `NatsPoolLedger`: `close()` writes the lease key as ended, so its rows are
   *   stale for peers at once. Without `close()`, once the heartbeat key is older
   *   than `leaseMs` (default 30 s) by the server's timestamps.
   * - `MemoryPoolLedger` (`scaler-primitives/testing`): `close()` ends its lease in
   *   the shared store, so its rows are stale for peers at once; `abandon()`
   *   (a simulated crash) leaves the lease to expire after `leaseTtlMs` on the
   *   ledger's clock.
   *
   * Rows without a lease (kici's, or any writer that keeps no lease) are never reaped by lease.
   */
  close(): Promise<void>;
  /**
   * This instance's own lease as of now (see {@link LeaseInfo}). Optional for
   * third-party ledgers; without it the manager cannot act before a lease lapses.
   */
  lease?(): LeaseInfo;
  /**
   * Call `listener` on every {@link LeaseEvent} of this instance's lease. The
   * events fire from the ledger's own timer, so a host that stopped renewing
   * for lack of storage still hears of it. Listener errors are caught and
   * ignored. Returns the function that removes the listener.
   */
  onLeaseEvent?(listener: (event: LeaseEvent) => void): () => void;
}
