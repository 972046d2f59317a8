// Errors of the manager's host backends (src/manager/spawner.ts).
// Re-exported by the door, src/errors.ts: code outside src/errors/ imports from the door only.

import { ErrorCode, hasCode, ScalerError, type ScalerErrorOptions } from './base.js';

/**
 * A host backend failed to spawn or destroy an agent.
 *
 * @example
 * ```ts
 * import { isBackendError } from 'scaler-primitives';
 * import type { ScalerManager } from 'scaler-primitives/manager';
 * declare const manager: ScalerManager;
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

/**
 * True for a {@link BackendError}.
 *
 * @example
 * ```ts
 * import { isBackendError } from 'scaler-primitives';
 * declare const error: unknown;
 * if (isBackendError(error)) console.error(error.code, error.backend);
 * ```
 */
export const isBackendError = hasCode<BackendError>([ErrorCode.BACKEND]);
