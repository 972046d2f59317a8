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

/**
 * Every error code the library uses, as a constant object (see {@link ErrorCodeName}
 * for the union of its values).
 *
 * @example
 * ```ts
 * if (isScalerError(error) && error.code === ErrorCode.LEDGER_BUSY) retryLater();
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
  /** A backend failed to spawn or destroy an agent. */
  BACKEND: 'ERR_BACKEND',
  /** A manager state store refused a file or value, lost a write race, or failed to write. */
  STATE_STORE: 'ERR_STATE_STORE',
} as const;

/**
 * The union of every value of {@link ErrorCode}.
 *
 * @example
 * ```ts
 * const code: ErrorCodeName = 'ERR_LEDGER_BUSY';
 * ```
 */
export type ErrorCodeName = (typeof ErrorCode)[keyof typeof ErrorCode];

// A registered symbol survives two copies of the library in one process.
const brand = Symbol.for('scaler-primitives.ScalerError');

/**
 * Options accepted by every {@link ScalerError} constructor.
 *
 * @example
 * ```ts
 * const options: ScalerErrorOptions = { cause: error };
 * throw new BackendError('linux', 'spawn failed: quota exceeded', options);
 * ```
 */
export interface ScalerErrorOptions {
  /** The error this one was built from. */
  cause?: unknown;
}

/**
 * Base class of every error the library raises for bad data or failed operations.
 *
 * @example
 * ```ts
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
  constructor(code: ErrorCodeName, message: string, options?: ScalerErrorOptions) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.code = code;
    this.name = 'ScalerError';
    Object.defineProperty(this, brand, { value: true });
  }
}

/**
 * Which resource dimension a quantity or a refusal is about (`extended`: a named countable resource such as `nvidia.com/gpu`).
 *
 * @example
 * ```ts
 * if (isResourceParseError(error)) {
 *   const kind: ResourceKind = error.kind; // 'cpu' | 'memory' | 'extended'
 * }
 * ```
 */
export type ResourceKind = 'cpu' | 'memory' | 'extended';

/**
 * A CPU or memory quantity that could not be parsed; names the value and the accepted forms.
 *
 * @example
 * ```ts
 * try { parseCpu(input); }
 * catch (error) { if (isResourceParseError(error)) console.error(error.message); else throw error; }
 * ```
 */
export class ResourceParseError extends ScalerError {
  /** The value that was refused, as given. */
  readonly value: unknown;
  /** Whether a CPU or a memory quantity was expected. */
  readonly kind: ResourceKind;
  /**
   * @param kind - `cpu` or `memory`.
   * @param value - The refused value.
   * @param message - The full sentence.
   */
  constructor(kind: ResourceKind, value: unknown, message: string) {
    super(ErrorCode.RESOURCE_PARSE, message);
    this.name = 'ResourceParseError';
    this.kind = kind;
    this.value = value;
  }
}

/**
 * Resolved resources whose request exceeds their limit in one dimension.
 *
 * @example
 * ```ts
 * try { resolveResources(layers); }
 * catch (error) { if (isResourceConflictError(error)) console.error(error.message); else throw error; }
 * ```
 */
export class ResourceConflictError extends ScalerError {
  /** The dimension in conflict. */
  readonly dimension: 'cpus' | 'memBytes';
  /** The resolved request (cores or bytes). */
  readonly request: number;
  /** The resolved limit (cores or bytes). */
  readonly limit: number;
  /** The name of the layer the request came from. */
  readonly requestLayer: string;
  /** The name of the layer the limit came from. */
  readonly limitLayer: string;
  /**
   * @param details - The values in conflict and where each came from.
   * @param message - The full sentence.
   */
  constructor(
    details: {
      dimension: 'cpus' | 'memBytes';
      request: number;
      limit: number;
      requestLayer: string;
      limitLayer: string;
    },
    message: string,
  ) {
    super(ErrorCode.RESOURCE_CONFLICT, message);
    this.name = 'ResourceConflictError';
    this.dimension = details.dimension;
    this.request = details.request;
    this.limit = details.limit;
    this.requestLayer = details.requestLayer;
    this.limitLayer = details.limitLayer;
  }
}

