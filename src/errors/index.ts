/**
 * Errors raised by scaler-primitives (`scaler-primitives/errors`; the root exports them too).
 *
 * Every error the library raises for bad data or a failed operation is a
 * {@link ScalerError}: it carries a readonly string `code` (one of {@link ErrorCode}),
 * the `cause` it was built from (when there is one), and a message that names the
 * thing involved and what to do. Programmer misuse (a wrong argument type, a negative
 * count) raises a plain `TypeError` instead.
 *
 * Test errors with {@link isScalerError} (`isScalerError(error, ErrorCode.LEDGER_BUSY)`)
 * rather than `instanceof`: it also recognises errors thrown by another copy of the
 * library (the ESM and the CJS build loaded side by side, or two versions in one tree).
 *
 * @packageDocumentation
 */

// The public error surface (`scaler-primitives/errors`, and the root). The classes are
// defined one file per module beside this one; the internal `is*` guards there are
// imported by file path.

export { CapsValueError, RevisionConflictError } from './agent-caps.js';
export { ErrorCode, type ErrorCodeName, isScalerError, ScalerError } from './base.js';
export { ConfigError, type ConfigIssue, InvalidInputError } from './input.js';
export {
  LedgerBusyError,
  LedgerCapMismatchError,
  LedgerCorruptError,
  LedgerError,
  LedgerInstanceInUseError,
  LedgerLeaseExpiredError,
  LedgerLockCompromisedError,
  LedgerOutcomeUnknownError,
  LedgerUnavailableError,
} from './ledger.js';
export { LedgerDirError, LedgerFileError, LedgerIoError } from './ledger-fs.js';
export { BackendError } from './manager.js';
export { NatsRequestError, NatsServerVersionError } from './nats.js';
export { NftError } from './nftables.js';
export {
  DuplicateReservationError,
  ResourceConflictError,
  ResourceParseError,
} from './resources.js';
export { StateStoreError } from './state-store.js';
