/**
 * kici's resource quantities, read with kici's grammar and rounding.
 */
import { InvalidInputError, ResourceParseError } from '../errors/index.js';
import {
  parseCpu,
  parseMemory,
  type ResourceCap,
  type resourceRequestSchema,
} from '../resources/index.js';

// The core's parsed form (cores, whole bytes), as `resourceRequestSchema` outputs it.
type ParsedResourceRequest = ReturnType<(typeof resourceRequestSchema)['parse']>;
type ParsedResourceSpec = NonNullable<ParsedResourceRequest['requests']>;

/**
 * A kici `{ cpus?, memory? }`: cores, and memory as `"512m"`, `"2g"`, `"1024k"` (or bytes).
 */
export interface KiciResourceSpec {
  /** Cores. */
  cpus?: number;
  /** `"<number><k|m|g>"` (1024-based, case-insensitive, blanks allowed before the unit), or bytes. */
  memory?: string | number;
}

/**
 * A kici resource declaration: nested `{ requests?, limits? }`.
 */
export interface KiciResourceRequest {
  /** What the job needs; summed by caps. */
  requests?: KiciResourceSpec;
  /** What the job may use at most. */
  limits?: KiciResourceSpec;
}

/**
 * A kici cap: as written in its YAML (`maxMemory: "64g"`) or as its loader returns it (`maxMemoryBytes`).
 */
export interface KiciResourceCap {
  /** Maximum summed cores. */
  maxCpu?: number;
  /** Maximum summed memory as a kici memory string. */
  maxMemory?: string;
  /** Maximum summed memory in bytes (kici's parsed form). */
  maxMemoryBytes?: number;
}

const KICI_MEMORY = /^(\d+(?:\.\d+)?)\s*([kmgKMG])$/;
const FACTOR: Record<string, number> = { k: 1024, m: 1024 * 1024, g: 1024 * 1024 * 1024 };
const MEMORY_FORMS =
  'kici\'s form "<number><unit>" with unit k, m or g (1024-based, any case, blanks allowed before the unit): "512m", "512 m", "2g", "1.5G", "1024k"; or a number of bytes';

/**
 * Parse a kici memory string to bytes exactly as kici's `parseMemoryString` does:
 * `<digits>[.<digits>]`, optional blanks, one unit `k`, `m` or `g` (any case, 1024-based),
 * and the product rounded **down** (kici computes `Math.floor(value * 1024 * ...)` in
 * floating point; so does this function, so fractional values land on the same byte).
 * A number is a byte count and goes through `parseMemory` (a fraction rounds up there).
 *
 * @param value - `"512m"`, `"512 m"`, `"2g"`, `"1024k"`, `"0.3m"` or a number of bytes.
 * @returns Whole bytes.
 * @throws `ResourceParseError` for anything else (`"2gb"`, `"2Gi"`, `"2"`, `" 2g"`,
 *   negatives), naming the value and the accepted forms, or a result past 2^53 - 1.
 *
 * @example
 * ```ts
 * import { parseKiciMemory } from 'scaler-primitives/kici';
 *
 * parseKiciMemory('512 m'); // 536870912
 * parseKiciMemory('0.3m');  // 314572 (kici rounds down; parseMemory('0.3m') gives 314573)
 * ```
 */
export function parseKiciMemory(value: string | number): number {
  if (typeof value === 'number') return parseMemory(value);
  if (typeof value !== 'string') {
    throw new TypeError(
      `Expected a kici memory quantity (string or number), got \`${typeof value}\``,
    );
  }
  const match = KICI_MEMORY.exec(value);
  if (!match) {
    throw new ResourceParseError(
      'memory',
      value,
      `Invalid kici memory quantity ${JSON.stringify(value)}. Expected ${MEMORY_FORMS}.`,
    );
  }
  const factor = FACTOR[match[2]!.toLowerCase()]!;
  // kici's arithmetic, step by step (1024 at a time), then round down.
  let product = Number.parseFloat(match[1]!);
  for (let f = factor; f > 1; f /= 1024) product *= 1024;
  const bytes = Math.floor(product);
  if (!Number.isSafeInteger(bytes)) {
    throw new ResourceParseError(
      'memory',
      value,
      `kici memory quantity ${JSON.stringify(value)} is too large: at most ${Number.MAX_SAFE_INTEGER} bytes can be counted exactly.`,
    );
  }
  return bytes;
}

