// A failed or timed-out NATS request (src/agent-caps/nats, src/internal/nats-errors.ts).

import { ErrorCode, hasCode, ScalerError } from './code.js';

/**
 * A NATS request failed or timed out.
 *
 * @example
 * ```ts
 * import type { NatsConnection } from '@nats-io/transport-node';
 * import { ErrorCode, isScalerError } from 'scaler-primitives/errors';
 * import { readAgentCaps } from 'scaler-primitives/agent-caps/nats';
 * declare const nc: NatsConnection;
 * try { await readAgentCaps(nc, 'iris'); }
 * catch (error) {
 *   if (isScalerError(error, ErrorCode.NATS_TIMEOUT)) console.error(error.subject);
 *   else throw error;
 * }
 * ```
 */
export class NatsRequestError extends ScalerError {
  /** The subject requested. */
  readonly subject: string;
  /**
   * @param code - `NATS_TIMEOUT` or `NATS_REQUEST`.
   * @param subject - The subject.
   * @param message - The full sentence.
   * @param options - `cause`.
   */
  constructor(
    code: typeof ErrorCode.NATS_TIMEOUT | typeof ErrorCode.NATS_REQUEST,
    subject: string,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(code, message, options);
    this.name = 'NatsRequestError';
    this.subject = subject;
  }
}

// Internal guards (the package exports `isScalerError(error, code)` instead).
export const isNatsRequestError = hasCode<NatsRequestError>([
  ErrorCode.NATS_TIMEOUT,
  ErrorCode.NATS_REQUEST,
]);

/**
 * The nats-server a NATS ledger connected to is older than the version it is
 * safe on, and the ledger was told to refuse such servers.
 *
 * @example
 * ```ts
 * import { ErrorCode, isScalerError } from 'scaler-primitives/errors';
 * import { NatsPoolLedger } from 'scaler-primitives/ledger/nats';
 * try {
 *   await NatsPoolLedger.connect({ servers: 'nats://nats:4222', instanceId: 'a', serverVersionPolicy: 'refuse' });
 * } catch (error) {
 *   if (isScalerError(error, ErrorCode.NATS_SERVER_VERSION)) console.error(error.version, error.minimum);
 *   else throw error;
 * }
 * ```
 */
export class NatsServerVersionError extends ScalerError {
  /** The version the server reported. */
  readonly version: string;
  /** The minimum version the ledger is safe on. */
  readonly minimum: string;
  /**
   * @param version - The server's version.
   * @param minimum - The minimum safe version.
   * @param message - The full sentence.
   */
  constructor(version: string, minimum: string, message: string) {
    super(ErrorCode.NATS_SERVER_VERSION, message);
    this.name = 'NatsServerVersionError';
    this.version = version;
    this.minimum = minimum;
  }
}

export const isNatsServerVersionError = hasCode<NatsServerVersionError>([
  ErrorCode.NATS_SERVER_VERSION,
]);
