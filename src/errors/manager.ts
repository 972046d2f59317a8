// Errors of the manager's host backends (src/manager/spawner.ts).

import { ErrorCode, hasCode, ScalerError } from './code.js';

/**
 * A spawn ended without an agent for a reason of the manager's own (the agent
 * was pruned, drained or shut down before its backend's `spawn` finished): the
 * `error` of a `spawn-failed` answer of `requestScale`.
 *
 * @example
 * ```ts
 * import { ErrorCode, isScalerError } from 'scaler-primitives/errors';
 * import type { ScalerManager } from 'scaler-primitives/manager';
 * declare const manager: ScalerManager;
 * try { await manager.shutdownAll(); }
 * catch (error) {
 *   if (isScalerError(error, ErrorCode.BACKEND)) console.error(error.scaler);
 *   else throw error;
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
  constructor(scaler: string, message: string, options?: { cause?: unknown }) {
    super(ErrorCode.BACKEND, message, options);
    this.name = 'BackendError';
    this.scaler = scaler;
  }
}

// Internal guards (the package exports `isScalerError(error, code)` instead).
export const isBackendError = hasCode<BackendError>([ErrorCode.BACKEND]);
