/**
 * Which rows of a pool are live, judged by leases alone. Across hosts a boot id
 * or a pid says nothing, so the file ledger's rule (boot id, then process
 * probe) does not apply; a row is live while the lease it names is fresh.
 */
import {
  type LeaseState,
  partitionBy,
  type RowPartition,
  type RowVerdict,
  StaleReason,
} from '../document/verdict.js';
import type { ReservationRow } from '../types.js';

/** What the lease rule needs: this ledger's lease, and the state of other leases. */
export interface LeaseFacts {
  /** This ledger's current lease id: its own rows are live. */
  ownLeaseId: string;
  /** The state of another lease; `unknown` keeps the row (fail safe). */
  leaseState(leaseId: string): LeaseState;
}

/**
 * A row is stale only when the lease it names has expired. Rows without a
 * lease (written by a writer that keeps none) are never reaped here: nothing
 * across hosts can prove their writer gone; release them by agent id.
 */
export function leaseVerdict(row: ReservationRow, facts: LeaseFacts): RowVerdict {
  if (typeof row.leaseId !== 'string' || row.leaseId === facts.ownLeaseId) {
    return { stale: false };
  }
  return facts.leaseState(row.leaseId) === 'expired'
    ? { stale: true, reason: StaleReason.LEASE_EXPIRED }
    : { stale: false };
}

/** Split rows into live and stale by {@link leaseVerdict}, in document order. */
export function partitionByLease(rows: readonly ReservationRow[], facts: LeaseFacts): RowPartition {
  return partitionBy(rows, (row) => leaseVerdict(row, facts));
}

/** The distinct lease ids of rows that need a lease check (not ours, not lease-less). */
export function foreignLeases(rows: readonly ReservationRow[], ownLeaseId: string): string[] {
  const ids = new Set<string>();
  for (const row of rows) {
    if (typeof row.leaseId === 'string' && row.leaseId !== ownLeaseId) ids.add(row.leaseId);
  }
  return [...ids];
}

/**
 * The server's clock as seen from this host, without trusting this host's wall
 * clock: a server timestamp taken from an entry this instance wrote, plus the
 * time elapsed since on this host's monotonic clock. The anchor is the moment
 * the write was acknowledged, when the server's clock had already passed the
 * timestamp, so the estimate never runs ahead of the server: an error here
 * makes a peer's heartbeat look younger, never older.
 */
export class ServerClock {
  private anchorServerMs: number | undefined;
  private anchorLocalMs = 0;
  /** The smallest `serverMs - sentMs` seen: the upper bound's offset. */
  private upperOffset: number | undefined;

  /** @param monotonic - This host's monotonic clock in ms (`performance.now`). */
  constructor(private readonly monotonic: () => number) {}

  /**
   * Record that an entry stamped `serverMs` was acknowledged at local `localMs`,
   * and (for the upper bound) sent at local `sentMs`.
   */
  anchor(serverMs: number, localMs: number, sentMs?: number): void {
    // The server stamped the entry after it was sent: its clock read at most
    // `serverMs` then, so `serverMs + (now - sentMs)` never runs behind it.
    if (sentMs !== undefined && sentMs <= localMs) {
      const offset = serverMs - sentMs;
      if (this.upperOffset === undefined || offset < this.upperOffset) this.upperOffset = offset;
    }
    // Keep the later anchor: it carries less drift.
    if (this.anchorServerMs === undefined || serverMs >= this.anchorServerMs) {
      this.anchorServerMs = serverMs;
      this.anchorLocalMs = localMs;
    }
  }

  /** The server's time at local monotonic instant `localMs` (a lower bound), or undefined before the first anchor. */
  at(localMs: number): number | undefined {
    if (this.anchorServerMs === undefined) return undefined;
    return this.anchorServerMs + (localMs - this.anchorLocalMs);
  }

  /**
   * The server's time now as an upper bound (from the send times), or undefined
   * before the first anchor: what judges a peer's heartbeat still fresh, so that
   * an error makes it look older, never younger.
   */
  upperNow(): number | undefined {
    if (this.upperOffset === undefined) return undefined;
    return this.upperOffset + this.monotonic();
  }

  /** The server's time now (a lower bound), or undefined before the first anchor. */
  now(): number | undefined {
    if (this.anchorServerMs === undefined) return undefined;
    return this.anchorServerMs + (this.monotonic() - this.anchorLocalMs);
  }
}
