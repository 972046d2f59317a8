// The ledger's errors (src/ledger, src/ledger/nats): the `LedgerError` base and its
// document, cap, lock, lease and availability failures. File-system refusals: ./ledger-fs.ts.
// Re-exported by the entry point src/errors.ts: code outside src/errors/ imports from it only.

import {
  ErrorCode,
  type ErrorCodeName,
  hasCode,
  ScalerError,
  type ScalerErrorOptions,
} from './base.js';

/**
 * Base class of the ledger's errors; `pool` names the pool involved.
 *
 * @example
 * ```ts
 * import { isLedgerError } from 'scaler-primitives';
 * import type { MachineLedger } from 'scaler-primitives/ledger';
 * declare const ledger: MachineLedger;
 * try { await ledger.reserve('build-host', 'agent-1', 2, 4 * 2 ** 30); }
 * catch (error) { if (isLedgerError(error)) console.error(error.message); else throw error; }
 * ```
 */
export class LedgerError extends ScalerError {
  /** The pool involved. */
  readonly pool: string;
  /**
   * @param code - One of the `LEDGER_*` codes.
   * @param pool - The pool involved.
   * @param message - The full sentence.
   * @param options - `cause`.
   */
  constructor(code: ErrorCodeName, pool: string, message: string, options?: ScalerErrorOptions) {
    super(code, message, options);
    this.name = 'LedgerError';
    this.pool = pool;
  }
}

/**
 * A ledger document is unparseable, of the wrong shape or of an unknown version. Nothing was written.
 *
 * @example
 * ```ts
 * import { isLedgerCorruptError } from 'scaler-primitives';
 * import type { MachineLedger } from 'scaler-primitives/ledger';
 * declare const ledger: MachineLedger;
 * try { await ledger.reserve('build-host', 'agent-1', 2, 4 * 2 ** 30); }
 * catch (error) { if (isLedgerCorruptError(error)) console.error(error.message); else throw error; }
 * ```
 */
export class LedgerCorruptError extends LedgerError {
  /** The file path or KV key of the document. */
  readonly location: string;
  /**
   * @param pool - The pool.
   * @param location - The file path or KV key.
   * @param message - The full sentence.
   * @param options - `cause`.
   */
  constructor(pool: string, location: string, message: string, options?: ScalerErrorOptions) {
    super(ErrorCode.LEDGER_CORRUPT, pool, message, options);
    this.name = 'LedgerCorruptError';
    this.location = location;
  }
}

/**
 * A pool's stored cap differs from the cap given to `registerPool`. Nothing was written.
 *
 * @example
 * ```ts
 * import { isLedgerCapMismatchError } from 'scaler-primitives';
 * import type { MachineLedger } from 'scaler-primitives/ledger';
 * declare const ledger: MachineLedger;
 * try { await ledger.reserve('build-host', 'agent-1', 2, 4 * 2 ** 30); }
 * catch (error) { if (isLedgerCapMismatchError(error)) console.error(error.message); else throw error; }
 * ```
 */
export class LedgerCapMismatchError extends LedgerError {
  /** The cap stored in the ledger. */
  readonly stored: unknown;
  /** The cap this process registered. */
  readonly registered: unknown;
  /**
   * @param pool - The pool.
   * @param stored - The stored cap.
   * @param registered - The registered cap.
   * @param message - The full sentence.
   */
  constructor(pool: string, stored: unknown, registered: unknown, message: string) {
    super(ErrorCode.LEDGER_CAP_MISMATCH, pool, message);
    this.name = 'LedgerCapMismatchError';
    this.stored = stored;
    this.registered = registered;
  }
}

/**
 * The ledger lock, or a compare-and-set, could not be won before the deadline.
 *
 * @example
 * ```ts
 * import { isLedgerBusyError } from 'scaler-primitives';
 * import type { MachineLedger } from 'scaler-primitives/ledger';
 * declare const ledger: MachineLedger;
 * try { await ledger.reserve('build-host', 'agent-1', 2, 4 * 2 ** 30); }
 * catch (error) { if (isLedgerBusyError(error)) console.error(error.message); else throw error; }
 * ```
 */
export class LedgerBusyError extends LedgerError {
  /** How long the lock had been held when we gave up, in ms, when known. */
  readonly lockAgeMs: number | undefined;
  /**
   * @param pool - The pool.
   * @param lockAgeMs - The lock's age when known.
   * @param message - The full sentence.
   * @param options - `cause`.
   */
  constructor(
    pool: string,
    lockAgeMs: number | undefined,
    message: string,
    options?: ScalerErrorOptions,
  ) {
    super(ErrorCode.LEDGER_BUSY, pool, message, options);
    this.name = 'LedgerBusyError';
    this.lockAgeMs = lockAgeMs;
  }
}

