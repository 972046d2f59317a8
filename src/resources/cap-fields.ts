/**
 * The one table of cap fields. Every place that must know the fields of a
 * {@link ResourceCap} derives from {@link CAP_FIELDS}: the configuration schema
 * (`resourceCapSchema`), the pool document's schema and its cap checks
 * (`ledger/document/`), the combine wire (`ledger/wire.ts`), the cap
 * tracker (`caps/`) and the dimension a refusal names ({@link CapDimension}).
 * A field of `ResourceCap` missing here, or a field here that `ResourceCap`
 * lacks, fails to compile, and so does a dimension that the fit checks of the
 * ledger or the cap tracker do not handle.
 *
 * Adding a cap field: add it to `ResourceCap` (./types.ts), give it an entry
 * here (with a `feature` name, so that a copy of the library that does not know
 * it refuses a pool that uses it instead of granting past it), and, when it
 * limits a new dimension, the check in `ledger/document/fit.ts` and
 * `caps/scope.ts` the compiler asks for.
 */
import { z } from 'zod';
import { InvalidInputError } from '../errors/index.js';
import type { QuantityOptions } from './convention.js';
import { parseExtendedCount } from './extended.js';
import { deviceIdsProblem, extendedNameProblem, validateExtendedResourceName } from './names.js';
import { parseCpu, parseMemory } from './parse.js';
import { capToMillicores } from './quantity.js';
import type { ResourceCap } from './types.js';

/**
 * The dimensions a cap can refuse on: CPU, memory, the number of reservations
 * (`agents`), or an extended resource by name (`nvidia.com/gpu`).
 */
export type CapDimension = 'cpu' | 'memory' | 'agents' | `${string}/${string}`;

/**
 * The rules of one cap field, for its value `V` (the field's type in {@link ResourceCap}).
 */
interface CapField<V> {
  /**
   * The dimension a request is refused on when this field does not fit:
   * `extended` for a field read per extended resource (the dimension is the
   * resource's name).
   */
  dimension: 'cpu' | 'memory' | 'agents' | 'extended';
  /**
   * `undefined` for a field of the baseline (every field up to 0.1, which every
   * writer that reads `capFeatures` knows); else the feature a pool document
   * lists in `capFeatures` when its cap sets the field.
   */
  feature: string | undefined;
  /** The field as stored in a pool document and sent on the combine wire. */
  stored: z.ZodType<V>;
  /** The configuration keys this field is read from, with their schemas. */
  config(opts: QuantityOptions): Record<string, z.ZodType>;
  /** The field's value from the parsed configuration keys (and the fields before it). */
  fromConfig(parsed: Record<string, unknown>, done: ResourceCap): Partial<ResourceCap>;
  /**
   * Validate the field of a cap given to `registerPool` (`done` holds the
   * fields before it, validated); returns the fields to set.
   */
  normalize(value: unknown, done: ResourceCap): Partial<ResourceCap>;
  /** True when two caps limit this field alike, compared as enforced. */
  same(a: V | undefined, b: V | undefined): boolean;
  /** The field for messages (`maxCpu: 4`), or undefined when it limits nothing to show. */
  describe(value: V): string | undefined;
}

const finiteNonNegative = z.number().finite().nonnegative();
const storedCount = z.number().int().nonnegative().max(Number.MAX_SAFE_INTEGER);
const storedName = z
  .string()
  .refine((name) => extendedNameProblem(name) === undefined, 'not an extended resource name');
const storedCounts = z.record(storedName, storedCount);
const storedDeviceIds = z.record(
  storedName,
  z.array(z.string()).refine((ids) => deviceIdsProblem(ids, 0) === undefined, 'not device ids'),
);

/** The stored forms a pool document's rows share with its cap (counts, names, device ids). */
export const STORED = {
  finiteNonNegative,
  count: storedCount,
  extendedCounts: storedCounts,
  deviceIds: storedDeviceIds,
} as const;

const configName = z.string().superRefine((name, ctx) => {
  const problem = extendedNameProblem(name);
  if (problem !== undefined) {
    ctx.addIssue({
      code: 'custom',
      message: `Invalid extended resource name ${JSON.stringify(name.slice(0, 80))}: ${problem}. Expected <dns-prefix>/<name>, e.g. "nvidia.com/gpu".`,
    });
  }
});

const configCount = z.union([z.number(), z.string()]).transform((value, ctx) => {
  try {
    return parseExtendedCount('the cap', value);
  } catch (error) {
    ctx.addIssue({ code: 'custom', message: (error as Error).message });
    return z.NEVER;
  }
});

