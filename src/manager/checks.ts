import { coresToMillicores } from '../resources/quantity.js';
import type { ResourceAmount, ResourceCap } from '../resources/types.js';

/** The dimension in which `requests` exceed `cap` on their own (nothing else held), if any. */
export function exceeds(
  cap: ResourceCap | undefined,
  requests: ResourceAmount,
): { dimension: 'cpu' | 'memory'; requested: number; used: number; max: number } | undefined {
  if (cap === undefined) return undefined;
  if (
    cap.maxCpu !== undefined &&
    coresToMillicores(requests.cpus) > coresToMillicores(cap.maxCpu)
  ) {
    return { dimension: 'cpu', requested: requests.cpus, used: 0, max: cap.maxCpu };
  }
  if (cap.maxMemoryBytes !== undefined && requests.memBytes > cap.maxMemoryBytes) {
    return { dimension: 'memory', requested: requests.memBytes, used: 0, max: cap.maxMemoryBytes };
  }
  return undefined;
}

/** @throws TypeError unless `labels` is an array of strings. */
export function checkLabels(name: string, labels: readonly string[]): void {
  if (!Array.isArray(labels) || labels.some((l) => typeof l !== 'string')) {
    throw new TypeError(
      `Expected \`${name}\` to be an array of strings, got \`${String(labels)}\``,
    );
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
