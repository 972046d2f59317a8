/**
 * CPU and memory quantities (`"500m"`, `1.5`, `"8Gi"`, `"2g"`, bytes), the
 * request/limit mirroring rule and layered defaults (job, label set, scaler,
 * global, zero).
 *
 * Pure: no I/O, no dependencies beyond zod.
 *
 * @packageDocumentation
 */
export {
  InvalidInputError,
  isInvalidInputError,
  isResourceConflictError,
  isResourceParseError,
  ResourceConflictError,
  ResourceParseError,
} from '../errors.js';
export type {
  MemoryConvention,
  ParseMemoryOptions,
  QuantityConvention,
  QuantityOptions,
} from './convention.js';
export { parseExtendedCount } from './extended.js';
export { formatCpu, formatMemory } from './format.js';
export {
  checkLimitRange,
  type LimitRangeItem,
  type LimitRangePolicy,
  type LimitRangeResult,
  type LimitRangeRule,
  limitRangeDefaults,
  limitRangeProblems,
  limitRangeSchema,
} from './limit-range.js';
export {
  type ExtendedResourceName,
  isExtendedResourceName,
  MAX_EXTENDED_NAME_LENGTH,
  validateExtendedResourceName,
} from './names.js';
export { parseCpu, parseMemory, parseMillicores } from './parse.js';
export {
  capToMillicores,
  coresToMillicores,
  MAX_CPU_CORES,
  MAX_MILLICORES,
  MAX_QUANTITY_LENGTH,
} from './quantity.js';
export {
  DEFAULT_LAYER_NAMES,
  mirrorRequestsLimits,
  type ProvenanceOf,
  type ResolvedResources,
  type ResolveResourcesOptions,
  type ResourceProvenance,
  resolveResources,
} from './resolve.js';
export {
  type ParsedResourceRequest,
  type ParsedResourceSpec,
  type ResourceCapInput,
  type ResourceSchemas,
  resourceCapSchema,
  resourceRequestSchema,
  resourceSchemas,
  resourceSpecSchema,
} from './schema.js';
export {
  MAX_CPU_LIMIT_CORES,
  type ResourceAmount,
  type ResourceCap,
  type ResourceLimits,
  type ResourceRequest,
  type ResourceSpec,
} from './types.js';
