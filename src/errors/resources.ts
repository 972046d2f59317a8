// Errors of resource quantities and reservations (src/resources, src/caps, the ledger ops).

import { ErrorCode, hasCode, ScalerError } from './code.js';

/**
 * A CPU or memory quantity that could not be parsed; names the value and the accepted forms.
 *
 * @example
 * ```ts
 * import { ErrorCode, isScalerError } from 'scaler-primitives/errors';
 * import { parseCpu } from 'scaler-primitives/resources';
 * declare const input: string;
 * try { parseCpu(input); }
 * catch (error) {
 *   if (isScalerError(error, ErrorCode.RESOURCE_PARSE)) console.error(error.kind, error.value);
 *   else throw error;
 * }
 * ```
 */
export class ResourceParseError extends ScalerError {
  /** The value that was refused, as given. */
  readonly value: unknown;
  /**
   * Which kind of quantity was refused: `cpu`, `memory` or `extended` (a countable resource
   * such as `nvidia.com/gpu`).
   */
  readonly kind: 'cpu' | 'memory' | 'extended';
  /**
   * @param kind - `cpu` or `memory`.
   * @param value - The refused value.
   * @param message - The full sentence.
   */
  constructor(kind: ResourceParseError['kind'], value: unknown, message: string) {
    super(ErrorCode.RESOURCE_PARSE, message);
    this.name = 'ResourceParseError';
    this.kind = kind;
    this.value = value;
  }
}

/**
 * Resolved resources whose request exceeds their limit in one dimension.
 *
 * @example
 * ```ts
 * import { ErrorCode, isScalerError } from 'scaler-primitives/errors';
 * import { resolveResources, type ResourceRequest } from 'scaler-primitives/resources';
 * declare const layers: ResourceRequest[];
 * try { resolveResources(layers); }
 * catch (error) {
 *   if (isScalerError(error, ErrorCode.RESOURCE_CONFLICT)) console.error(error.dimension, error.request, error.limit);
 *   else throw error;
 * }
 * ```
 */
export class ResourceConflictError extends ScalerError {
  /** The dimension in conflict. */
  readonly dimension: 'cpus' | 'memBytes';
  /** The resolved request (cores or bytes). */
  readonly request: number;
  /** The resolved limit (cores or bytes). */
  readonly limit: number;
  /** The name of the layer the request came from. */
  readonly requestLayer: string;
  /** The name of the layer the limit came from. */
  readonly limitLayer: string;
  /**
   * @param details - The values in conflict and where each came from.
   * @param message - The full sentence.
   */
  constructor(
    details: {
      dimension: 'cpus' | 'memBytes';
      request: number;
      limit: number;
      requestLayer: string;
      limitLayer: string;
    },
    message: string,
  ) {
    super(ErrorCode.RESOURCE_CONFLICT, message);
    this.name = 'ResourceConflictError';
    this.dimension = details.dimension;
    this.request = details.request;
    this.limit = details.limit;
    this.requestLayer = details.requestLayer;
    this.limitLayer = details.limitLayer;
  }
}

/**
 * A reservation id that is already held was reserved again (it would count twice).
 *
 * @example
 * ```ts
 * import { ErrorCode, isScalerError } from 'scaler-primitives/errors';
 * import type { CapTracker } from 'scaler-primitives/caps';
 * import type { ResourceAmount } from 'scaler-primitives/resources';
 * declare const caps: CapTracker;
 * declare const amount: ResourceAmount;
 * try { caps.tryReserve('agent-1', ['global'], amount); }
 * catch (error) {
 *   if (isScalerError(error, ErrorCode.DUPLICATE_RESERVATION)) console.error(error.id);
 *   else throw error;
 * }
 * ```
 */
export class DuplicateReservationError extends ScalerError {
  /** The reservation id. */
  readonly id: string;
  /**
   * @param id - The reservation id already held.
   * @param message - The full sentence.
   */
  constructor(id: string, message: string) {
    super(ErrorCode.DUPLICATE_RESERVATION, message);
    this.name = 'DuplicateReservationError';
    this.id = id;
  }
}

// Internal guards (the package exports `isScalerError(error, code)` instead).
export const isResourceParseError = hasCode<ResourceParseError>([ErrorCode.RESOURCE_PARSE]);

export const isResourceConflictError = hasCode<ResourceConflictError>([
  ErrorCode.RESOURCE_CONFLICT,
]);

export const isDuplicateReservationError = hasCode<DuplicateReservationError>([
  ErrorCode.DUPLICATE_RESERVATION,
]);

/** Which kind of quantity was refused. */
export type ResourceKind = ResourceParseError['kind'];
