/**
 * Which of an instance's rows are gone although it did not release them: the
 * pure part of the lost-lease report, shared by the holder's own calls and the
 * calls it applies for waiting processes (cross-process combining).
 */
import type { LedgerOp } from '../ops.js';
import type { LedgerDocument } from '../types.js';

/** The op that carries a lost-rows report, and the agents lost. */
export interface LostRows {
  /** Index of the op that fails with the report (it does nothing). */
  index: number;
  /** The agents whose rows are gone. */
  agentIds: string[];
}

/**
 * The agents in `held` (what instance `instanceId` under lease `leaseId`
 * reserved and has not released) whose row is gone from `doc`, and which of
 * `ops` carries the report: the first reserve or caller's reap. Releases never
 * carry it, nor do background reaps; a batch that releases the whole instance
 * needs none, and a row the batch releases anyway is no loss.
 */
export function findLostRows(
  doc: LedgerDocument,
  held: ReadonlySet<string> | undefined,
  instanceId: string,
  leaseId: string,
  ops: readonly LedgerOp[],
): LostRows | undefined {
  if (!held || held.size === 0) return undefined;
  const index = ops.findIndex(
    (op) => op.kind === 'reserve' || (op.kind === 'reap' && !op.background),
  );
  if (index < 0) return undefined;
  if (ops.some((op) => op.kind === 'releaseInstance' && op.instanceId === instanceId)) {
    return undefined;
  }
  const releasing = new Set(ops.flatMap((op) => (op.kind === 'release' ? [op.agentId] : [])));
  const present = new Set(
    doc.reservations
      .filter((row) => row.instanceId === instanceId && (row.leaseId ?? leaseId) === leaseId)
      .map((row) => row.agentId),
  );
  const agentIds = [...held].filter((agentId) => !present.has(agentId) && !releasing.has(agentId));
  return agentIds.length === 0 ? undefined : { index, agentIds };
}
