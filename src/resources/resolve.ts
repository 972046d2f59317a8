import { ResourceConflictError, ResourceParseError } from '../errors/index.js';
import type { QuantityOptions } from './convention.js';
import { type ParsedLayerShape, readLayer, type ShapeIssue } from './shape.js';
import {
  MAX_CPU_LIMIT_CORES,
  type ResourceAmount,
  type ResourceLimits,
  type ResourceRequest,
  type ResourceSpec,
} from './types.js';

/** The layer names {@link resolveResources} uses when none are given, in priority order. */
export const DEFAULT_LAYER_NAMES = ['job', 'labelSet', 'scaler', 'global'] as const;

/**
 * Where each resolved value came from: a layer name; `zero` for a request no
 * layer declared (a request of nothing), `unset` for a limit no layer declared.
 * A limit declared as 0 is absent from the limits (unset) and keeps the name of
 * the layer that declared it here.
 */
export interface ResourceProvenance {
  /** Layers of `requests.cpus` and `requests.memBytes` (`zero` when undeclared). */
  requests: ProvenanceOf;
  /** Layers of `limits.cpus` and `limits.memBytes` (`unset` when undeclared). */
  limits: ProvenanceOf;
}

/** The layer names behind one side of a {@link ResolvedResources}. */
export interface ProvenanceOf {
  /** The layer the CPU value came from, or `zero` (a request) / `unset` (a limit). */
  cpus: string;
  /** The layer the memory value came from, or `zero` (a request) / `unset` (a limit). */
  memBytes: string;
  /** The layer each extended resource came from (absent when none is declared). */
  extended?: Record<string, string>;
}

/**
 * The outcome of {@link resolveResources}: requests (0 when undeclared), limits
 * (absent when unset) and their provenance.
 */
export interface ResolvedResources {
  /** What the job needs: what caps add up. An undeclared request is 0. */
  requests: ResourceAmount;
  /**
   * What the job may use at most: what backends enforce. An undeclared limit
   * (or one declared as 0) is absent: unset, no cap.
   */
  limits: ResourceLimits;
  /**
   * Which layer every value came from, per side: a layer name; `zero` for a
   * request no layer declared (a request of nothing), `unset` for a limit no
   * layer declared. A limit declared as 0 is absent from the limits (unset)
   * and keeps the name of the layer that declared it here. `extended` names
   * the layer of each extended resource (absent when none is declared).
   */
  provenance: Record<
    'requests' | 'limits',
    {
      /** The layer of the CPU value, or `zero` (a request) / `unset` (a limit). */
      cpus: string;
      /** The layer of the memory value, or `zero` (a request) / `unset` (a limit). */
      memBytes: string;
      /** The layer of each extended resource (absent when none is declared). */
      extended?: Record<string, string>;
    }
  >;
}

/**
 * Apply the request/limit mirroring rule: per dimension (`cpus`, `memory`, each
 * extended resource), a value
 * declared on one side only is copied to the other side. Values are kept as given.
 *
 * @param request - A declaration; `undefined` reads as an empty one.
 * @returns A new declaration; the input is not modified.
 */
export function mirrorRequestsLimits(request: ResourceRequest | undefined): ResourceRequest {
  if (request === undefined) return {};
  if (typeof request !== 'object' || request === null) {
    throw new TypeError(
      `Expected a resource request object or undefined, got \`${String(request)}\``,
    );
  }
  const requests: Record<string, unknown> = { ...request.requests };
  const limits: Record<string, unknown> = { ...request.limits };
  for (const key of Object.keys(requests)) {
    if (limits[key] === undefined && requests[key] !== undefined) limits[key] = requests[key];
  }
  for (const key of Object.keys(limits)) {
    if (requests[key] === undefined && limits[key] !== undefined) requests[key] = limits[key];
  }
  const out: ResourceRequest = {};
  if (Object.keys(requests).length > 0) out.requests = requests as ResourceSpec;
  if (Object.keys(limits).length > 0) out.limits = limits as ResourceSpec;
  return out;
}

const SIDES = ['requests', 'limits'] as const;
// The provenance of a limit no layer declares.
const UNSET = 'unset';

