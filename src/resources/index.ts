/**
 * CPU and memory quantities (`"500m"`, `1.5`, `"8Gi"`, `"2g"`, bytes), the
 * request/limit mirroring rule and layered defaults (job, label set, scaler,
 * global, zero).
 *
 * Pure: no I/O, no dependencies beyond zod.
 *
 * @packageDocumentation
 */
export type { QuantityOptions } from './convention.js';
export { parseExtendedCount } from './extended.js';
export { formatCpu, formatMemory } from './format.js';
export {
  checkLimitRange,
  type LimitRangePolicy,
  limitRangeDefaults,
  limitRangeSchema,
} from './limit-range.js';
export { isExtendedResourceName } from './names.js';
export { parseCpu, parseMemory, parseMillicores } from './parse.js';
export { type ResolvedResources, resolveResources } from './resolve.js';
export {
  type ParsedResourceRequest,
  type ResourceCapInput,
  resourceCapSchema,
  resourceRequestSchema,
  resourceSchemas,
  resourceSpecSchema,
} from './schema.js';
export type {
  ResourceAmount,
  ResourceCap,
  ResourceLimits,
  ResourceRequest,
  ResourceSpec,
} from './types.js';