/**
 * The lock was taken over while this operation held it; the operation wrote nothing.
 * Calls that a combining holder had claimed before (and may have written) are redone
 * by the ledger itself; only when every redo for `lockTimeoutMs` loses its lock do
 * they get this error, and then its message says they may have been applied.
 *
 * @example
 * ```ts
 * import { isLedgerLockCompromisedError } from 'scaler-primitives';
 * import type { MachineLedger } from 'scaler-primitives/ledger';
 * declare const ledger: MachineLedger;
 * try { await ledger.reserve('build-host', 'agent-1', 2, 4 * 2 ** 30); }
 * catch (error) { if (isLedgerLockCompromisedError(error)) console.error(error.message); else throw error; }
 * ```
 */
export class LedgerLockCompromisedError extends LedgerError {
  /**
   * @param pool - The pool.
   * @param message - The full sentence.
   * @param options - `cause`.
   */
  constructor(pool: string, message: string, options?: ScalerErrorOptions) {
    super(ErrorCode.LEDGER_LOCK_COMPROMISED, pool, message, options);
    this.name = 'LedgerLockCompromisedError';
  }
}

/**
 * Reservations this instance made may be gone: its lease expired while it was
 * stalled and peers may have reaped its rows (`NatsPoolLedger`), or rows it
 * holds vanished without it releasing them, by a peer's reap or an operator's
 * release (`MachineLedger`). Reported once per loss; the next call proceeds.
 *
 * @example
 * ```ts
 * import { isLedgerLeaseExpiredError } from 'scaler-primitives';
 * import type { MachineLedger } from 'scaler-primitives/ledger';
 * declare const ledger: MachineLedger;
 * declare function reconcileAgents(): Promise<void>;
 * try { await ledger.reserve('build-host', 'agent-1', 2, 4 * 2 ** 30); }
 * catch (error) { if (isLedgerLeaseExpiredError(error)) await reconcileAgents(); else throw error; }
 * ```
 */
export class LedgerLeaseExpiredError extends LedgerError {
  /**
   * The agents whose reservations are known to be lost. Empty when the backend
   * cannot tell which ones (`NatsPoolLedger`: treat every earlier reservation
   * in the pool as lost).
   */
  readonly agentIds: readonly string[];
  /**
   * @param pool - The pool.
   * @param message - The full sentence.
   * @param agentIds - The agents known to be lost, when known.
   */
  constructor(pool: string, message: string, agentIds: readonly string[] = []) {
    super(ErrorCode.LEDGER_LEASE_EXPIRED, pool, message);
    this.name = 'LedgerLeaseExpiredError';
    this.agentIds = agentIds;
  }
}

/**
 * The ledger's backing store cannot be reached right now.
 *
 * @example
 * ```ts
 * import { isLedgerUnavailableError } from 'scaler-primitives';
 * import type { MachineLedger } from 'scaler-primitives/ledger';
 * declare const ledger: MachineLedger;
 * try { await ledger.reserve('build-host', 'agent-1', 2, 4 * 2 ** 30); }
 * catch (error) { if (isLedgerUnavailableError(error)) console.error(error.message); else throw error; }
 * ```
 */
export class LedgerUnavailableError extends LedgerError {
  /**
   * @param pool - The pool.
   * @param message - The full sentence.
   * @param options - `cause`.
   */
  constructor(pool: string, message: string, options?: ScalerErrorOptions) {
    super(ErrorCode.LEDGER_UNAVAILABLE, pool, message, options);
    this.name = 'LedgerUnavailableError';
  }
}

/**
 * The outcome of some calls is unknown: a combining holder (another process that
 * applies waiting processes' calls in its own write) took them and may have
 * written them, but its answer never came, and a storage fault (`ENOSPC`,
 * `EROFS`...) or a lost lock kept this process from settling them from the pool
 * file. Nothing needs to be done to the pool: the ledger settles these calls
 * itself in its next successful write on the pool (a reserve's row, if one was
 * written, is removed; a release is completed). Treat a reserve as not granted
 * (do not start the agent) and a release as done.
 *
 * @example
 * ```ts
 * import { isLedgerOutcomeUnknownError } from 'scaler-primitives';
 * import type { MachineLedger } from 'scaler-primitives/ledger';
 * declare const ledger: MachineLedger;
 * try { await ledger.reserve('build-host', 'agent-1', 2, 4 * 2 ** 30); }
 * catch (error) { if (isLedgerOutcomeUnknownError(error)) console.error(error.agentIds); else throw error; }
 * ```
 */