// The ids of one resource's devices: unique device ids, 1 to MAX_DEVICE_IDS of them.
const configDeviceIds = z.array(z.string()).superRefine((ids, ctx) => {
  const problem = deviceIdsProblem(ids);
  if (problem !== undefined) ctx.addIssue({ code: 'custom', message: problem });
});

function quantity(parse: (value: number | string) => number) {
  return z.union([z.number(), z.string()]).transform((value, ctx) => {
    try {
      return parse(value);
    } catch (error) {
      ctx.addIssue({ code: 'custom', message: (error as Error).message });
      return z.NEVER;
    }
  });
}

// A field read from the configuration key of its own name, as it is.
function sameKey<K extends keyof ResourceCap>(key: K) {
  return (parsed: Record<string, unknown>): Partial<ResourceCap> =>
    parsed[key] === undefined ? {} : { [key]: parsed[key] };
}

function checkAmount(name: string, value: unknown): number {
  if (typeof value !== 'number' || !Number.isFinite(value) || value < 0) {
    throw new TypeError(
      `Expected \`${name}\` to be a finite number >= 0, got \`${String(value)}\``,
    );
  }
  return value;
}

function checkCount(name: string, value: unknown): number {
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 0) {
    throw new TypeError(`Expected \`${name}\` to be a whole number >= 0, got \`${String(value)}\``);
  }
  return value;
}

/** A memory cap in whole bytes, rounded down (saturating at `Number.MAX_SAFE_INTEGER`). */
export function capBytes(maxMemoryBytes: number): number {
  return Math.min(Math.floor(maxMemoryBytes), Number.MAX_SAFE_INTEGER);
}

/**
 * Every field of a cap, once, in the order documents write them. `satisfies`
 * fails to compile when a field of `ResourceCap` is missing here or one here is
 * not in `ResourceCap`.
 */
