/**
 * Reading NATS failures without importing the client: a JetStream API error
 * carries a numeric `code`; everything else (timeouts, no responders, a
 * connection being re-established) means the server cannot answer right now.
 *
 * Kept small on purpose: the `agent-caps` adapter has the same recognizer in
 * `src/internal/nats-errors.ts`, which replaces this file once both are merged.
 */

/** JetStream's "wrong last sequence" codes: the compare-and-set lost a race. */
const CONFLICT_CODES: ReadonlySet<number> = new Set([10071, 10164]);

/**
 * True when a compare-and-set write lost: the revision moved (JetStream codes
 * 10071, 10164), or another writer from the same revision won (`DuplicateWriteError`).
 */
export function isRevisionConflict(error: unknown): boolean {
  for (let e = error, depth = 0; e && depth < 4; e = (e as { cause?: unknown }).cause, depth++) {
    if ((e as { name?: unknown }).name === 'DuplicateWriteError') return true;
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'number' && CONFLICT_CODES.has(code)) return true;
    if (typeof code === 'string' && CONFLICT_CODES.has(Number(code))) return true;
  }
  return false;
}

/** True when the connection was closed for good (by `close()` or by the client giving up). */
export function isConnectionClosed(error: unknown): boolean {
  for (let e = error, depth = 0; e && depth < 4; e = (e as { cause?: unknown }).cause, depth++) {
    if ((e as { name?: unknown }).name === 'ClosedConnectionError') return true;
  }
  return false;
}

/** A short description of a NATS failure for messages. */
export function describeNatsError(error: unknown): string {
  if (error instanceof Error) {
    const code = (error as { code?: unknown }).code;
    return code === undefined ? `${error.name}: ${error.message}` : `${error.message} (${code})`;
  }
  return String(error);
}
