/**
 * Adding and removing rows of a pool document; the input document is never changed.
 */

import type { LedgerDocument, ReservationRow } from '../types.js';

/**
 * The document with `row` appended (the input is not changed).
 *
 * @example
 * ```ts
 * import type { Clock } from 'scaler-primitives';
 * import { addRow, type LedgerDocument } from 'scaler-primitives/ledger';
 * declare const doc: LedgerDocument;
 * declare const bootId: string;
 * declare const clock: Clock;
 * const next = addRow(doc, {
 *   instanceId: 'orchestrator-a', pid: process.pid, bootId, agentId: 'agent-1',
 *   cpus: 2, memBytes: 4 * 2 ** 30, reservedAt: clock.now(),
 * });
 * ```
 */
export function addRow(doc: LedgerDocument, row: ReservationRow): LedgerDocument {
  return { ...doc, reservations: [...doc.reservations, row] };
}

/**
 * Which rows {@link removeRows} removes: an agent, optionally only one instance's row.
 *
 * @example
 * ```ts
 * import { type LedgerDocument, removeRows, type RowMatch } from 'scaler-primitives/ledger';
 * declare const doc: LedgerDocument;
 * const match: RowMatch = { agentId: 'agent-1', instanceId: 'orchestrator-a' }; // only this instance's row
 * const { doc: next, removed } = removeRows(doc, match);
 * ```
 */
export interface RowMatch {
  /** The agent id. */
  agentId: string;
  /** When set, only rows of this instance. */
  instanceId?: string;
}

/**
 * What {@link removeRows} returns.
 *
 * @example
 * ```ts
 * import { type LedgerDocument, type RemoveResult, removeRows } from 'scaler-primitives/ledger';
 * declare const doc: LedgerDocument;
 * declare function writeDocument(doc: LedgerDocument): void;
 * const result: RemoveResult = removeRows(doc, { agentId: 'agent-1' });
 * if (result.removed.length > 0) writeDocument(result.doc);
 * ```
 */
export interface RemoveResult {
  /** The document without the matching rows (the same object when nothing matched). */
  doc: LedgerDocument;
  /** The rows removed. */
  removed: ReservationRow[];
}

/**
 * The document without the matching rows, and the rows removed (the input is not changed).
 *
 * @example
 * ```ts
 * import { type LedgerDocument, removeRows } from 'scaler-primitives/ledger';
 * declare const doc: LedgerDocument;
 * const { doc: next, removed } = removeRows(doc, { agentId: 'agent-1' }); // any instance's row
 * ```
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
 *
 * @example
 * ```ts
 * import { keepRows, type LedgerDocument, type LivenessFacts, partitionRows } from 'scaler-primitives/ledger';
 * declare const doc: LedgerDocument;
 * declare const facts: LivenessFacts;
 * const { live } = partitionRows(doc.reservations, facts);
 * const reaped = keepRows(doc, live); // the stale rows dropped, cap and unknown fields kept
 * ```
 */
export function keepRows(doc: LedgerDocument, rows: readonly ReservationRow[]): LedgerDocument {
  if (rows.length === doc.reservations.length) return doc;
  return { ...doc, reservations: [...rows] };
}
