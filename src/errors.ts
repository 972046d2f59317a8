/**
 * Errors raised by scaler-primitives.
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

// The public error surface. The classes are defined in ./errors/, one file per module;
// the internal `is*` guards there are imported by file path.

export { CapsValueError, RevisionConflictError } from './errors/agent-caps.js';
export { ErrorCode, isScalerError, ScalerError } from './errors/base.js';
export { ConfigError, InvalidInputError } from './errors/input.js';
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
} from './errors/ledger.js';
export { LedgerDirError, LedgerFileError, LedgerIoError } from './errors/ledger-fs.js';
export { BackendError } from './errors/manager.js';
export { NatsRequestError, NatsServerVersionError } from './errors/nats.js';
export { NftError } from './errors/nftables.js';
export {
  DuplicateReservationError,
  ResourceConflictError,
  ResourceParseError,
} from './errors/resources.js';
export { StateStoreError } from './errors/state-store.js';
