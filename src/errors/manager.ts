// Errors of the manager's host backends (src/manager/spawner.ts).

import { ErrorCode, hasCode, ScalerError, type ScalerErrorOptions } from './base.js';

/**
 * A host backend failed to spawn or destroy an agent.
 *
 * @example
 * ```ts
 * import { ErrorCode, isScalerError } from 'scaler-primitives';
 * import type { ScalerManager } from 'scaler-primitives/manager';
 * declare const manager: ScalerManager;
 * try { await manager.shutdownAll(); }
 * catch (error) {
 *   if (isScalerError(error, ErrorCode.BACKEND)) console.error(error.backend);
 *   else throw error;
 * }
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

// Internal guards (the package exports `isScalerError(error, code)` instead).
export const isBackendError = hasCode<BackendError>([ErrorCode.BACKEND]);
