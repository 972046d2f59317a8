// Errors of the manager's state stores (src/manager/state, src/manager/nats).

import { ErrorCode, hasCode, ScalerError } from './code.js';

/** What a {@link StateStoreError} is about: the values of its `problem`. */
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
} as const satisfies Record<string, StateStoreError['problem']>;

/**
 * A manager state store (file or NATS) refused its stored state or failed to write.
 *
 * @example
 * ```ts
 * import { ErrorCode, isScalerError } from 'scaler-primitives/errors';
 * import type { ScalerManager } from 'scaler-primitives/manager';
 * declare const manager: ScalerManager;
 * try {
 *   await manager.recoverState();
 * } catch (error) {
 *   if (isScalerError(error, ErrorCode.STATE_STORE)) console.error(error.location, error.problem, error.message);
 *   else throw error;
 * }
 * ```
 */
export class StateStoreError extends ScalerError {
  /** Where: a file path or a KV bucket and key. */
  readonly location: string;
  /**
   * What went wrong: `corrupt` (the stored state is unreadable, of the wrong shape or of an
   * unknown version: left as it is), `unsafe-file` (a file refused before it was read: a
   * link, not a regular file, foreign owner, writable by others), `too-large` (larger than
   * the store's size limit), `conflict` (another writer changed the stored state since this
   * store last read or wrote it) or `unavailable` (the backing store could not be read or
   * written).
   */
  readonly problem: 'corrupt' | 'unsafe-file' | 'too-large' | 'conflict' | 'unavailable';
  /**
   * @param location - A file path, or a bucket and key.
   * @param problem - What went wrong (see `problem`).
   * @param message - The full sentence.
   * @param options - `cause`.
   */
  constructor(
    location: string,
    problem: StateStoreError['problem'],
    message: string,
    options?: { cause?: unknown },
  ) {
    super(ErrorCode.STATE_STORE, message, options);
    this.name = 'StateStoreError';
    this.location = location;
    this.problem = problem;
  }
}

// Internal guards (the package exports `isScalerError(error, code)` instead).
export const isStateStoreError = hasCode<StateStoreError>([ErrorCode.STATE_STORE]);

/** The union of the values of `StateStoreProblem` (every one of them is a `problem`). */
export type StateStoreProblemName = (typeof StateStoreProblem)[keyof typeof StateStoreProblem];
// Each `problem` has a constant: a value added to one list and not the other fails here.
const problemsAgree: [StateStoreError['problem']] extends [StateStoreProblemName] ? true : false =
  true;
void problemsAgree;
