/**
 * Formatting cores and bytes as canonical quantity strings that the parsers
 * (same convention) read back to the same value.
 */
import { ResourceParseError } from '../errors/index.js';
import { checkConvention, type QuantityOptions } from './convention.js';
import { formatBinarySI, formatDecimalSI } from './kubernetes.js';
import { parseMillicores } from './parse.js';

/**
 * Format cores as a canonical CPU string that {@link parseCpu} (same convention)
 * reads back to the same value.
 * - `binary`: whole cores as `"2"`, less than a core as millicores (`"500m"`),
 *   otherwise a decimal (`"1.5"`).
 * - `kubernetes`: `Quantity.String()` of `resource.NewMilliQuantity(m, DecimalSI)`,
 *   what `kubectl` prints: `"500m"`, `"1500m"`, `"2"`, `"1k"`.
 *
 * @param cores - A finite number of cores >= 0 and at most 2^43 (8796093022208), rounded up
 *   to millicores as {@link parseCpu} does.
 * @param opts - The convention.
 * @throws `ResourceParseError` (`kind: 'cpu'`) for a negative, NaN, infinite or
 *   too large number, as {@link parseCpu} refuses it.
 * @throws TypeError when `cores` is not a number, or for a bad convention.
 *
 * @example
 * ```ts
 * import { formatCpu } from 'scaler-primitives/resources';
 *
 * formatCpu(0.5); // "500m"
 * formatCpu(1.5); // "1.5"
 * formatCpu(1.5, { convention: 'kubernetes' }); // "1500m"
 * ```
 */
export function formatCpu(cores: number, opts?: QuantityOptions): string {
  const convention = checkConvention(opts);
  if (typeof cores !== 'number') {
    throw new TypeError(`Expected \`cores\` to be a number, got \`${typeof cores}\``);
  }
  // The range is parseCpu's, and so is the refusal (a ResourceParseError saying why).
  const milli = parseMillicores(cores);
  if (convention === 'kubernetes') return formatDecimalSI(BigInt(milli), -3);
  if (milli % 1000 === 0) return String(milli / 1000);
  if (milli < 1000) return `${milli}m`;
  const digits = String(milli);
  return `${digits.slice(0, -3)}.${digits.slice(-3).replace(/0+$/, '')}`;
}

const IEC_UNITS = ['', 'Ki', 'Mi', 'Gi', 'Ti', 'Pi'] as const;

/**
 * Format bytes as a canonical memory string that {@link parseMemory} (same
 * convention) reads back to the same value.
 * - `binary`: the largest binary unit that divides it exactly (`"8Gi"`,
 *   `"1536Mi"`), or plain bytes (`"1000"`).
 * - `kubernetes`: `Quantity.String()` of `resource.NewQuantity(bytes, BinarySI)`:
 *   the same, except that below 1024 Kubernetes writes DecimalSI (`1000` is `"1k"`).
 *
 * @param bytes - Whole bytes: a safe integer >= 0.
 * @param opts - The convention.
 * @throws `ResourceParseError` (`kind: 'memory'`) for a negative, fractional,
 *   NaN, infinite or unsafe (past 2^53 - 1) number.
 * @throws TypeError when `bytes` is not a number, or for a bad convention.
 *
 * @example
 * ```ts
 * import { formatMemory } from 'scaler-primitives/resources';
 *
 * formatMemory(8 * 1024 ** 3);  // "8Gi"
 * formatMemory(1.5 * 1024 ** 3); // "1536Mi"
 * formatMemory(1000, { convention: 'kubernetes' }); // "1k"
 * ```
 */
export function formatMemory(bytes: number, opts?: QuantityOptions): string {
  const convention = checkConvention(opts);
  if (typeof bytes !== 'number') {
    throw new TypeError(`Expected \`bytes\` to be a number, got \`${typeof bytes}\``);
  }
  if (!Number.isSafeInteger(bytes) || bytes < 0) {
    throw new ResourceParseError(
      'memory',
      bytes,
      `Cannot format ${String(bytes)} as a memory quantity: expected whole bytes, an integer from 0 to ${Number.MAX_SAFE_INTEGER} (8Pi - 1).`,
    );
  }
  if (convention === 'kubernetes') return formatBinarySI(BigInt(bytes));
  if (bytes === 0) return '0';
  let unit = 0;
  let amount = bytes;
  while (unit < IEC_UNITS.length - 1 && amount % 1024 === 0) {
    amount /= 1024;
    unit++;
  }
  return `${amount}${IEC_UNITS[unit]}`;
}
