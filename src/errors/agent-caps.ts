// Errors of per-agent caps (src/agent-caps): an invalid systemd value, a lost KV write race.

import { ErrorCode, hasCode, ScalerError } from './code.js';

/**
 * A per-agent caps value is not valid systemd syntax; it was not written or applied.
 *
 * @example
 * ```ts
 * import { ErrorCode, isScalerError } from 'scaler-primitives/errors';
 * import { decodeAgentCaps } from 'scaler-primitives/agent-caps';
 * declare const value: string;
 * try { decodeAgentCaps(value); }
 * catch (error) {
 *   if (isScalerError(error, ErrorCode.CAPS_VALUE)) console.error(error.field, error.value);
 *   else throw error;
 * }
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
  constructor(field: string, value: unknown, message: string, options?: { cause?: unknown }) {
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
 * import type { KV } from '@nats-io/kv';
 * import { ErrorCode, isScalerError } from 'scaler-primitives/errors';
 * import type { AgentCaps } from 'scaler-primitives/agent-caps';
 * import { writeAgentCaps } from 'scaler-primitives/agent-caps/nats';
 * declare const kv: KV;
 * declare const caps: AgentCaps;
 * try { await writeAgentCaps(kv, 'iris', caps); }
 * catch (error) {
 *   if (isScalerError(error, ErrorCode.REVISION_CONFLICT)) console.error(error.key);
 *   else throw error;
 * }
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
  constructor(key: string, message: string, options?: { cause?: unknown }) {
    super(ErrorCode.REVISION_CONFLICT, message, options);
    this.name = 'RevisionConflictError';
    this.key = key;
  }
}

// Internal guards (the package exports `isScalerError(error, code)` instead).
export const isCapsValueError = hasCode<CapsValueError>([ErrorCode.CAPS_VALUE]);

export const isRevisionConflictError = hasCode<RevisionConflictError>([
  ErrorCode.REVISION_CONFLICT,
]);
