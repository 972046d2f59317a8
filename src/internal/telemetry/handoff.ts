/**
 * A span handed from the manager to the ledger across `PoolLedger.reserve`, whose
 * signature has no parameter for a context. The manager offers its reserve span
 * under (pool, agent) just before calling `reserve`, and withdraws it right
 * after the call returns its promise; a ledger with a tracer takes it in the
 * same synchronous stretch (before its first `await`) and parents its own span
 * on it. Nothing is stored when no tracer is configured.
 */
import type { OtelSpan } from './api.js';

const offered = new Map<string, OtelSpan>();

function key(pool: string, agentId: string): string {
  return `${pool}\u0000${agentId}`;
}

/** Offer `span` as the parent of the ledger's span for this reservation. */
export function offerParentSpan(pool: string, agentId: string, span: OtelSpan): void {
  offered.set(key(pool, agentId), span);
}

/** Withdraw an offer (whether or not a ledger took it). */
export function withdrawParentSpan(pool: string, agentId: string): void {
  offered.delete(key(pool, agentId));
}

/** Take the span offered for this reservation, if any. */
export function takeParentSpan(pool: string, agentId: string): OtelSpan | undefined {
  const k = key(pool, agentId);
  const span = offered.get(k);
  if (span !== undefined) offered.delete(k);
  return span;
}
