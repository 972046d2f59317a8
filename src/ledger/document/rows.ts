/**
 * Adding and removing rows of a pool document; the input document is never changed.
 */

import type { LedgerDocument, ReservationRow } from '../types.js';

/**
 * The document with `row` appended (the input is not changed).
 */
export function addRow(doc: LedgerDocument, row: ReservationRow): LedgerDocument {
  return { ...doc, reservations: [...doc.reservations, row] };
}

/**
 * Which rows {@link removeRows} removes: an agent, optionally only one instance's row.
 */
export interface RowMatch {
  /** The agent id. */
  agentId: string;
  /** When set, only rows of this instance. */
  instanceId?: string;
}

/**
 * What {@link removeRows} returns.
 */
export interface RemoveResult {
  /** The document without the matching rows (the same object when nothing matched). */
  doc: LedgerDocument;
  /** The rows removed. */
  removed: ReservationRow[];
}

/**
 * The document without the matching rows, and the rows removed (the input is not changed).
 */
export function removeRows(doc: LedgerDocument, match: RowMatch): RemoveResult {
  const removed: ReservationRow[] = [];
  const kept: ReservationRow[] = [];
  for (const row of doc.reservations) {
    const hit =
      row.agentId === match.agentId &&
      (match.instanceId === undefined || row.instanceId === match.instanceId);
    (hit ? removed : kept).push(row);
  }
  return { doc: removed.length ? { ...doc, reservations: kept } : doc, removed };
}

/**
 * The document keeping only `rows` (by identity), the input unchanged.
 */
export function keepRows(doc: LedgerDocument, rows: readonly ReservationRow[]): LedgerDocument {
  if (rows.length === doc.reservations.length) return doc;
  return { ...doc, reservations: [...rows] };
}
