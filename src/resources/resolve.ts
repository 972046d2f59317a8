import { isResourceParseError, ResourceConflictError, ResourceParseError } from '../errors.js';
import { type ParseMemoryOptions, parseCpu, parseMemory } from './quantity.js';
import type { ResourceAmount, ResourceRequest, ResourceSpec } from './types.js';

/** The layer names {@link resolveResources} uses when none are given, in priority order. */
export const DEFAULT_LAYER_NAMES = ['job', 'labelSet', 'scaler', 'global'] as const;

/** Where each resolved value came from: a layer name, or `zero` when no layer declared it. */
export interface ResourceProvenance {
  /** Layers of `requests.cpus` and `requests.memBytes`. */
  requests: ProvenanceOf;
  /** Layers of `limits.cpus` and `limits.memBytes`. */
  limits: ProvenanceOf;
}

/** The layer names behind one side of a {@link ResolvedResources}. */
export interface ProvenanceOf {
  /** The layer the CPU value came from, or `zero`. */
  cpus: string;
  /** The layer the memory value came from, or `zero`. */
  memBytes: string;
}

/** The outcome of {@link resolveResources}: numbers for both sides, and their provenance. */
export interface ResolvedResources {
  /** What the job needs: what caps add up. */
  requests: ResourceAmount;
  /** What the job may use at most: what backends enforce. */
  limits: ResourceAmount;
  /** Which layer every value came from. */
  provenance: ResourceProvenance;
}

/** Options of {@link resolveResources}. */
export interface ResolveResourcesOptions extends ParseMemoryOptions {}

/**
 * Apply the request/limit mirroring rule: per dimension (`cpus`, `memory`), a value
 * declared on one side only is copied to the other side. Values are kept as given.
 *
 * @param request - A declaration; `undefined` reads as an empty one.
 * @returns A new declaration; the input is not modified.
 *
 * @example
 * ```ts
 * mirrorRequestsLimits({ requests: { cpus: 2 }, limits: { memory: '4Gi' } });
 * // { requests: { cpus: 2, memory: '4Gi' }, limits: { cpus: 2, memory: '4Gi' } }
 * ```
 */
export function mirrorRequestsLimits(request: ResourceRequest | undefined): ResourceRequest {
  if (request === undefined) return {};
  if (typeof request !== 'object' || request === null) {
    throw new TypeError(
      `Expected a resource request object or undefined, got \`${String(request)}\``,
    );
  }
  const requests: ResourceSpec = { ...request.requests };
  const limits: ResourceSpec = { ...request.limits };
  for (const key of ['cpus', 'memory'] as const) {
    if (requests[key] === undefined && limits[key] !== undefined) requests[key] = limits[key];
    if (limits[key] === undefined && requests[key] !== undefined) limits[key] = requests[key];
  }
  const out: ResourceRequest = {};
  if (Object.keys(requests).length > 0) out.requests = requests;
  if (Object.keys(limits).length > 0) out.limits = limits;
  return out;
}

const SIDES = ['requests', 'limits'] as const;

/**
 * Resolve a job's resources through layered defaults.
 *
 * `layers` are in priority order (by default: job, label set, scaler, global).
 * Each layer is mirrored first ({@link mirrorRequestsLimits}); then, per side and
 * per dimension, the first layer that declares a value wins, else zero.
 *
 * @param layers - Declarations, highest priority first; `undefined` entries are skipped.
 * @param names - A name per layer, used in provenance and errors.
 *   @default ['job', 'labelSet', 'scaler', 'global']
 * @param opts - The memory suffix convention.
 * @returns Numeric requests and limits (cores, bytes) with the provenance of each.
 * @throws {@link ResourceParseError} naming the layer and field of an invalid quantity.
 * @throws {@link ResourceConflictError} when a resolved request exceeds its limit,
 *   naming the layer each value came from.
 *
 * @example
 * ```ts
 * const r = resolveResources([{ requests: { cpus: '500m' } }, undefined, { limits: { memory: '2Gi' } }]);
 * r.requests; // { cpus: 0.5, memBytes: 2147483648 }
 * r.provenance.requests.memBytes; // 'scaler'
 * ```
 */
export function resolveResources(
  layers: ReadonlyArray<ResourceRequest | undefined>,
  names: readonly string[] = DEFAULT_LAYER_NAMES,
  opts: ResolveResourcesOptions = {},
): ResolvedResources {
  if (!Array.isArray(layers)) {
    throw new TypeError(`Expected \`layers\` to be an array, got \`${typeof layers}\``);
  }
  const result: ResolvedResources = {
    requests: { cpus: 0, memBytes: 0 },
    limits: { cpus: 0, memBytes: 0 },
    provenance: {
      requests: { cpus: 'zero', memBytes: 'zero' },
      limits: { cpus: 'zero', memBytes: 'zero' },
    },
  };
  // Per dimension, mirroring makes the first declaring layer fill both sides.
  let cpuDone = false;
  let memoryDone = false;
  for (let i = 0; i < layers.length && !(cpuDone && memoryDone); i++) {
    const layer = layers[i];
    if (layer === undefined) continue;
    if (typeof layer !== 'object' || layer === null) {
      throw new TypeError(
        `Expected layer ${i} to be a resource request object or undefined, got \`${String(layer)}\``,
      );
    }
    const name = names[i] ?? `layer${i}`;
    // Parse what the layer declares before mirroring, so an error names the
    // field as it was written.
    const parsed: ResourceRequest = {};
    for (const side of SIDES) {
      const spec = layer[side];
      if (spec === undefined) continue;
      const out: ResourceSpec = {};
      if (spec.cpus !== undefined) {
        out.cpus = parseIn(name, side, 'cpus', () => parseCpu(spec.cpus!));
      }
      if (spec.memory !== undefined) {
        out.memory = parseIn(name, side, 'memory', () => parseMemory(spec.memory!, opts));
      }
      parsed[side] = out;
    }
    const mirrored = mirrorRequestsLimits(parsed);
    for (const side of SIDES) {
      const spec = mirrored[side];
      if (!cpuDone && spec?.cpus !== undefined) {
        result[side].cpus = spec.cpus as number;
        result.provenance[side].cpus = name;
      }
      if (!memoryDone && spec?.memory !== undefined) {
        result[side].memBytes = spec.memory as number;
        result.provenance[side].memBytes = name;
      }
    }
    if (mirrored.requests?.cpus !== undefined) cpuDone = true;
    if (mirrored.requests?.memory !== undefined) memoryDone = true;
  }
  checkConflict(result, 'cpus');
  checkConflict(result, 'memBytes');
  return result;
}

function parseIn(layer: string, side: string, field: string, parse: () => number): number {
  try {
    return parse();
  } catch (error) {
    if (isResourceParseError(error)) {
      throw new ResourceParseError(
        error.kind,
        error.value,
        `${layer} ${side}.${field}: ${error.message}`,
      );
    }
    throw error;
  }
}

function checkConflict(result: ResolvedResources, dimension: 'cpus' | 'memBytes'): void {
  const request = result.requests[dimension];
  const limit = result.limits[dimension];
  if (request <= limit) return;
  const requestLayer = result.provenance.requests[dimension];
  const limitLayer = result.provenance.limits[dimension];
  const unit = dimension === 'cpus' ? 'cores' : 'bytes';
  throw new ResourceConflictError(
    { dimension, request, limit, requestLayer, limitLayer },
    `Resolved ${dimension} request ${request} ${unit} (from ${requestLayer}) exceeds its limit ${limit} ${unit} (from ${limitLayer}); declare a limit at least as large as the request in ${requestLayer}.`,
  );
}