/**
 * A reservation id that is already held was reserved again (it would count twice).
 *
 * @example
 * ```ts
 * try { caps.tryReserve('agent-1', ['global'], amount); }
 * catch (error) { if (isDuplicateReservationError(error)) console.error(error.message); else throw error; }
 * ```
 */
export class DuplicateReservationError extends ScalerError {
  /** The reservation id. */
  readonly id: string;
  /**
   * @param id - The reservation id already held.
   * @param message - The full sentence.
   */
  constructor(id: string, message: string) {
    super(ErrorCode.DUPLICATE_RESERVATION, message);
    this.name = 'DuplicateReservationError';
    this.id = id;
  }
}

/**
 * One problem found in a configuration document.
 *
 * @example
 * ```ts
 * if (isConfigError(error)) {
 *   for (const issue of error.issues) console.error(issue.path.join('.'), issue.message);
 * }
 * ```
 */
export interface ConfigIssue {
  /** Path to the offending value, e.g. `['scalers', 0, 'maxAgents']`. */
  path: ReadonlyArray<string | number>;
  /** What is wrong with it. */
  message: string;
}

/**
 * A configuration document failed validation; `issues` lists every problem with its path.
 *
 * @example
 * ```ts
 * try { parseScalerConfig(JSON.parse(text)); }
 * catch (error) { if (isConfigError(error)) console.error(error.message); else throw error; }
 * ```
 */
export class ConfigError extends ScalerError {
  /** Every problem found, each with the path to the offending value. */
  readonly issues: readonly ConfigIssue[];
  /**
   * @param issues - The problems, each with its path.
   * @param message - The full sentence.
   * @param options - `cause`, e.g. the underlying `ZodError`.
   */
  constructor(issues: readonly ConfigIssue[], message: string, options?: ScalerErrorOptions) {
    super(ErrorCode.CONFIG_INVALID, message, options);
    this.name = 'ConfigError';
    this.issues = issues;
  }
}

/**
 * An input value (name, address, port, uid, ...) was refused before it reached any system.
 *
 * @example
 * ```ts
 * try { parseCidr(input); }
 * catch (error) { if (isInvalidInputError(error)) console.error(error.message); else throw error; }
 * ```
 */
export class InvalidInputError extends ScalerError {
  /** What the value was meant to be, e.g. `interface name`. */
  readonly what: string;
  /** The refused value. */
  readonly value: unknown;
  /**
   * @param what - What the value was meant to be.
   * @param value - The refused value.
   * @param message - The full sentence.
   */
  constructor(what: string, value: unknown, message: string) {
    super(ErrorCode.INVALID_INPUT, message);
    this.name = 'InvalidInputError';
    this.what = what;
    this.value = value;
  }
}

/**
 * Base class of the ledger's errors; `pool` names the pool involved.
 *
 * @example
 * ```ts
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
 *
 * @example
 * ```ts
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
 * The ledger directory cannot be used safely.
 *
 * @example
 * ```ts
 * try { await ledger.reserve('build-host', 'agent-1', 2, 4 * 2 ** 30); }
 * catch (error) { if (isLedgerDirError(error)) console.error(error.message); else throw error; }
 * ```
 */
export class LedgerDirError extends LedgerError {
  /** The directory. */
  readonly dir: string;
  /**
   * @param dir - The directory.
   * @param message - The full sentence.
   * @param options - `cause`.
   */
  constructor(dir: string, message: string, options?: ScalerErrorOptions) {
    super(ErrorCode.LEDGER_DIR_UNSAFE, '', message, options);
    this.name = 'LedgerDirError';
    this.dir = dir;
  }
}

/**
 * Why a ledger file was refused (see {@link LedgerFileError}): a constant object,
 * {@link LedgerFileProblemName} is the union of its values.
 *
 * @example
 * ```ts
 * if (isLedgerFileError(error) && error.problem === LedgerFileProblem.SYMLINK) alertOperator(error.path);
 * ```
 */
