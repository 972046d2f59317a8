import { strictOptions } from '../../internal/strict-keys.js';
import { checkCapsOptions } from '../codec.js';

/** The longest request timeout accepted, in milliseconds (one hour). */
export const MAX_TIMEOUT_MS = 3_600_000;

/** Check a `timeout` option: a whole number of milliseconds from 1 to one hour. */
export function checkTimeout(value: unknown): void {
  if (
    value !== undefined &&
    (typeof value !== 'number' || !Number.isInteger(value) || value < 1 || value > MAX_TIMEOUT_MS)
  ) {
    throw new TypeError(
      `Expected \`timeout\` to be a whole number of milliseconds from 1 to ${MAX_TIMEOUT_MS}, got \`${String(value)}\``,
    );
  }
}

/** Check that `value` has the methods the adapter calls on it (a nats.js connection or KV). */
export function checkHandle(value: unknown, name: string, methods: readonly string[]): void {
  const missing =
    typeof value !== 'object' || value === null
      ? methods
      : methods.filter((m) => typeof (value as Record<string, unknown>)[m] !== 'function');
  if (missing.length > 0) {
    throw new TypeError(
      `Expected \`${name}\` to be a nats.js v3 ${name === 'nc' ? 'connection' : 'KV handle'} (with ${methods.join(', ')}), got \`${value === null ? 'null' : typeof value}\``,
    );
  }
}

/** Check an options object of the NATS adapter: known keys, booleans and timeout typed. */
export function checkNatsOptions<T extends object>(
  options: unknown,
  keys: readonly string[],
  what: string,
): T {
  const checked = checkCapsOptions<Record<string, unknown>>(
    strictOptions(options, keys, what),
    keys,
    what,
  );
  checkTimeout(checked.timeout);
  return checked as T;
}