/**
 * Resolve a job's resources through layered defaults.
 *
 * `layers` are in priority order (by default: job, label set, scaler, global).
 * Each layer is read strictly (unknown keys are refused) and mirrored first
 * (a value declared on one side only is copied to the other); then, per dimension, the first layer that
 * declares it decides both sides. A layer may be nested (`{ requests?, limits? }`)
 * or flat (`{ cpus?, memory?, "nvidia.com/gpu"? }`, which declares both sides at once).
 *
 * "Not declared" has one meaning per side: a request no layer declares is 0 (the
 * job reserves nothing, provenance `zero`); a limit no layer declares is
 * **unset**: absent from `limits` (provenance `unset`), never 0. A limit declared
 * as 0 is unset too, as in Kubernetes (where the kubelet writes no CPU quota and
 * no memory limit for a zero limit), after the request-above-limit check. So
 * every resolved limit is positive or absent, and `capsFromResources(r.limits)`
 * always succeeds.
 *
 * Extended resources (`nvidia.com/gpu`) are whole counts and, as in Kubernetes,
 * a layer that declares both sides must declare them equal; the resolved
 * request and limit of an extended resource are always equal.
 *
 * @param layers - Declarations, highest priority first; `undefined` entries are skipped.
 * @param names - A name per layer, used in provenance and errors.
 *   @default ['job', 'labelSet', 'scaler', 'global']
 * @param opts - The quantity convention.
 * @returns Numeric requests (cores, bytes, counts; 0 when undeclared) and limits
 *   (absent when unset) with the provenance of each.
 * @throws `ResourceParseError` naming the layer and field of an invalid quantity,
 *   an extended resource whose request and limit differ, or a CPU limit above
 *   214748.36 cores (the largest `CPUQuota=` systemd reads).
 * @throws `InvalidInputError` for an unknown key (naming it, the accepted keys
 *   and the nearest one, e.g. `reqeusts` -> `requests`) or an invalid resource name.
 * @throws `ResourceConflictError` when a resolved request exceeds its limit,
 *   naming the layer each value came from.
 * @throws TypeError when `layers` is not an array or a layer is not an object.
 *
 * @example
 * ```ts
 * import { resolveResources } from 'scaler-primitives/resources';
 *
 * const r = resolveResources([{ requests: { cpus: '500m' } }, undefined, { limits: { memory: '2Gi' } }]);
 * r.requests; // { cpus: 0.5, memBytes: 2147483648 }
 * r.provenance.requests.memBytes; // 'scaler'
 *
 * const cpuOnly = resolveResources([{ requests: { cpus: 2 } }]);
 * cpuOnly.requests; // { cpus: 2, memBytes: 0 }
 * cpuOnly.limits; // { cpus: 2 }: the memory limit is unset, not 0
 * cpuOnly.provenance.limits.memBytes; // 'unset'
 * ```
 */
export function resolveResources(
  layers: ReadonlyArray<ResourceRequest | undefined>,
  names: readonly string[] = DEFAULT_LAYER_NAMES,
  opts: QuantityOptions = {},
): ResolvedResources {
  if (!Array.isArray(layers)) {
    throw new TypeError(`Expected \`layers\` to be an array, got \`${typeof layers}\``);
  }
  const read: Array<ReadLayer | undefined> = [];
  // Every layer is read (a typo in a lower layer is an error even when a higher
  // layer declares everything): fail closed on configuration mistakes. A
  // layer's error is thrown where the layer is combined, so the first layer
  // in priority order that is wrong is the one reported.
  for (let i = 0; i < layers.length; i++) {
    const layer = layers[i];
    if (layer === undefined) continue;
    read[i] = readResourceLayer(layer, i, names[i] ?? `layer${i}`, opts);
    if (read[i]!.error !== undefined) break;
  }
  return combineResourceLayers(read);
}

/**
 * One layer of {@link resolveResources}, read and mirrored, or the error it
 * throws. Pure in the layer (which it does not keep): a caller that knows a
 * layer never changes may read it once and combine it many times.
 * @internal
 */
export interface ReadLayer {
  /** The layer's name (provenance, messages). */
  readonly name: string;
  /** The mirrored, parsed layer, when it reads. */
  readonly mirrored?: ParsedLayerShape;
  /** What reading it threw. */
  readonly error?: unknown;
}

/** Read and mirror one layer (`index` for messages); errors are returned, not thrown. @internal */
export function readResourceLayer(
  layer: ResourceRequest,
  index: number,
  name: string,
  opts: QuantityOptions = {},
): ReadLayer {
  if (typeof layer !== 'object' || layer === null || Array.isArray(layer)) {
    return {
      name,
      error: new TypeError(
        `Expected layer ${index} (${name}) to be a resource request object or undefined, got \`${String(layer)}\``,
      ),
    };
  }
  const issues: ShapeIssue[] = [];
  const parsed = readLayer(layer, name, opts, issues);
  if (issues.length > 0) return { name, error: issues[0]!.error };
  return { name, mirrored: mirrorRequestsLimits(parsed as ResourceRequest) as ParsedLayerShape };
}

