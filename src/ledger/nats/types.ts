/**
 * The public option and snapshot types of the NATS pool ledger.
 */
import type { NatsConnection } from '@nats-io/transport-node';
import type { Clock } from '../../clock.js';
import type { ResourceAmount, ResourceCap } from '../../resources/types.js';
import type { LedgerTelemetryOptions } from '../telemetry.js';
import type { ReservationRow } from '../types.js';
import type { MIN_SAFE_NATS_SERVER_VERSION } from './server-version.js';

/**
 * Options of `NatsPoolLedger.connect`.
 */
export interface NatsPoolLedgerOptions extends LedgerTelemetryOptions {
  /** An open connection to use (it is not closed by `NatsPoolLedger.close`). Give this or `servers`. */
  nc?: NatsConnection;
  /**
   * Server URLs to connect to (needs `@nats-io/transport-node`); the ledger owns
   * this connection, reconnects forever and closes it in `NatsPoolLedger.close`.
   */
  servers?: string | string[];
  /**
   * The KV bucket. Created (with `replicas`, history 1) when it does not exist;
   * an existing bucket is used as it is.
   * @default 'scaler-pools'
   */
  bucket?: string;
  /** This orchestrator instance's id, written into every row it makes. */
  instanceId: string;
  /**
   * The lease window. The heartbeat is refreshed every `leaseMs / 3`; a peer
   * whose heartbeat is older than this plus `leaseMarginMs` (by the server's
   * timestamps, while this instance's own heartbeats were confirmed) is fenced
   * and its rows are reaped. Minimum 300.
   * @default 30000
   */
  leaseMs?: number;
  /**
   * What peers add to this instance's deadline before they take its rows, and
   * what this instance adds to a peer's window before it judges the peer
   * expired: it covers the drift between the clocks involved. At least 0 and
   * less than `leaseMs`.
   * @default Math.max(1000, Math.ceil(leaseMs / 10)), at most half of `leaseMs`
   */
  leaseMarginMs?: number;
  /**
   * What to do when the server connected to is part of a cluster and older than
   * {@link MIN_SAFE_NATS_SERVER_VERSION} (a single server of any version
   * passes: the faults of older servers are in leader changes): `'warn'` emits
   * a process warning (code `SCALER_NATS_SERVER_VERSION`, once per version and
   * process) and goes on; `'refuse'` fails `connect` with
   * `NatsServerVersionError`; `'ignore'` says nothing (you accept the risk).
   * @default 'warn'
   */
  serverVersionPolicy?: 'warn' | 'refuse' | 'ignore';
  /** Replicas of the bucket when this call creates it (1, 3 or 5 in a cluster). @default 1 */
  replicas?: number;
  /**
   * The longest any call takes, from the call to its answer: it keeps retrying
   * lost compare-and-set races (then `LedgerBusyError`) or an unreachable server
   * (then `LedgerUnavailableError` when nothing was sent, `LedgerOutcomeUnknownError`
   * when a write went out without an answer; the ledger settles those itself).
   * @default 10000
   */
  timeoutMs?: number;
  /** The boot id written into rows (informational across hosts). @default read from `/proc` */
  bootId?: string;
  /**
   * The clock of `reservedAt`, the heartbeat and the reaper timers. Lease
   * liveness is judged by the server's timestamps and this host's monotonic
   * clock, and retry pauses are real waits on the server, whatever is given here.
   * @default the system clock (`systemClock` from `scaler-primitives/ledger`)
   */
  clock?: Clock;
  /**
   * Combine across processes: the first instance to act on a pool becomes its
   * combiner (elected through the `leader.<pool>` key, tied to its lease) and
   * every other instance sends its calls on that pool to it, over NATS
   * request/reply, instead of racing for the compare-and-set itself. The
   * combiner commits everyone's waiting calls in one compare-and-set. Every
   * write stays a compare-and-set on the pool key, so writers that do not
   * combine (`combine: false`) share the pool safely.
   * @default true
   */
  combine?: boolean;
}

/**
 * Everything about a pool as one instance sees it, from `NatsPoolLedger.inspect`.
 */
export interface NatsPoolSnapshot {
  /** The pool name. */
  pool: string;
  /** The KV key, `pool.<name>`. */
  key: string;
  /** The key's revision, or 0 when the pool has never been written. */
  revision: number;
  /** The cap stored in the document (the registered cap when there is no document yet). */
  cap: ResourceCap;
  /** Live rows. */
  live: ReservationRow[];
  /** Rows whose lease has expired, each with the reason; the next write drops them. */
  stale: Array<{
    /** The row. */
    row: ReservationRow;
    /** Why it is stale (`lease-expired`). */
    reason: string;
  }>;
  /** Summed CPU and memory of live rows. */
  usage: ResourceAmount;
}
