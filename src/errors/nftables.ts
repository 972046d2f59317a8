// Errors raised while running `nft` (src/nftables).

import { ErrorCode, type ErrorCodeName, hasCode, ScalerError } from './code.js';

/**
 * Running `nft` failed. `code` says how: `ERR_NFT_NOT_INSTALLED` (`nft`, `sudo` or `ip`
 * is missing), `ERR_NFT_PERMISSION` (no CAP_NET_ADMIN: run as root, grant the
 * capability, or use `requireSudo`), `ERR_NFT_COMMAND` (`nft` ran and exited with an error).
 *
 * @example
 * ```ts
 * import { ErrorCode, isScalerError } from 'scaler-primitives/errors';
 * import { addIsolationRules, type IsolationPolicy } from 'scaler-primitives/nftables';
 * declare const agent: string;
 * declare const policy: IsolationPolicy;
 * try { await addIsolationRules(agent, policy); }
 * catch (error) {
 *   if (isScalerError(error, ErrorCode.NFT_PERMISSION)) console.error(error.command, error.message);
 *   else throw error;
 * }
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
    options?: { cause?: unknown },
  ) {
    super(code, message, options);
    this.name = 'NftError';
    this.command = details.command;
    this.stderr = details.stderr;
  }
}

// The subclasses below are internal shorthands, one per code (the package exports NftError).

// `nft` (or `sudo`, or `ip` for `netns`) is not installed or not on `PATH`.
export class NftNotInstalledError extends NftError {
  /**
   * @param message - The full sentence.
   * @param details - The command.
   * @param options - `cause`.
   */
  constructor(message: string, details?: { command?: string }, options?: { cause?: unknown }) {
    super(ErrorCode.NFT_NOT_INSTALLED, message, details, options);
    this.name = 'NftNotInstalledError';
  }
}

// `nft` lacked CAP_NET_ADMIN.
export class NftPermissionError extends NftError {
  /**
   * @param message - The full sentence.
   * @param details - The command and its stderr.
   * @param options - `cause`.
   */
  constructor(
    message: string,
    details?: { command?: string; stderr?: string },
    options?: { cause?: unknown },
  ) {
    super(ErrorCode.NFT_PERMISSION, message, details, options);
    this.name = 'NftPermissionError';
  }
}

// `nft` ran and exited with an error.
export class NftCommandError extends NftError {
  /**
   * @param message - The full sentence.
   * @param details - The command and its stderr.
   * @param options - `cause`.
   */
  constructor(
    message: string,
    details?: { command?: string; stderr?: string },
    options?: { cause?: unknown },
  ) {
    super(ErrorCode.NFT_COMMAND, message, details, options);
    this.name = 'NftCommandError';
  }
}

// Internal guards (the package exports `isScalerError(error, code)` instead).
export const isNftError = hasCode<NftError>([
  ErrorCode.NFT_NOT_INSTALLED,
  ErrorCode.NFT_PERMISSION,
  ErrorCode.NFT_COMMAND,
]);

export const isNftNotInstalledError = hasCode<NftNotInstalledError>([ErrorCode.NFT_NOT_INSTALLED]);

export const isNftPermissionError = hasCode<NftPermissionError>([ErrorCode.NFT_PERMISSION]);

export const isNftCommandError = hasCode<NftCommandError>([ErrorCode.NFT_COMMAND]);
