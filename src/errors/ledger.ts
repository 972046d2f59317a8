// The ledger's errors (src/ledger, src/ledger/nats): the `LedgerError` base and its
// document, cap, lock, lease and availability failures. File-system refusals: ./ledger-fs.ts.

import { ErrorCode, type ErrorCodeName, hasCode, ScalerError } from './code.js';

/**
 * Base class of the ledger's errors; `pool` names the pool involved.
 *
 * @example
 * ```ts
 * import { ErrorCode, isScalerError } from 'scaler-primitives/errors';
 * import type { MachineLedger } from 'scaler-primitives/ledger';
 * declare const ledger: MachineLedger;
 * try { await ledger.reserve('build-host', 'agent-1', 2, 4 * 2 ** 30); }
 * catch (error) {
 *   if (isScalerError(error, [ErrorCode.LEDGER_BUSY, ErrorCode.LEDGER_UNAVAILABLE])) console.error(error.pool);
 *   else throw error;
 * }
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
  constructor(code: ErrorCodeName, pool: string, message: string, options?: { cause?: unknown }) {
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
 * import { ErrorCode, isScalerError } from 'scaler-primitives/errors';
 * import type { MachineLedger } from 'scaler-primitives/ledger';
 * declare const ledger: MachineLedger;
 * try { await ledger.reserve('build-host', 'agent-1', 2, 4 * 2 ** 30); }
 * catch (error) {
 *   if (isScalerError(error, ErrorCode.LEDGER_CORRUPT)) console.error(error.location);
 *   else throw error;
 * }
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
  constructor(pool: string, location: string, message: string, options?: { cause?: unknown }) {
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
 * import { ErrorCode, isScalerError } from 'scaler-primitives/errors';
 * import type { MachineLedger } from 'scaler-primitives/ledger';
 * declare const ledger: MachineLedger;
 * try { await ledger.reserve('build-host', 'agent-1', 2, 4 * 2 ** 30); }
 * catch (error) {
 *   if (isScalerError(error, ErrorCode.LEDGER_CAP_MISMATCH)) console.error(error.stored, error.registered);
 *   else throw error;
 * }
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
 * import { ErrorCode, isScalerError } from 'scaler-primitives/errors';
 * import type { MachineLedger } from 'scaler-primitives/ledger';
 * declare const ledger: MachineLedger;
 * try { await ledger.reserve('build-host', 'agent-1', 2, 4 * 2 ** 30); }
 * catch (error) {
 *   if (isScalerError(error, ErrorCode.LEDGER_BUSY)) console.error(error.lockAgeMs);
 *   else throw error;
 * }
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
    options?: { cause?: unknown },
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
 * import { ErrorCode, isScalerError } from 'scaler-primitives/errors';
 * import type { MachineLedger } from 'scaler-primitives/ledger';
 * declare const ledger: MachineLedger;
 * try { await ledger.reserve('build-host', 'agent-1', 2, 4 * 2 ** 30); }
 * catch (error) {
 *   if (isScalerError(error, ErrorCode.LEDGER_LOCK_COMPROMISED)) console.error(error.pool);
 *   else throw error;
 * }
 * ```
 */
