/**
 * Which rows of a pool document are stale, decided from facts the backend gathered
 * (boot id, process probe, lease state). No I/O, no clock.
 */

import type { ReservationRow } from '../types.js';

/**
 * Why a row is stale: a constant object and its union type.
 */
export const StaleReason = {
  /** Written during an earlier boot of the host. */
  OTHER_BOOT: 'other-boot',
  /** Same instance; the writer's process no longer exists. */
  PROCESS_GONE: 'process-gone',
  /** Same instance; the pid now belongs to a newer process (start time differs). */
  PID_REUSED: 'pid-reused',
  /** Another instance whose lease has expired or ended. */
  LEASE_EXPIRED: 'lease-expired',
} as const;
/** One of the values of {@link StaleReason}. */
export type StaleReason = (typeof StaleReason)[keyof typeof StaleReason];

/**
 * What a same-instance row's process probe found.
 */
export type ProcessState = 'alive' | 'gone' | 'reused';
/**
 * What a peer row's lease check found; `unknown` keeps the row (fail safe).
 */
export type LeaseState = 'fresh' | 'expired' | 'unknown';

/**
 * Facts the stale-row rule needs, gathered by the backend before it decides.
 * The backend decides how to answer (pid probe, lease file mtime, KV key age).
 */
export interface LivenessFacts {
  /** The host's current boot id. */
  bootId: string;
  /** This ledger's instance id. */
  instanceId: string;
  /** Probe a same-instance row's process (pid, and start time when the row has one). */
  processState(row: ReservationRow): ProcessState;
  /** Check the lease of a peer row that carries `leaseId`. */
  leaseState(leaseId: string, row: ReservationRow): LeaseState;
}

/**
 * A row's verdict: live, or stale with the reason.
 */
export type RowVerdict =
  | {
      /** The row is live. */
      stale: false;
    }
  | {
      /** The row is stale. */
      stale: true;
      /** Why. */
      reason: StaleReason;
    };

/**
 * A stale row and why it is stale.
 */
export interface StaleRow {
  /** The row. */
  row: ReservationRow;
  /** Why it is stale. */
  reason: StaleReason;
}

/**
 * Decide whether one row is stale. In order:
 * 1. another boot id: stale;
 * 2. same instance: the process probe decides (gone or reused: stale);
 * 3. another instance with a lease: an expired lease is stale, fresh or unknown is live;
 * 4. another instance without a lease (an older writer): live, as kici's ledger has it,
 *    until the host reboots or the owner releases it.
 */
export function rowVerdict(row: ReservationRow, facts: LivenessFacts): RowVerdict {
  if (row.bootId !== facts.bootId) return { stale: true, reason: StaleReason.OTHER_BOOT };
  if (row.instanceId === facts.instanceId) {
    const state = facts.processState(row);
    if (state === 'gone') return { stale: true, reason: StaleReason.PROCESS_GONE };
    if (state === 'reused') return { stale: true, reason: StaleReason.PID_REUSED };
    return { stale: false };
  }
  if (typeof row.leaseId === 'string') {
    if (facts.leaseState(row.leaseId, row) === 'expired') {
      return { stale: true, reason: StaleReason.LEASE_EXPIRED };
    }
  }
  return { stale: false };
}

/**
 * A document's rows split into live ones and stale ones (with reasons), in document order.
 */
export interface RowPartition {
  /** Rows to keep. */
  live: ReservationRow[];
  /** Rows to reap, each with why. */
  stale: StaleRow[];
}

/** Split rows into live and stale, in document order, by a per-row verdict. */
export function partitionBy(
  rows: readonly ReservationRow[],
  verdictOf: (row: ReservationRow) => RowVerdict,
): RowPartition {
  const live: ReservationRow[] = [];
  const stale: RowPartition['stale'] = [];
  for (const row of rows) {
    const verdict = verdictOf(row);
    if (verdict.stale) stale.push({ row, reason: verdict.reason });
    else live.push(row);
  }
  return { live, stale };
}

/**
 * Split rows into live and stale with {@link rowVerdict}.
 */
export function partitionRows(rows: readonly ReservationRow[], facts: LivenessFacts): RowPartition {
  return partitionBy(rows, (row) => rowVerdict(row, facts));
}