export class LedgerOutcomeUnknownError extends LedgerError {
  /** The agents of the calls whose outcome is unknown. */
  readonly agentIds: readonly string[];
  /**
   * @param pool - The pool.
   * @param agentIds - The agents of the calls.
   * @param message - The full sentence.
   * @param options - `cause`: the error that kept the calls from being settled.
   */
  constructor(
    pool: string,
    agentIds: readonly string[],
    message: string,
    options?: ScalerErrorOptions,
  ) {
    super(ErrorCode.LEDGER_OUTCOME_UNKNOWN, pool, message, options);
    this.name = 'LedgerOutcomeUnknownError';
    this.agentIds = agentIds;
  }
}

/**
 * True for any {@link LedgerError}.
 *
 * @example
 * ```ts
 * import { isLedgerError } from 'scaler-primitives';
 * declare const error: unknown;
 * if (isLedgerError(error)) console.error(error.code, error.pool);
 * ```
 */
export const isLedgerError = hasCode<LedgerError>([
  ErrorCode.LEDGER_CORRUPT,
  ErrorCode.LEDGER_CAP_MISMATCH,
  ErrorCode.LEDGER_BUSY,
  ErrorCode.LEDGER_LOCK_COMPROMISED,
  ErrorCode.LEDGER_DIR_UNSAFE,
  ErrorCode.LEDGER_FILE_UNSAFE,
  ErrorCode.LEDGER_LEASE_EXPIRED,
  ErrorCode.LEDGER_UNAVAILABLE,
  ErrorCode.LEDGER_IO,
  ErrorCode.LEDGER_OUTCOME_UNKNOWN,
]);

/**
 * True for a {@link LedgerCorruptError}.
 *
 * @example
 * ```ts
 * import { isLedgerCorruptError } from 'scaler-primitives';
 * declare const error: unknown;
 * if (isLedgerCorruptError(error)) console.error(error.code, error.location);
 * ```
 */
export const isLedgerCorruptError = hasCode<LedgerCorruptError>([ErrorCode.LEDGER_CORRUPT]);

/**
 * True for a {@link LedgerCapMismatchError}.
 *
 * @example
 * ```ts
 * import { isLedgerCapMismatchError } from 'scaler-primitives';
 * declare const error: unknown;
 * if (isLedgerCapMismatchError(error)) console.error(error.code, error.stored, error.registered);
 * ```
 */
export const isLedgerCapMismatchError = hasCode<LedgerCapMismatchError>([
  ErrorCode.LEDGER_CAP_MISMATCH,
]);

/**
 * True for a {@link LedgerBusyError}.
 *
 * @example
 * ```ts
 * import { isLedgerBusyError } from 'scaler-primitives';
 * declare const error: unknown;
 * if (isLedgerBusyError(error)) console.error(error.code, error.lockAgeMs);
 * ```
 */
export const isLedgerBusyError = hasCode<LedgerBusyError>([ErrorCode.LEDGER_BUSY]);

/**
 * True for a {@link LedgerLockCompromisedError}.
 *
 * @example
 * ```ts
 * import { isLedgerLockCompromisedError } from 'scaler-primitives';
 * declare const error: unknown;
 * if (isLedgerLockCompromisedError(error)) console.error(error.code);
 * ```
 */
export const isLedgerLockCompromisedError = hasCode<LedgerLockCompromisedError>([
  ErrorCode.LEDGER_LOCK_COMPROMISED,
]);

/**
 * True for a {@link LedgerLeaseExpiredError}.
 *
 * @example
 * ```ts
 * import { isLedgerLeaseExpiredError } from 'scaler-primitives';
 * declare const error: unknown;
 * if (isLedgerLeaseExpiredError(error)) console.error(error.code, error.agentIds);
 * ```
 */
export const isLedgerLeaseExpiredError = hasCode<LedgerLeaseExpiredError>([
  ErrorCode.LEDGER_LEASE_EXPIRED,
]);

/**
 * True for a {@link LedgerUnavailableError}.
 *
 * @example
 * ```ts
 * import { isLedgerUnavailableError } from 'scaler-primitives';
 * declare const error: unknown;
 * if (isLedgerUnavailableError(error)) console.error(error.code);
 * ```
 */
export const isLedgerUnavailableError = hasCode<LedgerUnavailableError>([
  ErrorCode.LEDGER_UNAVAILABLE,
]);

/**
 * True for a {@link LedgerOutcomeUnknownError}.
 *
 * @example
 * ```ts
 * import { isLedgerOutcomeUnknownError } from 'scaler-primitives';
 * declare const error: unknown;
 * if (isLedgerOutcomeUnknownError(error)) console.error(error.code, error.pool, error.agentIds);
 * ```
 */
export const isLedgerOutcomeUnknownError = hasCode<LedgerOutcomeUnknownError>([
  ErrorCode.LEDGER_OUTCOME_UNKNOWN,
]);