export class LedgerLockCompromisedError extends LedgerError {
  /**
   * @param pool - The pool.
   * @param message - The full sentence.
   * @param options - `cause`.
   */
  constructor(pool: string, message: string, options?: { cause?: unknown }) {
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
 * import { ErrorCode, isScalerError } from 'scaler-primitives/errors';
 * import type { MachineLedger } from 'scaler-primitives/ledger';
 * declare const ledger: MachineLedger;
 * declare function reconcileAgents(): Promise<void>;
 * try { await ledger.reserve('build-host', 'agent-1', 2, 4 * 2 ** 30); }
 * catch (error) {
 *   if (isScalerError(error, ErrorCode.LEDGER_LEASE_EXPIRED)) await reconcileAgents();
 *   else throw error;
 * }
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
 * import { ErrorCode, isScalerError } from 'scaler-primitives/errors';
 * import type { MachineLedger } from 'scaler-primitives/ledger';
 * declare const ledger: MachineLedger;
 * try { await ledger.reserve('build-host', 'agent-1', 2, 4 * 2 ** 30); }
 * catch (error) {
 *   if (isScalerError(error, ErrorCode.LEDGER_UNAVAILABLE)) console.error(error.pool);
 *   else throw error;
 * }
 * ```
 */
export class LedgerUnavailableError extends LedgerError {
  /**
   * @param pool - The pool.
   * @param message - The full sentence.
   * @param options - `cause`.
   */
  constructor(pool: string, message: string, options?: { cause?: unknown }) {
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
 * import { ErrorCode, isScalerError } from 'scaler-primitives/errors';
 * import type { MachineLedger } from 'scaler-primitives/ledger';
 * declare const ledger: MachineLedger;
 * try { await ledger.reserve('build-host', 'agent-1', 2, 4 * 2 ** 30); }
 * catch (error) {
 *   if (isScalerError(error, ErrorCode.LEDGER_OUTCOME_UNKNOWN)) console.error(error.agentIds);
 *   else throw error;
 * }
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
    options?: { cause?: unknown },
  ) {
    super(ErrorCode.LEDGER_OUTCOME_UNKNOWN, pool, message, options);
    this.name = 'LedgerOutcomeUnknownError';
    this.agentIds = agentIds;
  }
}

/**
 * Another live process holds the lease of this ledger's `instanceId` (on this
 * host: its pid is alive, and its start time matches the one its lease file
 * names). Two processes must never write rows under one instance id, so this
 * instance writes nothing. Stop the other process, or give this one another
 * `instanceId`. The call may be retried once the other process is gone.
 * `NatsPoolLedger` raises it from `connect()` for a holder alive on this host,
 * and from every call of a ledger whose lease a newer process with the same
 * `instanceId` took over (that ledger writes nothing more: close it).
 *
 * @example
 * ```ts
 * import { ErrorCode, isScalerError } from 'scaler-primitives/errors';
 * import type { MachineLedger } from 'scaler-primitives/ledger';
 * declare const ledger: MachineLedger;
 * try { await ledger.openLease(); }
 * catch (error) {
 *   if (isScalerError(error, ErrorCode.LEDGER_INSTANCE_IN_USE)) console.error(error.instanceId, error.holderPid);
 *   else throw error;
 * }
 * ```
 */
export class LedgerInstanceInUseError extends LedgerError {
  /** The instance id in use. */
  readonly instanceId: string;
  /** The pid of the process that holds it, when known. */
  readonly holderPid: number | undefined;
  /**
   * @param pool - The pool of the refused call (`''` when none).
   * @param instanceId - The instance id in use.
   * @param holderPid - The pid of the process that holds it, when known.
   * @param message - The full sentence.
   * @param options - `cause`.
   */
  constructor(
    pool: string,
    instanceId: string,
    holderPid: number | undefined,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(ErrorCode.LEDGER_INSTANCE_IN_USE, pool, message, options);
    this.name = 'LedgerInstanceInUseError';
    this.instanceId = instanceId;
    this.holderPid = holderPid;
  }
}

// Internal guards (the package exports `isScalerError(error, code)` instead).
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
  ErrorCode.LEDGER_INSTANCE_IN_USE,
]);

export const isLedgerCorruptError = hasCode<LedgerCorruptError>([ErrorCode.LEDGER_CORRUPT]);

export const isLedgerCapMismatchError = hasCode<LedgerCapMismatchError>([
  ErrorCode.LEDGER_CAP_MISMATCH,
]);

export const isLedgerBusyError = hasCode<LedgerBusyError>([ErrorCode.LEDGER_BUSY]);

export const isLedgerLockCompromisedError = hasCode<LedgerLockCompromisedError>([
  ErrorCode.LEDGER_LOCK_COMPROMISED,
]);

export const isLedgerLeaseExpiredError = hasCode<LedgerLeaseExpiredError>([
  ErrorCode.LEDGER_LEASE_EXPIRED,
]);

export const isLedgerUnavailableError = hasCode<LedgerUnavailableError>([
  ErrorCode.LEDGER_UNAVAILABLE,
]);

export const isLedgerOutcomeUnknownError = hasCode<LedgerOutcomeUnknownError>([
  ErrorCode.LEDGER_OUTCOME_UNKNOWN,
]);