export const LedgerFileProblem = {
  /** The path is a symbolic link (it is never followed). */
  SYMLINK: 'symlink',
  /** The path is a FIFO, a device, a directory or a socket. */
  NOT_REGULAR: 'not-regular',
  /** The file is owned by a user other than this process's (or root). */
  OWNER: 'owner',
  /** The file is writable by its group or by others. */
  MODE: 'mode',
  /** The file is larger than the ledger's `maxFileBytes`. */
  TOO_LARGE: 'too-large',
} as const;

/**
 * The union of every value of {@link LedgerFileProblem}.
 *
 * @example
 * ```ts
 * const problem: LedgerFileProblemName = 'symlink';
 * ```
 */
export type LedgerFileProblemName = (typeof LedgerFileProblem)[keyof typeof LedgerFileProblem];

/**
 * A file in the ledger directory (pool file, lease file, temp file) was refused
 * before it was read or written. The message names the path and what it is,
 * never the file's contents. Nothing was written.
 *
 * @example
 * ```ts
 * try { await ledger.reserve('build-host', 'agent-1', 2, 4 * 2 ** 30); }
 * catch (error) { if (isLedgerFileError(error)) console.error(error.path, error.problem); else throw error; }
 * ```
 */
export class LedgerFileError extends LedgerError {
  /** The refused path. */
  readonly path: string;
  /** Why it was refused. */
  readonly problem: LedgerFileProblemName;
  /**
   * @param pool - The pool involved (`''` when none).
   * @param path - The refused path.
   * @param problem - Why it was refused.
   * @param message - The full sentence.
   * @param options - `cause`.
   */
  constructor(
    pool: string,
    path: string,
    problem: LedgerFileProblemName,
    message: string,
    options?: ScalerErrorOptions,
  ) {
    super(ErrorCode.LEDGER_FILE_UNSAFE, pool, message, options);
    this.name = 'LedgerFileError';
    this.path = path;
    this.problem = problem;
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
 * Base class of the errors raised while running `nft`.
 *
 * @example
 * ```ts
 * try { await addIsolationRules(agent, policy); }
 * catch (error) { if (isNftError(error)) console.error(error.message); else throw error; }
 * ```
 */
export class NftError extends ScalerError {
  /** The command line that was run, when one was. */
  readonly command: string | undefined;
  /** What `nft` printed on standard error, when it ran. */
  readonly stderr: string | undefined;
  /**
   * @param code - One of the `NFT_*` codes.
   * @param message - The full sentence.
   * @param details - The command and its stderr.
   * @param options - `cause`.
   */
  constructor(
    code: ErrorCodeName,
    message: string,
    details: { command?: string; stderr?: string } = {},
    options?: ScalerErrorOptions,
  ) {
    super(code, message, options);
    this.name = 'NftError';
    this.command = details.command;
    this.stderr = details.stderr;
  }
}

/**
 * The `nft` binary is not installed (or not on `PATH`).
 *
 * @example
 * ```ts
 * try { await addIsolationRules(agent, policy); }
 * catch (error) { if (isNftNotInstalledError(error)) console.error(error.message); else throw error; }
 * ```
 */
export class NftNotInstalledError extends NftError {
  /**
   * @param message - The full sentence.
   * @param details - The command.
   * @param options - `cause`.
   */
  constructor(message: string, details?: { command?: string }, options?: ScalerErrorOptions) {
    super(ErrorCode.NFT_NOT_INSTALLED, message, details, options);
    this.name = 'NftNotInstalledError';
  }
}

/**
 * `nft` lacked CAP_NET_ADMIN (run as root, grant the capability, or use `requireSudo`).
 *
 * @example
 * ```ts
 * try { await addIsolationRules(agent, policy); }
 * catch (error) { if (isNftPermissionError(error)) console.error(error.message); else throw error; }
 * ```
 */
export class NftPermissionError extends NftError {
  /**
   * @param message - The full sentence.
   * @param details - The command and its stderr.
   * @param options - `cause`.
   */
  constructor(
    message: string,
    details?: { command?: string; stderr?: string },
    options?: ScalerErrorOptions,
  ) {
    super(ErrorCode.NFT_PERMISSION, message, details, options);
    this.name = 'NftPermissionError';
  }
}

/**
 * `nft` ran and exited with an error.
 *
 * @example
 * ```ts
 * try { await addIsolationRules(agent, policy); }
 * catch (error) { if (isNftCommandError(error)) console.error(error.message); else throw error; }
 * ```
 */
export class NftCommandError extends NftError {
  /**
   * @param message - The full sentence.
   * @param details - The command and its stderr.
   * @param options - `cause`.
   */
  constructor(
    message: string,
    details?: { command?: string; stderr?: string },
    options?: ScalerErrorOptions,
  ) {
    super(ErrorCode.NFT_COMMAND, message, details, options);
    this.name = 'NftCommandError';
  }
}

/**
 * A per-agent caps value is not valid systemd syntax; it was not written or applied.
 *
 * @example
 * ```ts
 * try { decodeAgentCaps(value); }
 * catch (error) { if (isCapsValueError(error)) console.error(error.message); else throw error; }
 * ```
 */
export class CapsValueError extends ScalerError {
  /** The field, `cpuQuota` or `memoryMax` (or `value` for the document). */
  readonly field: string;
  /** The refused value. */
  readonly value: unknown;
  /**
   * @param field - The field.
   * @param value - The refused value.
   * @param message - The full sentence.
   * @param options - `cause`.
   */
  constructor(field: string, value: unknown, message: string, options?: ScalerErrorOptions) {
    super(ErrorCode.CAPS_VALUE, message, options);
    this.name = 'CapsValueError';
    this.field = field;
    this.value = value;
  }
}

/**
 * A KV write lost a compare-and-set race (JetStream codes 10071 and 10164).
 *
 * @example
 * ```ts
 * try { await writeAgentCaps(kv, 'iris', caps); }
 * catch (error) { if (isRevisionConflictError(error)) console.error(error.message); else throw error; }
 * ```
 */
export class RevisionConflictError extends ScalerError {
  /** The KV key involved. */
  readonly key: string;
  /**
   * @param key - The KV key.
   * @param message - The full sentence.
   * @param options - `cause`.
   */
  constructor(key: string, message: string, options?: ScalerErrorOptions) {
    super(ErrorCode.REVISION_CONFLICT, message, options);
    this.name = 'RevisionConflictError';
    this.key = key;
  }
}

/**
 * A NATS request failed or timed out.
 *
 * @example
 * ```ts
 * try { await readAgentCaps(nc, 'iris'); }
 * catch (error) { if (isNatsRequestError(error)) console.error(error.message); else throw error; }
 * ```
 */
export class NatsRequestError extends ScalerError {
  /** The subject requested. */
  readonly subject: string;
  /**
   * @param code - `NATS_TIMEOUT` or `NATS_REQUEST`.
   * @param subject - The subject.
   * @param message - The full sentence.
   * @param options - `cause`.
   */
  constructor(
    code: typeof ErrorCode.NATS_TIMEOUT | typeof ErrorCode.NATS_REQUEST,
    subject: string,
    message: string,
    options?: ScalerErrorOptions,
  ) {
    super(code, message, options);
    this.name = 'NatsRequestError';
    this.subject = subject;
  }
}

/**
 * A host backend failed to spawn or destroy an agent.
 *
 * @example
 * ```ts
 * try { await manager.shutdownAll(); }
 * catch (error) { if (isBackendError(error)) console.error(error.message); else throw error; }
 * ```
 */
export class BackendError extends ScalerError {
  /** The backend (scaler) name. */
  readonly backend: string;
  /**
   * @param backend - The backend name.
   * @param message - The full sentence.
   * @param options - `cause`: what the backend threw.
   */
  constructor(backend: string, message: string, options?: ScalerErrorOptions) {
    super(ErrorCode.BACKEND, message, options);
    this.name = 'BackendError';
    this.backend = backend;
  }
}

/** What a {@link StateStoreError} is about. */
export const StateStoreProblem = {
  /** The stored state is unreadable, of the wrong shape or of an unknown version (left as it is). */
  CORRUPT: 'corrupt',
  /** A file was refused before it was read: a link, not a regular file, foreign owner, writable by others. */
  UNSAFE_FILE: 'unsafe-file',
  /** The state is (or would be) larger than the store's size limit. */
  TOO_LARGE: 'too-large',
  /** Another writer changed the stored state since this store last read or wrote it. */
  CONFLICT: 'conflict',
  /** The backing store could not be read or written. */
  UNAVAILABLE: 'unavailable',
} as const;

/** The union of the values of {@link StateStoreProblem}. */
export type StateStoreProblemName = (typeof StateStoreProblem)[keyof typeof StateStoreProblem];

/** A manager state store (file or NATS) refused its stored state or failed to write. */
export class StateStoreError extends ScalerError {
  /** Where: a file path or a KV bucket and key. */
  readonly location: string;
  /** What went wrong: one of {@link StateStoreProblem}. */
  readonly problem: StateStoreProblemName;
  /**
   * @param location - A file path, or a bucket and key.
   * @param problem - One of {@link StateStoreProblem}.
   * @param message - The full sentence.
   * @param options - `cause`.
   */
  constructor(
    location: string,
    problem: StateStoreProblemName,
    message: string,
    options?: ScalerErrorOptions,
  ) {
    super(ErrorCode.STATE_STORE, message, options);
    this.name = 'StateStoreError';
    this.location = location;
    this.problem = problem;
  }
}

/**
 * True for any error raised by scaler-primitives (any copy of it).
 *
 * @param error - Anything caught.
 *
 * @example
 * ```ts
 * if (isScalerError(error)) console.error(error.code, error.message);
 * ```
 */
export function isScalerError(error: unknown): error is ScalerError {
  return (
    typeof error === 'object' &&
    error !== null &&
    (error as Record<symbol, unknown>)[brand] === true &&
    typeof (error as { code?: unknown }).code === 'string'
  );
}

function hasCode<T extends ScalerError>(codes: readonly ErrorCodeName[]) {
  return (error: unknown): error is T => isScalerError(error) && codes.includes(error.code);
}

/**
 * True for a {@link ResourceParseError}.
 *
 * @example
 * ```ts
 * if (isResourceParseError(error)) console.error(error.code, error.value, error.kind);
 * ```
 */
export const isResourceParseError = hasCode<ResourceParseError>([ErrorCode.RESOURCE_PARSE]);
/**
 * True for a {@link ResourceConflictError}.
 *
 * @example
 * ```ts
 * if (isResourceConflictError(error)) console.error(error.code, error.dimension, error.request);
 * ```
 */
export const isResourceConflictError = hasCode<ResourceConflictError>([
  ErrorCode.RESOURCE_CONFLICT,
]);
/**
 * True for a {@link DuplicateReservationError}.
 *
 * @example
 * ```ts
 * if (isDuplicateReservationError(error)) console.error(error.code, error.id);
 * ```
 */
export const isDuplicateReservationError = hasCode<DuplicateReservationError>([
  ErrorCode.DUPLICATE_RESERVATION,
]);
/**
 * True for a {@link ConfigError}.
 *
 * @example
 * ```ts
 * if (isConfigError(error)) console.error(error.code, error.issues);
 * ```
 */
export const isConfigError = hasCode<ConfigError>([ErrorCode.CONFIG_INVALID]);
/**
 * True for an {@link InvalidInputError}.
 *
 * @example
 * ```ts
 * if (isInvalidInputError(error)) console.error(error.code, error.what, error.value);
 * ```
 */
export const isInvalidInputError = hasCode<InvalidInputError>([ErrorCode.INVALID_INPUT]);
/**
 * True for any {@link LedgerError}.
 *
 * @example
 * ```ts
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
]);
/**
 * True for a {@link LedgerCorruptError}.
 *
 * @example
 * ```ts
 * if (isLedgerCorruptError(error)) console.error(error.code, error.location);
 * ```
 */
export const isLedgerCorruptError = hasCode<LedgerCorruptError>([ErrorCode.LEDGER_CORRUPT]);
/**
 * True for a {@link LedgerCapMismatchError}.
 *
 * @example
 * ```ts
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
 * if (isLedgerBusyError(error)) console.error(error.code, error.lockAgeMs);
 * ```
 */
export const isLedgerBusyError = hasCode<LedgerBusyError>([ErrorCode.LEDGER_BUSY]);
/**
 * True for a {@link LedgerLockCompromisedError}.
 *
 * @example
 * ```ts
 * if (isLedgerLockCompromisedError(error)) console.error(error.code);
 * ```
 */
export const isLedgerLockCompromisedError = hasCode<LedgerLockCompromisedError>([
  ErrorCode.LEDGER_LOCK_COMPROMISED,
]);
/**
 * True for a {@link LedgerDirError}.
 *
 * @example
 * ```ts
 * if (isLedgerDirError(error)) console.error(error.code, error.dir);
 * ```
 */
export const isLedgerDirError = hasCode<LedgerDirError>([ErrorCode.LEDGER_DIR_UNSAFE]);
/**
 * True for a {@link LedgerFileError}.
 *
 * @example
 * ```ts
 * if (isLedgerFileError(error)) console.error(error.code, error.path, error.problem);
 * ```
 */
export const isLedgerFileError = hasCode<LedgerFileError>([ErrorCode.LEDGER_FILE_UNSAFE]);
/**
 * True for a {@link LedgerLeaseExpiredError}.
 *
 * @example
 * ```ts
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
 * if (isLedgerUnavailableError(error)) console.error(error.code);
 * ```
 */
export const isLedgerUnavailableError = hasCode<LedgerUnavailableError>([
  ErrorCode.LEDGER_UNAVAILABLE,
]);
/**
 * True for any {@link NftError}.
 *
 * @example
 * ```ts
 * if (isNftError(error)) console.error(error.code, error.command, error.stderr);
 * ```
 */
export const isNftError = hasCode<NftError>([
  ErrorCode.NFT_NOT_INSTALLED,
  ErrorCode.NFT_PERMISSION,
  ErrorCode.NFT_COMMAND,
]);
/**
 * True for an {@link NftNotInstalledError}.
 *
 * @example
 * ```ts
 * if (isNftNotInstalledError(error)) console.error(error.code);
 * ```
 */
export const isNftNotInstalledError = hasCode<NftNotInstalledError>([ErrorCode.NFT_NOT_INSTALLED]);
/**
 * True for an {@link NftPermissionError}.
 *
 * @example
 * ```ts
 * if (isNftPermissionError(error)) console.error(error.code);
 * ```
 */
export const isNftPermissionError = hasCode<NftPermissionError>([ErrorCode.NFT_PERMISSION]);
/**
 * True for an {@link NftCommandError}.
 *
 * @example
 * ```ts
 * if (isNftCommandError(error)) console.error(error.code);
 * ```
 */
export const isNftCommandError = hasCode<NftCommandError>([ErrorCode.NFT_COMMAND]);
/**
 * True for a {@link CapsValueError}.
 *
 * @example
 * ```ts
 * if (isCapsValueError(error)) console.error(error.code, error.field, error.value);
 * ```
 */
export const isCapsValueError = hasCode<CapsValueError>([ErrorCode.CAPS_VALUE]);
/**
 * True for a {@link RevisionConflictError}.
 *
 * @example
 * ```ts
 * if (isRevisionConflictError(error)) console.error(error.code, error.key);
 * ```
 */
export const isRevisionConflictError = hasCode<RevisionConflictError>([
  ErrorCode.REVISION_CONFLICT,
]);
/**
 * True for a {@link NatsRequestError} (timeout or other failure).
 *
 * @example
 * ```ts
 * if (isNatsRequestError(error)) console.error(error.code, error.subject);
 * ```
 */
export const isNatsRequestError = hasCode<NatsRequestError>([
  ErrorCode.NATS_TIMEOUT,
  ErrorCode.NATS_REQUEST,
]);
/**
 * True for a {@link BackendError}.
 *
 * @example
 * ```ts
 * if (isBackendError(error)) console.error(error.code, error.backend);
 * ```
 */
export const isBackendError = hasCode<BackendError>([ErrorCode.BACKEND]);
/** True for a {@link StateStoreError}. */
export const isStateStoreError = hasCode<StateStoreError>([ErrorCode.STATE_STORE]);
