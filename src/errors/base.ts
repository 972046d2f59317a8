// The base of every error as users meet it: `isScalerError`, which narrows a code to the
// class raised with it (so it imports the type of every error file), beside the codes and
// `ScalerError` of ./code.ts (the leaf every error file imports).

import type { CapsValueError, RevisionConflictError } from './agent-caps.js';
import { type ErrorCodeName, matchesCode, type ScalerError } from './code.js';
import type { ConfigError, InvalidInputError } from './input.js';
import type {
  LedgerBusyError,
  LedgerCapMismatchError,
  LedgerCorruptError,
  LedgerInstanceInUseError,
  LedgerLeaseExpiredError,
  LedgerLockCompromisedError,
  LedgerOutcomeUnknownError,
  LedgerUnavailableError,
} from './ledger.js';
import type { LedgerDirError, LedgerFileError, LedgerIoError } from './ledger-fs.js';
import type { BackendError } from './manager.js';
import type { NatsRequestError, NatsServerVersionError } from './nats.js';
import type { NftError } from './nftables.js';
import type {
  DuplicateReservationError,
  ResourceConflictError,
  ResourceParseError,
} from './resources.js';
import type { StateStoreError } from './state-store.js';

export { ErrorCode, type ErrorCodeName, ScalerError } from './code.js';

/**
 * True for an error raised by scaler-primitives, by any copy of it (the ESM and the CJS
 * build loaded side by side, or two versions in one tree): it checks a brand and the
 * code, never `instanceof`. With a `code` (one of {@link ErrorCode}, or a list of them),
 * true only for an error with that code, narrowed to the class raised with it.
 *
 * @param error - Anything caught.
 *
 * @example
 * ```ts
 * import { ErrorCode, isScalerError } from 'scaler-primitives/errors';
 * declare const error: unknown;
 * if (isScalerError(error, ErrorCode.LEDGER_BUSY)) console.error(error.pool, error.lockAgeMs);
 * else if (isScalerError(error)) console.error(error.code, error.message);
 * ```
 */
export function isScalerError(error: unknown): error is ScalerError;
/**
 * True for an error raised by scaler-primitives (any copy of it) whose code is `code`,
 * or one of `code` when it is a list; narrowed to the class raised with that code.
 *
 * @param error - Anything caught.
 * @param code - The code, or codes, to accept: values of {@link ErrorCode}.
 */
export function isScalerError<C extends ErrorCodeName>(
  error: unknown,
  code: C | readonly C[],
): error is {
  // The error class each code is raised with: a code without one fails to compile here.
  ERR_RESOURCE_PARSE: ResourceParseError;
  ERR_RESOURCE_CONFLICT: ResourceConflictError;
  ERR_DUPLICATE_RESERVATION: DuplicateReservationError;
  ERR_CONFIG_INVALID: ConfigError;
  ERR_LEDGER_CORRUPT: LedgerCorruptError;
  ERR_LEDGER_CAP_MISMATCH: LedgerCapMismatchError;
  ERR_LEDGER_BUSY: LedgerBusyError;
  ERR_LEDGER_LOCK_COMPROMISED: LedgerLockCompromisedError;
  ERR_LEDGER_DIR_UNSAFE: LedgerDirError;
  ERR_LEDGER_FILE_UNSAFE: LedgerFileError;
  ERR_LEDGER_LEASE_EXPIRED: LedgerLeaseExpiredError;
  ERR_LEDGER_UNAVAILABLE: LedgerUnavailableError;
  ERR_LEDGER_IO: LedgerIoError;
  ERR_LEDGER_OUTCOME_UNKNOWN: LedgerOutcomeUnknownError;
  ERR_LEDGER_INSTANCE_IN_USE: LedgerInstanceInUseError;
  ERR_INVALID_INPUT: InvalidInputError;
  ERR_NFT_NOT_INSTALLED: NftError;
  ERR_NFT_PERMISSION: NftError;
  ERR_NFT_COMMAND: NftError;
  ERR_CAPS_VALUE: CapsValueError;
  ERR_REVISION_CONFLICT: RevisionConflictError;
  ERR_NATS_TIMEOUT: NatsRequestError;
  ERR_NATS_REQUEST: NatsRequestError;
  ERR_NATS_SERVER_VERSION: NatsServerVersionError;
  ERR_BACKEND: BackendError;
  ERR_STATE_STORE: StateStoreError;
}[C];
export function isScalerError(
  error: unknown,
  code?: ErrorCodeName | readonly ErrorCodeName[],
): boolean {
  return matchesCode(error, code);
}
