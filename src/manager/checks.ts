import type { CapDimension } from '../caps/types.js';
import { InvalidInputError } from '../errors/index.js';
import { nearest as nearestKey } from '../internal/strict-keys.js';
import { isExtendedResourceName } from '../resources/names.js';
import { capToMillicores, coresToMillicores } from '../resources/quantity.js';
import type { ResourceAmount, ResourceCap } from '../resources/types.js';

/**
 * The dimension in which `requests` exceed `cap` on their own (nothing else
 * held), if any. CPU is compared in whole millicores, the request rounded up
 * and the cap down. An extended resource the cap neither caps (`maxExtended`)
 * nor `provides` exceeds it with `max: 0`; with `declared`, so does one asked
 * of no cap at all (a scaler must say it has GPUs before jobs get one there).
 */
export function exceeds(
  cap: ResourceCap | undefined,
  requests: ResourceAmount,
  declared = false,
): { dimension: CapDimension; requested: number; used: number; max: number } | undefined {
  if (cap !== undefined) {
    if (
      cap.maxCpu !== undefined &&
      coresToMillicores(requests.cpus) > capToMillicores(cap.maxCpu)
    ) {
      return { dimension: 'cpu', requested: requests.cpus, used: 0, max: cap.maxCpu };
    }
    if (cap.maxMemoryBytes !== undefined && requests.memBytes > cap.maxMemoryBytes) {
      return {
        dimension: 'memory',
        requested: requests.memBytes,
        used: 0,
        max: cap.maxMemoryBytes,
      };
    }
  }
  if (cap === undefined && !declared) return undefined;
  for (const [name, count] of Object.entries(requests.extended ?? {})) {
    if (count <= 0 || !isExtendedResourceName(name)) continue;
    const max = cap?.maxExtended?.[name];
    if (max !== undefined) {
      if (count > max) return { dimension: name, requested: count, used: 0, max };
    } else if (!(cap?.provides ?? []).includes(name)) {
      return { dimension: name, requested: count, used: 0, max: 0 };
    }
  }
  return undefined;
}

/**
 * @throws TypeError unless `labels` is an array of at most {@link MAX_LABELS}
 *   strings of at most {@link MAX_LABEL_LENGTH} characters each.
 */
export function checkLabels(name: string, labels: readonly string[]): void {
  if (!Array.isArray(labels) || labels.some((l) => typeof l !== 'string')) {
    throw new TypeError(
      `Expected \`${name}\` to be an array of strings, got \`${String(labels).slice(0, 80)}\``,
    );
  }
  if (labels.length > MAX_LABELS) {
    throw new InvalidInputError(
      name,
      labels.length,
      `Expected \`${name}\` to hold at most ${MAX_LABELS} labels, got ${labels.length}`,
    );
  }
  for (const label of labels) {
    if (label.length > MAX_LABEL_LENGTH) {
      throw new InvalidInputError(
        name,
        label.slice(0, 64),
        `Expected each of \`${name}\` to be at most ${MAX_LABEL_LENGTH} characters, got one of ${label.length}`,
      );
    }
  }
}

/** `value`, or `fallback` when undefined. @throws TypeError unless finite and > 0. */
export function positive(name: string, value: number | undefined, fallback: number): number {
  if (value === undefined) return fallback;
  if (typeof value !== 'number' || !Number.isFinite(value) || value <= 0) {
    throw new TypeError(`Expected \`${name}\` to be a finite number > 0, got \`${String(value)}\``);
  }
  return value;
}

/** `value`, or `fallback` when undefined. @throws TypeError unless finite and >= 0. */
export function nonNegative(name: string, value: number | undefined, fallback: number): number {
  if (value === undefined) return fallback;
  if (typeof value !== 'number' || !Number.isFinite(value) || value < 0) {
    throw new TypeError(
      `Expected \`${name}\` to be a finite number >= 0, got \`${String(value)}\``,
    );
  }
  return value;
}

/** The longest agent id, job id or run id the manager accepts. */
export const MAX_ID_LENGTH = 253;
/** The most labels (or excluded labels) one request may name. */
export const MAX_LABELS = 64;
/** The longest label the manager accepts. */
export const MAX_LABEL_LENGTH = 253;

/** @throws TypeError unless `value` is a non-empty string of at most {@link MAX_ID_LENGTH} characters. */
export function checkId(name: string, value: unknown): asserts value is string {
  if (typeof value === 'string' && value.length > MAX_ID_LENGTH) {
    throw new InvalidInputError(
      name,
      value,
      `Expected \`${name}\` to be at most ${MAX_ID_LENGTH} characters, got a string of ${value.length}`,
    );
  }
  if (typeof value !== 'string' || value === '') {
    const shown = String(value);
    throw new TypeError(
      `Expected \`${name}\` to be a non-empty string of at most ${MAX_ID_LENGTH} characters, got \`${shown}\``,
    );
  }
}

const RESOURCE_KEYS = ['requests', 'limits'] as const;
const SPEC_KEYS = ['cpus', 'memory'] as const;
// Beside `cpus` and `memory`, a spec may name extended resources
// (`"nvidia.com/gpu": 1`); their values are checked when resources resolve.

/**
 * A job's resource declaration must be `{ requests?, limits? }`, each
 * `{ cpus?, memory? }`: an unknown key (a typo such as `reqeusts`, or the flat
 * `{ cpus, memory }` form that only config layers accept) is refused, naming it.
 * @throws TypeError for any other shape.
 */
export function checkJobResources(value: unknown): void {
  if (value === undefined) return;
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new TypeError(
      `Expected \`resources\` to be an object { requests?, limits? }, got \`${String(value)}\``,
    );
  }
  for (const key of Object.keys(value)) {
    if (!(RESOURCE_KEYS as readonly string[]).includes(key)) {
      const flat = (SPEC_KEYS as readonly string[]).includes(key);
      throw new InvalidInputError(
        'resources',
        key,
        `Unknown key \`resources.${key.slice(0, 64)}\`; expected one of ${RESOURCE_KEYS.join(', ')}${flat ? ` (a job declares { requests: { ${key} } }: the flat form is not accepted here)` : nearest(key, RESOURCE_KEYS)}`,
      );
    }
    const spec = (value as Record<string, unknown>)[key];
    if (spec === undefined) continue;
    if (typeof spec !== 'object' || spec === null || Array.isArray(spec)) {
      throw new TypeError(
        `Expected \`resources.${key}\` to be an object { cpus?, memory? }, got \`${String(spec)}\``,
      );
    }
    for (const inner of Object.keys(spec)) {
      if (!(SPEC_KEYS as readonly string[]).includes(inner) && !isExtendedResourceName(inner)) {
        throw new InvalidInputError(
          `resources.${key}`,
          inner,
          `Unknown key \`resources.${key}.${inner.slice(0, 64)}\`; expected one of ${SPEC_KEYS.join(', ')} or an extended resource name like "nvidia.com/gpu"${nearest(inner, SPEC_KEYS)}`,
        );
      }
    }
  }
}

function nearest(key: string, accepted: readonly string[]): string {
  const best = nearestKey(key, accepted);
  return best === undefined ? '' : ` (did you mean \`${best}\`?)`;
}
