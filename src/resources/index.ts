/**
 * CPU and memory quantities, the request/limit mirroring rule and layered defaults.
 *
 * @packageDocumentation
 */
export type { ResourceAmount, ResourceCap, ResourceRequest, ResourceSpec } from './types.js';
