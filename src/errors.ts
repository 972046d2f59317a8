/**
 * Errors raised by scaler-primitives.
 *
 * Every error the library raises for bad data or a failed operation is a
 * {@link ScalerError}: it carries a readonly string `code`, the `cause` it was
 * built from (when there is one), and a message that names the thing involved
 * and what to do. Programmer misuse (a wrong argument type, a negative count)
 * raises a plain `TypeError` instead.
 *
 * Test errors with the `is*` predicates rather than `instanceof`: the
 * predicates also recognise errors thrown by another copy of the library
 * (the ESM and the CJS build loaded side by side, or two versions in one tree).
 *
 * @packageDocumentation
 */

// The door of the error rooms under ./errors/: every public name, defined once there.

export {
  CapsValueError,
  isCapsValueError,
  isRevisionConflictError,
  RevisionConflictError,
} from './errors/agent-caps.js';
export type { ErrorCodeName, ScalerErrorOptions } from './errors/base.js';
export { ErrorCode, isScalerError, ScalerError } from './errors/base.js';
export type { ConfigIssue } from './errors/input.js';
export {
  ConfigError,
  InvalidInputError,
  isConfigError,
  isInvalidInputError,
} from './errors/input.js';
export {
  isLedgerBusyError,
  isLedgerCapMismatchError,
  isLedgerCorruptError,
  isLedgerError,
  isLedgerLeaseExpiredError,
  isLedgerLockCompromisedError,
  isLedgerOutcomeUnknownError,
  isLedgerUnavailableError,
  LedgerBusyError,
  LedgerCapMismatchError,
  LedgerCorruptError,
  LedgerError,
  LedgerLeaseExpiredError,
  LedgerLockCompromisedError,
  LedgerOutcomeUnknownError,
  LedgerUnavailableError,
} from './errors/ledger.js';
export type { LedgerFileProblemName } from './errors/ledger-fs.js';
export {
  isLedgerDirError,
  isLedgerFileError,
  isLedgerIoError,
  LedgerDirError,
  LedgerFileError,
  LedgerFileProblem,
  LedgerIoError,
} from './errors/ledger-fs.js';
export { BackendError, isBackendError } from './errors/manager.js';
export {
  isNatsRequestError,
  isNatsServerVersionError,
  NatsRequestError,
  NatsServerVersionError,
} from './errors/nats.js';
export {
  isNftCommandError,
  isNftError,
  isNftNotInstalledError,
  isNftPermissionError,
  NftCommandError,
  NftError,
  NftNotInstalledError,
  NftPermissionError,
} from './errors/nftables.js';
export type { ResourceKind } from './errors/resources.js';
export {
  DuplicateReservationError,
  isDuplicateReservationError,
  isResourceConflictError,
  isResourceParseError,
  ResourceConflictError,
  ResourceParseError,
} from './errors/resources.js';
export type { StateStoreProblemName } from './errors/state-store.js';
export { isStateStoreError, StateStoreError, StateStoreProblem } from './errors/state-store.js';
