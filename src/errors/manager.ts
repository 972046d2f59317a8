// Errors of the manager's host backends (src/manager/spawner.ts).
// Re-exported by src/errors.ts, the entry file of the errors: code outside src/errors/ imports from it.

import { ErrorCode, hasCode, ScalerError, type ScalerErrorOptions } from './base.js';

/**
 * A spawn ended without an agent for a reason of the manager's own (the agent
 * was pruned, drained or shut down before its backend's `spawn` finished): the
 * `error` of a `spawn-failed` answer of `requestScale`.
 *
 * @example
 * ```ts
 * import { BackendError } from 'scaler-primitives';
 * import type { ScalerManager } from 'scaler-primitives/manager';
 * declare const manager: ScalerManager;
 * const result = await manager.requestScale(['linux'], 'job-1');
 * if (result.kind === 'spawn-failed' && result.error instanceof BackendError) {
 *   console.error(`${result.error.scaler}: ${result.error.message}`);
 * }
 * ```
 */
export class BackendError extends ScalerError {
  /** The scaler whose agent it was. */
  readonly scaler: string;
  /**
   * @param scaler - The scaler name.
   * @param message - The full sentence.
   * @param options - `cause`: what the backend threw.
   */
  constructor(scaler: string, message: string, options?: ScalerErrorOptions) {
    super(ErrorCode.BACKEND, message, options);
    this.name = 'BackendError';
    this.scaler = scaler;
  }
}

/**
 * True for a {@link BackendError}.
 *
 * @example
 * ```ts
 * import { isBackendError } from 'scaler-primitives';
 * declare const error: unknown;
 * if (isBackendError(error)) console.error(error.code, error.scaler);
 * ```
 */
export const isBackendError = hasCode<BackendError>([ErrorCode.BACKEND]);
