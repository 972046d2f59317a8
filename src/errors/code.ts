// The leaf of src/errors/: the codes, `ScalerError`, and the `hasCode` helper the other
// files of src/errors/ build their internal `is*` guards with. It imports nothing, so
// every error file can import it without a cycle; `isScalerError`, which narrows to the
// classes of every file, lives in ./base.ts above them.

/**
 * Every error code the library uses, as a constant object: compare `error.code` with
 * it, or pass one to {@link isScalerError}.
 *
 * @example
 * ```ts
 * import { ErrorCode, isScalerError } from 'scaler-primitives/errors';
 * declare const error: unknown;
 * declare function retryLater(): void;
 * if (isScalerError(error, ErrorCode.LEDGER_BUSY)) retryLater();
 * ```
 */
export const ErrorCode = {
  /** A CPU or memory quantity could not be parsed. */
  RESOURCE_PARSE: 'ERR_RESOURCE_PARSE',
  /** Resolved resources request more than their limit. */
  RESOURCE_CONFLICT: 'ERR_RESOURCE_CONFLICT',
  /** A reservation id that is already held was reserved again. */
  DUPLICATE_RESERVATION: 'ERR_DUPLICATE_RESERVATION',
  /** A configuration document failed validation. */
  CONFIG_INVALID: 'ERR_CONFIG_INVALID',
  /** A ledger file or value is unreadable, of the wrong shape or of an unknown version. */
  LEDGER_CORRUPT: 'ERR_LEDGER_CORRUPT',
  /** A pool's stored cap differs from the cap it was registered with. */
  LEDGER_CAP_MISMATCH: 'ERR_LEDGER_CAP_MISMATCH',
  /** The ledger lock (or compare-and-set) could not be won before the deadline. */
  LEDGER_BUSY: 'ERR_LEDGER_BUSY',
  /** The ledger lock was lost while the operation held it; nothing was written. */
  LEDGER_LOCK_COMPROMISED: 'ERR_LEDGER_LOCK_COMPROMISED',
  /** The ledger directory is unsafe (world-writable, owned by another user) or unusable. */
  LEDGER_DIR_UNSAFE: 'ERR_LEDGER_DIR_UNSAFE',
  /**
   * A file in the ledger directory was refused before it was read or written: a
   * symbolic link, not a regular file, owned by another user, writable by others, or too large.
   */
  LEDGER_FILE_UNSAFE: 'ERR_LEDGER_FILE_UNSAFE',
  /** This instance's lease expired; it must not act on its old rows. */
  LEDGER_LEASE_EXPIRED: 'ERR_LEDGER_LEASE_EXPIRED',
  /** The ledger's backing store (e.g. a NATS server) cannot be reached. */
  LEDGER_UNAVAILABLE: 'ERR_LEDGER_UNAVAILABLE',
  /**
   * A file-system call of the ledger failed (`ENOSPC`, `EDQUOT`, inode exhaustion, `EROFS`,
   * `EIO`...): the error names the pool, the path, the errno and whether the pool file may
   * have been changed.
   */
  LEDGER_IO: 'ERR_LEDGER_IO',
  /**
   * A call's outcome is unknown: a combining holder may have written it, and neither its
   * answer nor the pool file could settle it. The ledger settles it itself later.
   */
  LEDGER_OUTCOME_UNKNOWN: 'ERR_LEDGER_OUTCOME_UNKNOWN',
  /**
   * Another live process holds the lease of this ledger's `instanceId`: two processes
   * must never write rows under one instance id.
   */
  LEDGER_INSTANCE_IN_USE: 'ERR_LEDGER_INSTANCE_IN_USE',
  /** An input (interface name, address, port, uid, pool or agent name) is invalid. */
  INVALID_INPUT: 'ERR_INVALID_INPUT',
  /** The `nft` binary is not installed. */
  NFT_NOT_INSTALLED: 'ERR_NFT_NOT_INSTALLED',
  /** `nft` ran without the privileges it needs (CAP_NET_ADMIN). */
  NFT_PERMISSION: 'ERR_NFT_PERMISSION',
  /** `nft` exited with an error. */
  NFT_COMMAND: 'ERR_NFT_COMMAND',
  /** A per-agent caps value is not valid systemd syntax. */
  CAPS_VALUE: 'ERR_CAPS_VALUE',
  /** A KV write lost a compare-and-set race (JetStream codes 10071 and 10164). */
  REVISION_CONFLICT: 'ERR_REVISION_CONFLICT',
  /** A NATS request timed out (often a refused permission or a stream without direct get). */
  NATS_TIMEOUT: 'ERR_NATS_TIMEOUT',
  /** A NATS request failed for another reason. */
  NATS_REQUEST: 'ERR_NATS_REQUEST',
  /** The nats-server is older than the version a NATS ledger is safe on (`serverVersionPolicy: 'refuse'`). */
  NATS_SERVER_VERSION: 'ERR_NATS_SERVER_VERSION',
  /** A backend failed to spawn or destroy an agent. */
  BACKEND: 'ERR_BACKEND',
  /** A manager state store refused a file or value, lost a write race, or failed to write. */
  STATE_STORE: 'ERR_STATE_STORE',
} as const;

/** The union of every value of {@link ErrorCode}. */
export type ErrorCodeName = (typeof ErrorCode)[keyof typeof ErrorCode];

// A registered symbol survives two copies of the library in one process.
const brand = Symbol.for('scaler-primitives.ScalerError');

/**
 * Base class of every error the library raises for bad data or failed operations.
 *
 * @example
 * ```ts
 * import { isScalerError } from 'scaler-primitives/errors';
 * import { parseMemory } from 'scaler-primitives/resources';
 * try {
 *   parseMemory('8GB');
 * } catch (error) {
 *   if (isScalerError(error)) console.error(error.code, error.message);
 * }
 * ```
 */
export class ScalerError extends Error {
  /** A stable, machine-readable code: one of {@link ErrorCode}. */
  readonly code: ErrorCodeName;

  /**
   * @param code - One of {@link ErrorCode}.
   * @param message - A sentence naming the thing involved and what to do.
   * @param options - `cause`, passed through to `Error`.
   */
  constructor(code: ErrorCodeName, message: string, options?: { cause?: unknown }) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.code = code;
    this.name = 'ScalerError';
    Object.defineProperty(this, brand, { value: true });
  }
}

// True for a ScalerError of any copy of the library (its brand), with one of `codes` when given.
export function matchesCode(error: unknown, codes?: string | readonly string[]): boolean {
  if (
    typeof error !== 'object' ||
    error === null ||
    (error as Record<symbol, unknown>)[brand] !== true
  ) {
    return false;
  }
  const actual = (error as { code?: unknown }).code;
  if (typeof actual !== 'string') return false;
  if (codes === undefined) return true;
  return typeof codes === 'string' ? actual === codes : codes.includes(actual);
}

// Builds an internal `is*` guard: true for a ScalerError (any copy) with one of `codes`.
export function hasCode<T extends ScalerError>(codes: readonly ErrorCodeName[]) {
  return (error: unknown): error is T => matchesCode(error, codes);
}
