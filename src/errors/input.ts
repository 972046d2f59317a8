// Errors of refused input: configuration documents and single values.
// Re-exported by the door, src/errors.ts: code outside src/errors/ imports from the door only.

import { ErrorCode, hasCode, ScalerError, type ScalerErrorOptions } from './base.js';

/**
 * One problem found in a configuration document.
 *
 * @example
 * ```ts
 * import { isConfigError } from 'scaler-primitives';
 * declare const error: unknown;
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
 * import { isConfigError } from 'scaler-primitives';
 * import { parseScalerConfig } from 'scaler-primitives/manager';
 * declare const text: string;
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
 * import { isInvalidInputError } from 'scaler-primitives';
 * import { validateInterfaceName } from 'scaler-primitives/nftables';
 * declare const input: string;
 * try { validateInterfaceName(input); }
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
 * True for a {@link ConfigError}.
 *
 * @example
 * ```ts
 * import { isConfigError } from 'scaler-primitives';
 * declare const error: unknown;
 * if (isConfigError(error)) console.error(error.code, error.issues);
 * ```
 */
export const isConfigError = hasCode<ConfigError>([ErrorCode.CONFIG_INVALID]);

/**
 * True for an {@link InvalidInputError}.
 *
 * @example
 * ```ts
 * import { isInvalidInputError } from 'scaler-primitives';
 * declare const error: unknown;
 * if (isInvalidInputError(error)) console.error(error.code, error.what, error.value);
 * ```
 */
export const isInvalidInputError = hasCode<InvalidInputError>([ErrorCode.INVALID_INPUT]);
