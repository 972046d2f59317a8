/**
 * The systemd value grammar for `CPUQuota=` and `MemoryMax=`, as a strict
 * subset of what systemd accepts (checked against systemd 252's
 * `config_parse_cpu_quota`, `config_parse_memory_limit`, `parse_permyriad` and
 * `parse_size`; see docs/agent-caps.md). Every value accepted here is one that
 * systemd applies; forms systemd also takes but that only invite mistakes
 * (`‰`, `‱`, a `B` suffix, spaces, leading zeros, fractional bytes, compound
 * sizes such as `1G 512M`) are refused.
 */

import { strictObject } from '../internal/strict-keys.js';

// systemd parses the integer part of a percentage into an int: permyriad <= INT_MAX.
const INT_MAX = 2_147_483_647;
const UINT64_MAX = (1n << 64n) - 1n;

const PERCENT = /^(0|[1-9][0-9]{0,9})(?:\.([0-9]{1,2}))?%$/;
// A fraction needs a unit (a fractional byte count is truncated by systemd);
// at most 18 fraction digits so systemd's strtoull of them cannot overflow.
const SIZE = /^(0|[1-9][0-9]{0,19})(?:(?:\.([0-9]{1,18}))?([KMGTPE]))?$/;

const UNIT_SHIFT = { K: 10n, M: 20n, G: 30n, T: 40n, P: 50n, E: 60n } as const;
type Unit = keyof typeof UNIT_SHIFT;

/** A `MemoryMax=` value, parsed. */
export type MemoryMaxValue =
  | { kind: 'bytes'; bytes: bigint }
  | { kind: 'infinity' }
  | { kind: 'percent'; permyriad: number };

/** `"12.5%"` -> 1250 (hundredths of a percent), or `undefined` when not a percentage. */
function permyriad(value: string): number | undefined {
  const match = PERCENT.exec(value);
  if (match === null) return undefined;
  const whole = Number(match[1]);
  const hundredths = Number((match[2] ?? '').padEnd(2, '0'));
  const result = whole * 100 + hundredths;
  return result <= INT_MAX ? result : undefined;
}

/**
 * Parse a `CPUQuota=` value into hundredths of a percent of one CPU
 * (`"400%"` -> 40000), or `undefined` when systemd would not apply it.
 */
export function parseCpuQuota(value: string): number | undefined {
  const result = permyriad(value);
  return result !== undefined && result > 0 ? result : undefined;
}

/**
 * Parse a `MemoryMax=` value, or return `undefined` when systemd would not
 * apply it (or it is a percentage and `allowPercent` is false).
 */
export function parseMemoryMax(value: string, allowPercent: boolean): MemoryMaxValue | undefined {
  if (value === 'infinity') return { kind: 'infinity' };
  if (value.endsWith('%')) {
    if (!allowPercent) return undefined;
    // systemd reads 0% as "not a percentage" and then fails to parse it as a
    // size; above 100% parse_permyriad refuses it the same way.
    const result = permyriad(value);
    return result !== undefined && result > 0 && result <= 10_000
      ? { kind: 'percent', permyriad: result }
      : undefined;
  }
  const match = SIZE.exec(value);
  if (match === null) return undefined;
  const whole = BigInt(match[1]!);
  const unit = match[3] as Unit | undefined;
  const factor = unit === undefined ? 1n : 1n << UNIT_SHIFT[unit];
  let fractionBytes = 0n;
  let hasFraction = false;
  if (match[2] !== undefined) {
    // Reproduce systemd's arithmetic exactly: the fraction digits are read as
    // one integer, divided by ten once per digit in double precision, and the
    // product with the unit is truncated.
    let fraction = Number(match[2]);
    for (let i = 0; i < match[2].length; i++) fraction /= 10;
    hasFraction = fraction > 0;
    fractionBytes = BigInt(Math.trunc(fraction * Number(factor)));
  }
  if (whole + (hasFraction ? 1n : 0n) > UINT64_MAX / factor) return undefined;
  const bytes = whole * factor + fractionBytes;
  // systemd refuses 0 (it would stop the unit at once) and UINT64_MAX (its "no limit").
  if (bytes < 1n || bytes >= UINT64_MAX) return undefined;
  return { kind: 'bytes', bytes };
}

/**
 * True when `value` is a `CPUQuota=` value systemd applies and this library
 * accepts: a positive percentage with at most two decimals, values above 100%
 * allowed (`"50%"`, `"400%"`, `"12.5%"`).
 *
 * @param value - The candidate value.
 */
export function isValidCpuQuota(value: unknown): boolean {
  return typeof value === 'string' && value.length <= 64 && parseCpuQuota(value) !== undefined;
}

/**
 * True when `value` is a `MemoryMax=` value systemd applies and this library
 * accepts: whole bytes, a number with one of `K M G T P E` (1024-based, upper
 * case, decimals allowed: `"1.5G"`), or `infinity`. Percentages only with
 * `allowPercent`.
 *
 * @param value - The candidate value.
 * @param options - `allowPercent` (default `false`).
 */
export function isValidMemoryMax(
  value: unknown,
  options: { allowPercent?: boolean } = {},
): boolean {
  strictObject(options, ['allowPercent'], 'isValidMemoryMax options');
  return (
    typeof value === 'string' &&
    value.length <= 64 &&
    parseMemoryMax(value, options.allowPercent === true) !== undefined
  );
}
