// Errors of refused input: configuration documents and single values.

import { ErrorCode, hasCode, ScalerError } from './code.js';

/**
 * One problem found in a configuration document: what {@link ConfigError.issues} lists, and
 * what `validateScalerConfig` returns in `errors`.
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
 * import { ErrorCode, isScalerError } from 'scaler-primitives/errors';
 * import { parseScalerConfig } from 'scaler-primitives/manager';
 * declare const text: string;
 * try { parseScalerConfig(JSON.parse(text)); }
 * catch (error) {
 *   if (isScalerError(error, ErrorCode.CONFIG_INVALID)) console.error(error.issues);
 *   else throw error;
 * }
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
  constructor(issues: readonly ConfigIssue[], message: string, options?: { cause?: unknown }) {
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
 * import { ErrorCode, isScalerError } from 'scaler-primitives/errors';
 * import { validateInterfaceName } from 'scaler-primitives/nftables';
 * declare const input: string;
 * try { validateInterfaceName(input); }
 * catch (error) {
 *   if (isScalerError(error, ErrorCode.INVALID_INPUT)) console.error(error.what, error.value);
 *   else throw error;
 * }
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

// Internal guards (the package exports `isScalerError(error, code)` instead).
export const isConfigError = hasCode<ConfigError>([ErrorCode.CONFIG_INVALID]);

export const isInvalidInputError = hasCode<InvalidInputError>([ErrorCode.INVALID_INPUT]);