export const CAP_FIELDS = {
  maxCpu: {
    dimension: 'cpu',
    feature: undefined,
    stored: finiteNonNegative,
    config: (opts) => ({ maxCpu: quantity((v) => parseCpu(v, opts)).optional() }),
    fromConfig: sameKey('maxCpu'),
    normalize: (value) => ({ maxCpu: checkAmount('cap.maxCpu', value) }),
    same: (a, b) =>
      a === undefined || b === undefined ? a === b : capToMillicores(a) === capToMillicores(b),
    describe: (value) => `maxCpu: ${value}`,
  },
  maxMemoryBytes: {
    dimension: 'memory',
    feature: undefined,
    stored: finiteNonNegative,
    config: (opts) => ({
      maxMemory: quantity((v) => parseMemory(v, opts)).optional(),
      maxMemoryBytes: z.number().int().nonnegative().optional(),
    }),
    fromConfig: (parsed) => {
      const memory = parsed.maxMemory ?? parsed.maxMemoryBytes;
      return memory === undefined ? {} : { maxMemoryBytes: memory as number };
    },
    normalize: (value) => ({ maxMemoryBytes: checkAmount('cap.maxMemoryBytes', value) }),
    same: (a, b) => (a === undefined || b === undefined ? a === b : capBytes(a) === capBytes(b)),
    describe: (value) => `maxMemoryBytes: ${value}`,
  },
  maxExtended: {
    dimension: 'extended',
    feature: undefined,
    stored: storedCounts,
    config: () => ({ maxExtended: z.record(configName, configCount).optional() }),
    fromConfig: sameKey('maxExtended'),
    normalize: (value) => {
      if (typeof value !== 'object' || value === null) {
        throw new TypeError(
          `Expected \`cap.maxExtended\` to be an object of counts, got \`${String(value)}\``,
        );
      }
      const max: Record<string, number> = {};
      for (const [name, n] of Object.entries(value)) {
        max[validateExtendedResourceName(name, 'cap.maxExtended')] = checkCount(
          `cap.maxExtended["${name}"]`,
          n,
        );
      }
      return { maxExtended: max };
    },
    same: (a = {}, b = {}) => {
      const keys = Object.keys(a);
      if (keys.length !== Object.keys(b).length) return false;
      for (const key of keys) if (a[key] !== b[key]) return false;
      return true;
    },
    describe: (value) =>
      Object.keys(value).length > 0 ? `maxExtended: ${JSON.stringify(value)}` : undefined,
  },
  provides: {
    dimension: 'extended',
    feature: undefined,
    stored: z.array(storedName),
    config: () => ({ provides: z.array(configName).max(1024).optional() }),
    fromConfig: sameKey('provides'),
    normalize: (value) => {
      if (!Array.isArray(value)) {
        throw new TypeError(
          `Expected \`cap.provides\` to be an array of resource names, got \`${String(value)}\``,
        );
      }
      return { provides: value.map((name) => validateExtendedResourceName(name, 'cap.provides')) };
    },
    same: (a = [], b = []) => {
      const pa = new Set(a);
      const pb = new Set(b);
      if (pa.size !== pb.size) return false;
      for (const name of pa) if (!pb.has(name)) return false;
      return true;
    },
    describe: (value) => (value.length > 0 ? `provides: ${JSON.stringify(value)}` : undefined),
  },
  maxAgents: {
    dimension: 'agents',
    feature: undefined,
    stored: storedCount,
    config: () => ({ maxAgents: storedCount.optional() }),
    fromConfig: sameKey('maxAgents'),
    normalize: (value) => ({ maxAgents: checkCount('cap.maxAgents', value) }),
    same: (a, b) => a === b,
    describe: (value) => `maxAgents: ${value}`,
  },
  devices: {
    dimension: 'extended',
    feature: undefined,
    stored: storedDeviceIds,
    config: () => ({ devices: z.record(configName, configDeviceIds).optional() }),
    // A resource with device ids is capped by their number.
    fromConfig: (parsed, done) => {
      const devices = parsed.devices as Record<string, readonly string[]> | undefined;
      if (devices === undefined) return {};
      const max: Record<string, number> = { ...done.maxExtended };
      for (const [name, ids] of Object.entries(devices)) max[name] = ids.length;
      return { maxExtended: max, devices };
    },
    normalize: (value, done) => {
      const max: Record<string, number> = { ...done.maxExtended };
      return { devices: normalizeDevices(value, max), maxExtended: max };
    },
    same: (a = {}, b = {}) => {
      const names = Object.keys(a);
      if (names.length !== Object.keys(b).length) return false;
      for (const name of names) {
        const ia = a[name]!;
        const ib = b[name];
        if (ib === undefined || ia.length !== ib.length) return false;
        for (let i = 0; i < ia.length; i++) if (ia[i] !== ib[i]) return false;
      }
      return true;
    },
    describe: (value) =>
      Object.keys(value).length > 0 ? `devices: ${JSON.stringify(value)}` : undefined,
  },
} as const satisfies { [K in keyof ResourceCap]-?: CapField<NonNullable<ResourceCap[K]>> };

/** The name of a cap field. */
export type CapFieldName = keyof typeof CAP_FIELDS;

/** The kind of dimension a cap field limits (`extended`: per resource name). */
export type CapFieldDimension = (typeof CAP_FIELDS)[CapFieldName]['dimension'];

// The public CapDimension is written out (so users read it as it is); it must
// be exactly the dimensions of the table, the extended ones by resource name.
type TableDimension = Exclude<CapFieldDimension, 'extended'> | `${string}/${string}`;
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
const DIMENSION_MATCHES_TABLE: Same<CapDimension, TableDimension> = true;
void DIMENSION_MATCHES_TABLE;

// The entries, typed for the loops below (each entry handles its own value).
const ENTRIES = Object.entries(CAP_FIELDS) as Array<[CapFieldName, CapField<unknown>]>;

/** The field names of a cap, in the order documents write them. */
export const CAP_FIELD_NAMES: readonly CapFieldName[] = ENTRIES.map(([name]) => name);

/** The dimensions that are not extended resource names: `cpu`, `memory`, `agents`. */
export const SCALAR_DIMENSIONS: readonly string[] = [
  ...new Set(
    ENTRIES.map(([, field]) => field.dimension).filter((dimension) => dimension !== 'extended'),
  ),
];

/** The cap features this copy of the library knows (the fields beyond the baseline). */
export const KNOWN_CAP_FEATURES: readonly string[] = ENTRIES.flatMap(([, field]) =>
  field.feature === undefined ? [] : [field.feature],
);

/**
 * The features a cap uses beyond the baseline, sorted: what a pool document
 * lists in `capFeatures` (empty for a cap of baseline fields only).
 */
export function capFeaturesOf(cap: ResourceCap): string[] {
  const features = new Set<string>();
  for (const [name, field] of ENTRIES) {
    if (field.feature !== undefined && cap[name] !== undefined) features.add(field.feature);
  }
  return [...features].sort();
}

