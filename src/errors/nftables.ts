// Errors raised while running `nft` (src/nftables).
// Re-exported by the door, src/errors.ts: code outside src/errors/ imports from the door only.

import {
  ErrorCode,
  type ErrorCodeName,
  hasCode,
  ScalerError,
  type ScalerErrorOptions,
} from './base.js';

/**
 * Base class of the errors raised while running `nft`.
 *
 * @example
 * ```ts
 * import { isNftError } from 'scaler-primitives';
 * import { addIsolationRules, type IsolationPolicy } from 'scaler-primitives/nftables';
 * declare const agent: string;
 * declare const policy: IsolationPolicy;
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
 * import { isNftNotInstalledError } from 'scaler-primitives';
 * import { addIsolationRules, type IsolationPolicy } from 'scaler-primitives/nftables';
 * declare const agent: string;
 * declare const policy: IsolationPolicy;
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
 * import { isNftPermissionError } from 'scaler-primitives';
 * import { addIsolationRules, type IsolationPolicy } from 'scaler-primitives/nftables';
 * declare const agent: string;
 * declare const policy: IsolationPolicy;
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
 * import { isNftCommandError } from 'scaler-primitives';
 * import { addIsolationRules, type IsolationPolicy } from 'scaler-primitives/nftables';
 * declare const agent: string;
 * declare const policy: IsolationPolicy;
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
 * True for any {@link NftError}.
 *
 * @example
 * ```ts
 * import { isNftError } from 'scaler-primitives';
 * declare const error: unknown;
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
 * import { isNftNotInstalledError } from 'scaler-primitives';
 * declare const error: unknown;
 * if (isNftNotInstalledError(error)) console.error(error.code);
 * ```
 */
export const isNftNotInstalledError = hasCode<NftNotInstalledError>([ErrorCode.NFT_NOT_INSTALLED]);

/**
 * True for an {@link NftPermissionError}.
 *
 * @example
 * ```ts
 * import { isNftPermissionError } from 'scaler-primitives';
 * declare const error: unknown;
 * if (isNftPermissionError(error)) console.error(error.code);
 * ```
 */
export const isNftPermissionError = hasCode<NftPermissionError>([ErrorCode.NFT_PERMISSION]);

/**
 * True for an {@link NftCommandError}.
 *
 * @example
 * ```ts
 * import { isNftCommandError } from 'scaler-primitives';
 * declare const error: unknown;
 * if (isNftCommandError(error)) console.error(error.code);
 * ```
 */
export const isNftCommandError = hasCode<NftCommandError>([ErrorCode.NFT_COMMAND]);