/**
 * The second half of {@link resolveResources}: combine read layers (highest
 * priority first; `undefined` entries are skipped) into fresh objects. Throws
 * the error of the first layer that did not read, or of a conflict.
 * @internal
 */
export function combineResourceLayers(
  layers: ReadonlyArray<ReadLayer | undefined>,
): ResolvedResources {
  // Worked on as numbers (0 when undeclared); the limits are made unset at the end.
  const work = {
    requests: { cpus: 0, memBytes: 0 } as ResourceAmount,
    limits: { cpus: 0, memBytes: 0 } as ResourceAmount,
    provenance: {
      requests: { cpus: 'zero', memBytes: 'zero' },
      limits: { cpus: UNSET, memBytes: UNSET },
    } as ResourceProvenance,
  };
  let cpuDone = false;
  let memoryDone = false;
  let extended: Record<string, number> | undefined;
  let extendedFrom: Record<string, string> | undefined;
  for (let i = 0; i < layers.length; i++) {
    const read = layers[i];
    if (read === undefined) continue;
    if (read.error !== undefined) throw read.error;
    const { name } = read;
    const mirrored = read.mirrored!;
    for (const side of SIDES) {
      const spec = mirrored[side];
      if (spec === undefined) continue;
      if (!cpuDone && spec.cpus !== undefined) {
        work[side].cpus = spec.cpus;
        work.provenance[side].cpus = name;
      }
      if (!memoryDone && spec.memory !== undefined) {
        work[side].memBytes = spec.memory;
        work.provenance[side].memBytes = name;
      }
    }
    if (mirrored.requests?.cpus !== undefined) cpuDone = true;
    if (mirrored.requests?.memory !== undefined) memoryDone = true;
    const requests = mirrored.requests;
    if (requests === undefined) continue;
    for (const key of Object.keys(requests)) {
      if (key === 'cpus' || key === 'memory') continue;
      const request = requests[key as `${string}/${string}`]!;
      const limit = mirrored.limits?.[key as `${string}/${string}`];
      if (limit !== request) {
        throw new ResourceParseError(
          'extended',
          { request, limit },
          `${name}: the request (${request}) and limit (${limit}) of ${key} differ; an extended resource is counted whole, so its request must equal its limit (declare one side only, it is mirrored).`,
        );
      }
      extended ??= {};
      extendedFrom ??= {};
      if (!Object.hasOwn(extended, key)) {
        extended[key] = request;
        extendedFrom[key] = name;
      }
    }
  }
  checkConflict(work, 'cpus');
  checkConflict(work, 'memBytes');
  const limits: ResourceLimits = {};
  if (work.limits.cpus > 0) {
    checkCpuLimit(work.limits.cpus, work.provenance.limits.cpus);
    limits.cpus = work.limits.cpus;
  }
  // A limit declared as 0 is absent too; its provenance keeps the layer that declared it.
  if (work.limits.memBytes > 0) limits.memBytes = work.limits.memBytes;
  const result: ResolvedResources = {
    requests: work.requests,
    limits,
    provenance: work.provenance,
  };
  if (extended !== undefined) {
    result.requests.extended = extended;
    result.limits.extended = { ...extended };
    result.provenance.requests.extended = extendedFrom;
    result.provenance.limits.extended = { ...extendedFrom };
  }
  return result;
}

function checkCpuLimit(cores: number, layer: string): void {
  if (cores <= MAX_CPU_LIMIT_CORES) return;
  throw new ResourceParseError(
    'cpu',
    cores,
    `${layer} limits.cpus: a CPU limit of ${cores} cores (declared, or mirrored from the request) is above the largest CPU limit, ${MAX_CPU_LIMIT_CORES} cores (systemd CPUQuota= reads at most ${Math.floor(2_147_483_647 / 100)}%); declare a smaller limit, or none.`,
  );
}

function checkConflict(
  result: { requests: ResourceAmount; limits: ResourceAmount; provenance: ResourceProvenance },
  dimension: 'cpus' | 'memBytes',
): void {
  const request = result.requests[dimension];
  const limit = result.limits[dimension];
  const limitLayer = result.provenance.limits[dimension];
  // An undeclared limit is unset (no bound), not a limit of 0.
  if (request <= limit || limitLayer === UNSET) return;
  const requestLayer = result.provenance.requests[dimension];
  const unit = dimension === 'cpus' ? 'cores' : 'bytes';
  throw new ResourceConflictError(
    { dimension, request, limit, requestLayer, limitLayer },
    `Resolved ${dimension} request ${request} ${unit} (from ${requestLayer}) exceeds its limit ${limit} ${unit} (from ${limitLayer}); declare a limit at least as large as the request in ${requestLayer}.`,
  );
}