/** The shape of a stored cap (pool document, combine wire): each field optional. */
export function storedCapShape(): { [K in CapFieldName]: z.ZodOptional<z.ZodType> } {
  return Object.fromEntries(ENTRIES.map(([name, field]) => [name, field.stored.optional()])) as {
    [K in CapFieldName]: z.ZodOptional<z.ZodType>;
  };
}

/** The shape of a cap in configuration: every key each field is read from. */
export function configCapShape(opts: QuantityOptions): Record<string, z.ZodType> {
  return Object.assign({}, ...ENTRIES.map(([, field]) => field.config(opts)));
}

/** A cap from its parsed configuration keys. */
export function capFromConfig(parsed: Record<string, unknown>): ResourceCap {
  const out: ResourceCap = {};
  for (const [, field] of ENTRIES) Object.assign(out, field.fromConfig(parsed, out));
  return out;
}

/**
 * Validate a cap given to `registerPool` and keep only its known fields.
 *
 * @throws TypeError when a field is present and not a finite number >= 0 (whole
 *   for counts), or `maxExtended`/`provides` are not an object/array.
 * @throws InvalidInputError for an invalid extended resource name or bad device ids.
 */
export function normalizeCap(cap: ResourceCap): ResourceCap {
  if (typeof cap !== 'object' || cap === null) {
    throw new TypeError(`Expected \`cap\` to be an object, got \`${String(cap)}\``);
  }
  const out: ResourceCap = {};
  for (const [name, field] of ENTRIES) {
    const value = cap[name];
    if (value !== undefined) Object.assign(out, field.normalize(value, out));
  }
  return out;
}

/**
 * True when two caps limit the same dimensions to the same amounts, compared as
 * they are enforced: whole millicores and whole bytes, rounded down.
 */
export function capsEqual(a: ResourceCap, b: ResourceCap): boolean {
  for (const [name, field] of ENTRIES) if (!field.same(a[name], b[name])) return false;
  return true;
}

/** Human form of a cap for messages: `{ maxCpu: 4, maxMemoryBytes: 8589934592 }` or `no cap`. */
export function describeCap(cap: ResourceCap): string {
  const parts: string[] = [];
  for (const [name, field] of ENTRIES) {
    const value = cap[name];
    const part = value === undefined ? undefined : field.describe(value);
    if (part !== undefined) parts.push(part);
  }
  return parts.length ? `{ ${parts.join(', ')} }` : '{} (no limit)';
}

/**
 * Validate the `devices` of a cap against its `maxExtended`, and fill in a
 * missing `maxExtended` count from the number of ids.
 *
 * @param devices - The cap's `devices` field (unchecked input).
 * @param maxExtended - The cap's validated `maxExtended`, completed in place.
 * @returns The validated ids by resource name.
 * @throws InvalidInputError naming the resource and the bad value: not an
 *   object of arrays, a bad or repeated id, more than `MAX_DEVICE_IDS`
 *   ids, or a `maxExtended` count that differs from the number of ids.
 */
function normalizeDevices(
  devices: unknown,
  maxExtended: Record<string, number>,
): Record<string, readonly string[]> {
  if (typeof devices !== 'object' || devices === null || Array.isArray(devices)) {
    throw new InvalidInputError(
      'cap.devices',
      devices,
      `Expected \`cap.devices\` to be an object of device id arrays by extended resource name, e.g. { "nvidia.com/gpu": ["0", "1"] }, got \`${String(devices)}\``,
    );
  }
  const out: Record<string, readonly string[]> = {};
  for (const [name, ids] of Object.entries(devices)) {
    validateExtendedResourceName(name, 'cap.devices');
    const where = `cap.devices[${JSON.stringify(name)}]`;
    const problem = deviceIdsProblem(ids);
    if (problem !== undefined) {
      throw new InvalidInputError(where, ids, `Invalid \`${where}\`: ${problem}`);
    }
    const count = maxExtended[name];
    if (count === undefined) maxExtended[name] = ids.length;
    else if (count !== ids.length) {
      throw new InvalidInputError(
        `cap.maxExtended[${JSON.stringify(name)}]`,
        count,
        `\`cap.maxExtended[${JSON.stringify(name)}]\` is ${count} but \`${where}\` lists ${ids.length} device ids; give the same number, or leave maxExtended out for that resource (it is then the number of ids)`,
      );
    }
    out[name] = [...(ids as string[])];
  }
  return out;
}
