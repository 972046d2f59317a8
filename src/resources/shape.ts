/**
 * The one reader of a resource declaration's shape, shared by
 * {@link resolveResources} and the zod schemas: strict keys (unknown keys are
 * refused, naming the key, the accepted ones and the nearest), the nested form
 * `{ requests?, limits? }` or the flat form `{ cpus?, memory?, <name>? }` (both
 * sides), every value parsed.
 */
import { InvalidInputError, ResourceParseError } from '../errors/index.js';
import type { QuantityOptions } from './convention.js';
import { parseExtendedCount } from './extended.js';
import { extendedNameProblem, unknownKeyMessage } from './names.js';
import { parseCpu, parseMemory } from './parse.js';

/** A parsed spec: cores, whole bytes, whole counts by extended resource name. */
export interface ParsedSpecShape {
  cpus?: number;
  memory?: number;
  [extended: `${string}/${string}`]: number | undefined;
}

/** A parsed layer, always nested. */
export interface ParsedLayerShape {
  requests?: ParsedSpecShape;
  limits?: ParsedSpecShape;
}

/** One problem found, with where it is (for zod paths). */
export interface ShapeIssue {
  path: string[];
  error: Error;
}

const SIDES = ['requests', 'limits'] as const;
const SPEC_KEYS = ['cpus', 'memory'];
const LAYER_KEYS = ['requests', 'limits', 'cpus', 'memory'];
const EXTENDED_NOTE = ', or an extended resource name such as "nvidia.com/gpu"';

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/**
 * Read one layer. Issues are collected (none means the result is complete).
 *
 * @param layer - The declaration as given.
 * @param where - Its name for messages (`job`, `scaler`...).
 */
export function readLayer(
  layer: unknown,
  where: string,
  opts: QuantityOptions,
  issues: ShapeIssue[],
): ParsedLayerShape {
  if (!isPlainObject(layer)) {
    issues.push({
      path: [],
      error: new TypeError(
        `Expected ${where} resources to be an object { requests?, limits? }, got \`${Array.isArray(layer) ? 'array' : String(layer)}\``,
      ),
    });
    return {};
  }
  const keys = Object.keys(layer);
  const nested = keys.some((k) => k === 'requests' || k === 'limits');
  if (!nested) {
    // The flat form declares both sides at once.
    const spec = readSpec(layer, where, undefined, opts, issues, LAYER_KEYS);
    return keys.length === 0 ? {} : { requests: spec, limits: { ...spec } };
  }
  const out: ParsedLayerShape = {};
  for (const key of keys) {
    if (key === 'requests' || key === 'limits') continue;
    const mixed = key === 'cpus' || key === 'memory' || key.includes('/');
    issues.push({
      path: [key],
      error: new InvalidInputError(
        'resources key',
        key,
        mixed
          ? `Key ${JSON.stringify(key)} in ${where} resources mixes the flat form with { requests, limits }: move it into requests (a value on one side is mirrored to the other).`
          : unknownKeyMessage(`${where} resources`, key, ['requests', 'limits']),
      ),
    });
  }
  for (const side of SIDES) {
    const spec = layer[side];
    if (spec === undefined) continue;
    if (!isPlainObject(spec)) {
      issues.push({
        path: [side],
        error: new TypeError(
          `Expected ${where} ${side} to be an object { cpus?, memory?, <extended>? }, got \`${String(spec)}\``,
        ),
      });
      continue;
    }
    out[side] = readSpec(spec, where, side, opts, issues, SPEC_KEYS);
  }
  return out;
}

function readSpec(
  spec: Record<string, unknown>,
  where: string,
  side: string | undefined,
  opts: QuantityOptions,
  issues: ShapeIssue[],
  accepted: readonly string[],
): ParsedSpecShape {
  const out: ParsedSpecShape = {};
  const at = side === undefined ? `${where} resources` : `${where} ${side}`;
  for (const key of Object.keys(spec)) {
    const value = spec[key];
    if (value === undefined) continue;
    const path = side === undefined ? [key] : [side, key];
    const field = side === undefined ? key : `${side}.${key}`;
    try {
      if (key === 'cpus') out.cpus = parseCpu(value as number | string, opts);
      else if (key === 'memory') out.memory = parseMemory(value as number | string, opts);
      else if (key.includes('/')) {
        const problem = extendedNameProblem(key);
        if (problem !== undefined) {
          throw new InvalidInputError(
            'extended resource name',
            key,
            `Invalid extended resource name ${JSON.stringify(key.slice(0, 80))} in ${at}: ${problem}. Expected <dns-prefix>/<name>, e.g. "nvidia.com/gpu".`,
          );
        }
        out[key as `${string}/${string}`] = parseExtendedCount(key, value as number | string);
      } else {
        throw new InvalidInputError(
          'resources key',
          key,
          unknownKeyMessage(at, key, accepted, EXTENDED_NOTE),
        );
      }
    } catch (error) {
      if (error instanceof ResourceParseError) {
        issues.push({
          path,
          error: new ResourceParseError(
            error.kind,
            error.value,
            `${where} ${field}: ${error.message}`,
          ),
        });
      } else {
        issues.push({ path, error: error as Error });
      }
    }
  }
  return out;
}
