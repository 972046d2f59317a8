import { ResourceParseError } from '../errors/index.js';
import { decimalOfNumber, MAX_QUANTITY_LENGTH, wholeOf } from './decimal.js';
import { parseKubernetesQuantity } from './kubernetes.js';

/**
 * Parse the amount of an extended resource (`nvidia.com/gpu`): a whole count,
 * as Kubernetes requires. A number must be a safe integer >= 0; a string is read
 * in the Kubernetes quantity grammar (`"2"`, `"1k"`) and must come out whole.
 *
 * @param name - The resource name, for the message.
 * @param value - The amount.
 * @returns The count (a safe integer >= 0).
 * @throws `ResourceParseError` (`kind: 'extended'`) for fractions, negatives,
 *   malformed or over-long strings and counts beyond `Number.MAX_SAFE_INTEGER`.
 * @throws TypeError when `value` is neither a number nor a string.
 *
 * @example
 * ```ts
 * import { parseExtendedCount } from 'scaler-primitives/resources';
 *
 * parseExtendedCount('nvidia.com/gpu', 2);   // 2
 * parseExtendedCount('nvidia.com/gpu', '1'); // 1
 * parseExtendedCount('nvidia.com/gpu', 0.5); // throws: whole numbers only
 * ```
 */
export function parseExtendedCount(name: string, value: number | string): number {
  if (typeof value === 'number') {
    if (!Number.isFinite(value) || value < 0) throw countError(name, value, 'must be >= 0');
    const count = wholeOf(decimalOfNumber(value));
    if (count === undefined) throw countError(name, value, notWhole(value));
    return count;
  }
  if (typeof value !== 'string') {
    throw new TypeError(
      `Expected an amount of ${name} (number or string), got \`${typeof value}\``,
    );
  }
  if (value.length > MAX_QUANTITY_LENGTH) {
    throw countError(name, value, `is longer than ${MAX_QUANTITY_LENGTH} characters`);
  }
  const parsed = parseKubernetesQuantity(value);
  if (!parsed.ok) throw countError(name, value, `is not a quantity (${parsed.reason})`);
  const { negative, magnitude } = parsed.quantity;
  if (negative && magnitude.coefficient !== 0n) throw countError(name, value, 'must be >= 0');
  const count = wholeOf(magnitude);
  if (count === undefined) throw countError(name, value, notWhole(value));
  return count;
}

function notWhole(value: number | string): string {
  return `must be a whole number no larger than ${Number.MAX_SAFE_INTEGER} (extended resources are counted, not divided; got ${typeof value === 'string' ? JSON.stringify(value) : value})`;
}

function countError(name: string, value: unknown, detail: string): ResourceParseError {
  const shown =
    typeof value === 'string'
      ? value.length > MAX_QUANTITY_LENGTH
        ? `${JSON.stringify(value.slice(0, 16))}... (${value.length} characters)`
        : JSON.stringify(value)
      : String(value);
  return new ResourceParseError(
    'extended',
    value,
    `Invalid amount ${shown} of ${name}: it ${detail}. Expected a whole count >= 0, e.g. 1 or "2".`,
  );
}