function plainObject(value: unknown, what: string): Record<string, unknown> {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new InvalidInputError(
      what,
      value,
      `Expected ${what} to be an object, got ${JSON.stringify(value)}.`,
    );
  }
  return value as Record<string, unknown>;
}

function onlyKeys(value: Record<string, unknown>, allowed: readonly string[], what: string): void {
  for (const key of Object.keys(value)) {
    if (!allowed.includes(key)) {
      throw new InvalidInputError(
        what,
        value,
        `Unknown key ${JSON.stringify(key)} in ${what}; expected only ${allowed.join(', ')}.`,
      );
    }
  }
}

function spec(value: unknown, what: string): ParsedResourceSpec {
  const input = plainObject(value, what);
  onlyKeys(input, ['cpus', 'memory'], what);
  const out: ParsedResourceSpec = {};
  if (input.cpus !== undefined) {
    if (typeof input.cpus !== 'number') {
      throw new ResourceParseError(
        'cpu',
        input.cpus,
        `Expected ${what}.cpus to be a number of cores (kici's form), got ${JSON.stringify(input.cpus)}.`,
      );
    }
    out.cpus = parseCpu(input.cpus);
  }
  if (input.memory !== undefined) out.memory = parseKiciMemory(input.memory as string | number);
  return out;
}

/**
 * Translate a kici resource declaration into this library's parsed form (cores, whole
 * bytes, always nested). The flat form `{ cpus, memory }` declares both sides, as in kici
 * (an empty flat object declares nothing). Memory strings use {@link parseKiciMemory}.
 *
 * @param resources - kici's nested `{ requests?, limits? }` or flat `{ cpus?, memory? }`.
 * @returns `{ requests?, limits? }` with numbers, ready for a `ScalerManager` config or
 *   `resolveResources`.
 * @throws `ResourceParseError` for a bad quantity; `InvalidInputError` for an
 *   unknown key (kici refuses those too) or a value that is not an object.
 */
export function fromKiciResources(
  resources: KiciResourceRequest | KiciResourceSpec,
): ParsedResourceRequest {
  const input = plainObject(resources, 'resources');
  if ('cpus' in input || 'memory' in input) {
    const flat = spec(input, 'resources');
    if (flat.cpus === undefined && flat.memory === undefined) return {};
    return { requests: { ...flat }, limits: { ...flat } };
  }
  onlyKeys(input, ['requests', 'limits'], 'resources');
  const out: ParsedResourceRequest = {};
  if (input.requests !== undefined) out.requests = spec(input.requests, 'resources.requests');
  if (input.limits !== undefined) out.limits = spec(input.limits, 'resources.limits');
  return out;
}

/**
 * Translate a kici cap (`{ maxCpu?, maxMemory? }` as written, or `{ maxCpu?, maxMemoryBytes? }`
 * as kici's loader returns it) into a {@link ResourceCap}.
 *
 * @param cap - The kici cap.
 * @returns `{ maxCpu?, maxMemoryBytes? }`.
 * @throws `ResourceParseError` for a bad quantity; `InvalidInputError` for an
 *   unknown key, both `maxMemory` and `maxMemoryBytes`, or a value that is not an object.
 */
export function fromKiciCap(cap: KiciResourceCap): ResourceCap {
  const input = plainObject(cap, 'cap');
  onlyKeys(input, ['maxCpu', 'maxMemory', 'maxMemoryBytes'], 'cap');
  if (input.maxMemory !== undefined && input.maxMemoryBytes !== undefined) {
    throw new InvalidInputError('cap', cap, 'Give maxMemory or maxMemoryBytes in a cap, not both.');
  }
  const out: ResourceCap = {};
  if (input.maxCpu !== undefined) {
    if (typeof input.maxCpu !== 'number') {
      throw new ResourceParseError(
        'cpu',
        input.maxCpu,
        `Expected cap.maxCpu to be a number of cores (kici's form), got ${JSON.stringify(input.maxCpu)}.`,
      );
    }
    out.maxCpu = parseCpu(input.maxCpu);
  }
  if (input.maxMemory !== undefined)
    out.maxMemoryBytes = parseKiciMemory(input.maxMemory as string);
  if (input.maxMemoryBytes !== undefined) {
    if (typeof input.maxMemoryBytes !== 'number') {
      throw new ResourceParseError(
        'memory',
        input.maxMemoryBytes,
        `Expected cap.maxMemoryBytes to be a number of bytes, got ${JSON.stringify(input.maxMemoryBytes)}.`,
      );
    }
    out.maxMemoryBytes = parseMemory(input.maxMemoryBytes);
  }
  return out;
}
