/**
 * Recognising nats.js v3 errors without importing nats.js: by name, code and
 * cause chain, so the checks also hold for errors thrown by another copy of
 * `@nats-io/*` than the one this library resolved. Shared by the NATS adapters
 * (agent caps, ledger). Internal: not part of the public surface.
 */
import { ErrorCode, NatsRequestError } from '../errors/index.js';

/** JetStream API error codes this library reacts to (nats.js `JetStreamApiCodes`). */
export const JetStreamCode = {
  /** `stream not found` */
  StreamNotFound: 10059,
  /** `wrong last sequence: N`: a compare-and-set lost to another writer. */
  WrongLastSequence: 10071,
  /** `wrong last sequence`, the variant for a subject whose last sequence is unknown. */
  WrongLastSequenceUnknown: 10164,
} as const;

/** Every error in `err`'s cause chain, outermost first (bounded, cycle-safe). */
function* chain(err: unknown): Generator<Record<string, unknown>> {
  const seen = new Set<unknown>();
  let current = err;
  for (let depth = 0; depth < 8; depth++) {
    if (typeof current !== 'object' || current === null || seen.has(current)) return;
    seen.add(current);
    yield current as Record<string, unknown>;
    current = (current as { cause?: unknown }).cause;
  }
}

/**
 * The JetStream API error code (`err_code`, e.g. 10071) carried by `err` or
 * one of its causes, or `undefined`. nats.js puts it on `JetStreamApiError`
 * (and its subclasses) as a numeric `code` next to an `apiError()` method.
 */
export function jetStreamApiCode(err: unknown): number | undefined {
  for (const e of chain(err)) {
    if (typeof e.code === 'number' && typeof e.apiError === 'function') return e.code;
  }
  return undefined;
}

/**
 * True when `err` is a lost compare-and-set on a JetStream subject: JetStream
 * API codes 10071 and 10164 (`wrong last sequence`), as raised by nats.js
 * `kv.update`, `kv.create` and publishes with an expected last subject sequence.
 */
export function isJetStreamRevisionConflict(err: unknown): boolean {
  const code = jetStreamApiCode(err);
  return (
    code === JetStreamCode.WrongLastSequence || code === JetStreamCode.WrongLastSequenceUnknown
  );
}

/** True when `err` says the stream does not exist (JetStream API code 10059). */
export function isStreamNotFound(err: unknown): boolean {
  return jetStreamApiCode(err) === JetStreamCode.StreamNotFound;
}

function hasName(err: unknown, name: string): boolean {
  for (const e of chain(err)) if (e.name === name) return true;
  return false;
}

/** True when a request got no reply before its deadline (nats.js `TimeoutError`). */
export function isNatsTimeout(err: unknown): boolean {
  return hasName(err, 'TimeoutError');
}

/**
 * True when nothing subscribes to the requested subject (status 503): nats.js
 * v3 rejects with a `RequestError` whose cause is a `NoRespondersError`
 * (whose `name` is `NoResponders`).
 */
export function isNoResponders(err: unknown): boolean {
  for (const e of chain(err)) {
    if (e.name === 'NoResponders' || e.name === 'NoRespondersError') return true;
    if (typeof e.isNoResponders === 'function' && (e.isNoResponders as () => unknown)() === true) {
      return true;
    }
  }
  return false;
}

/** True when the server refused the publish or subscribe for permissions. */
export function isPermissionViolation(err: unknown): boolean {
  return hasName(err, 'PermissionViolationError');
}

/**
 * Wrap a failed NATS request into a {@link NatsRequestError}: code
 * `ERR_NATS_TIMEOUT` for a timeout, `ERR_NATS_REQUEST` otherwise, with
 * `what` (a sentence naming the operation) and the original error as `cause`.
 *
 * @param err - What nats.js threw.
 * @param subject - The subject involved.
 * @param what - e.g. `Reading the caps of agent "iris"`.
 * @param timeoutHint - A sentence appended to a timeout's message (what a timeout may really mean).
 */
export function toNatsRequestError(
  err: unknown,
  subject: string,
  what: string,
  timeoutHint = '',
): NatsRequestError {
  const detail = err instanceof Error ? err.message : String(err);
  if (isNatsTimeout(err)) {
    return new NatsRequestError(
      ErrorCode.NATS_TIMEOUT,
      subject,
      `${what} timed out (${subject}).${timeoutHint ? ` ${timeoutHint}` : ''}`,
      { cause: err },
    );
  }
  const hint = isPermissionViolation(err)
    ? ' The server refused it for permissions: check the connection\u2019s grant for this subject.'
    : '';
  return new NatsRequestError(
    ErrorCode.NATS_REQUEST,
    subject,
    `${what} failed (${subject}): ${detail}.${hint}`,
    { cause: err },
  );
}

/** True when the connection was closed for good (by `close()`, or the client gave up reconnecting). */
export function isConnectionClosed(err: unknown): boolean {
  return hasName(err, 'ClosedConnectionError');
}
