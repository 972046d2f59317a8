/**
 * The exact-decimal core every quantity goes through: a value is an integer
 * coefficient times a power of ten, and the only rounding is `ceil` to a whole
 * unit, done on integers. No binary float ever carries a fractional amount.
 */

/** An exact non-negative amount: `coefficient × 10^exponent`. */
export interface Decimal {
  /** The digits as an integer (>= 0). */
  coefficient: bigint;
  /** The power of ten. */
  exponent: number;
}

/**
 * The longest quantity string any parser reads. Longer strings are refused
 * before any pattern is applied, so a hostile input costs O(1): a valid quantity
 * is never longer than a few dozen characters.
 */
export const MAX_QUANTITY_LENGTH = 64;

/**
 * The largest CPU amount the library counts: 2^43 cores, 8796093022208000
 * millicores. CPU crosses the API as a number of cores (a double), and below
 * 2^43 two doubles are less than a millicore apart (2^-10), so every whole
 * number of millicores up to here has its own number of cores, which prints
 * as that decimal and reads back as the same millicores. From 2^43 on they are
 * 2^-9 apart: `8796093022208.001` cores would read back as 2 millicores more.
 * It is also below `Number.MAX_SAFE_INTEGER`, so a row or a cap in millicores,
 * and any sum below 2^53, is an exact integer.
 */
export const MAX_MILLICORES = 8_796_093_022_208_000;

const BIG_MAX_MILLICORES = BigInt(MAX_MILLICORES);
const BIG_MAX_SAFE = BigInt(Number.MAX_SAFE_INTEGER);
// Any result with more digits than this is beyond every bound the library counts to.
const OVERFLOW = 10n ** 20n;

/**
 * `ceil(value × 10^shift)` as a bigint, exactly. Results beyond 10^20 come back
 * as 10^20 (the caller compares against a much smaller bound), so an exponent
 * in the billions costs nothing.
 */
export function ceilScaled(value: Decimal, shift: number): bigint {
  if (value.coefficient === 0n) return 0n;
  const e = value.exponent + shift;
  const digits = value.coefficient.toString().length;
  if (e >= 0) {
    if (digits + e > 21) return OVERFLOW;
    const out = value.coefficient * 10n ** BigInt(e);
    return out > OVERFLOW ? OVERFLOW : out;
  }
  // Below one unit: a positive amount rounds up to one, never down to zero.
  if (-e > digits) return 1n;
  const divisor = 10n ** BigInt(-e);
  return (value.coefficient + divisor - 1n) / divisor;
}

/** `floor(value × 10^shift)` as a bigint, exactly (saturating at 10^20 as {@link ceilScaled}). */
export function floorScaled(value: Decimal, shift: number): bigint {
  if (value.coefficient === 0n) return 0n;
  const e = value.exponent + shift;
  if (e >= 0) return ceilScaled(value, shift);
  if (-e > value.coefficient.toString().length) return 0n;
  return value.coefficient / 10n ** BigInt(-e);
}

const JS_NUMBER = /^(\d+)(?:\.(\d+))?(?:e([+-]\d+))?$/;

/**
 * The exact decimal a JavaScript number stands for: the shortest decimal that
 * reads back as the same double (what `String(n)` prints), so `0.3` is exactly
 * 3/10 and `1e-10` is exactly 10^-10. A sum that carries float noise
 * (`0.1 + 0.2` is `0.30000000000000004`) keeps it, and so rounds up.
 *
 * @param n - A finite number >= 0 (the caller checks).
 */
export function decimalOfNumber(n: number): Decimal {
  const match = JS_NUMBER.exec(String(n));
  // Unreachable for a finite non-negative number; fail closed all the same.
  if (!match) throw new TypeError(`Expected a finite number >= 0, got \`${String(n)}\``);
  const [, whole = '', fraction = '', exponent = '0'] = match;
  return {
    coefficient: BigInt(`${whole}${fraction}`),
    exponent: Number(exponent) - fraction.length,
  };
}

/**
 * A plain decimal string (`"12"`, `"1.5"`, `".5"`, `"1."`), digits only, as an
 * exact {@link Decimal}.
 */
export function decimalOfDigits(whole: string, fraction: string): Decimal {
  return { coefficient: BigInt(`${whole}${fraction}` || '0'), exponent: -fraction.length };
}

/**
 * Whole millicores of a number of cores when the number is an exact number of
 * millicores (the common case, `0.5`, `2`, `0.25`), without building a decimal;
 * `undefined` otherwise (the caller takes the exact path). Exact: `cores * 1000`
 * is a whole number `m` whose thousandth is `cores` again, and up to
 * {@link MAX_MILLICORES} no other whole number of millicores has that double, so
 * `cores` prints as `m / 1000`.
 */
export function fastMillicores(cores: number): number | undefined {
  const scaled = cores * 1000;
  return Number.isInteger(scaled) && scaled <= MAX_MILLICORES && scaled / 1000 === cores
    ? scaled
    : undefined;
}

/** Whole millicores from a decimal number of cores, rounded up; `undefined` past {@link MAX_MILLICORES}. */
export function millicoresOf(cores: Decimal): number | undefined {
  const milli = ceilScaled(cores, 3);
  return milli > BIG_MAX_MILLICORES ? undefined : Number(milli);
}

/** Whole bytes from a decimal number of bytes, rounded up; `undefined` past `Number.MAX_SAFE_INTEGER`. */
export function bytesOf(bytes: Decimal): number | undefined {
  const whole = ceilScaled(bytes, 0);
  return whole > BIG_MAX_SAFE ? undefined : Number(whole);
}

/** A whole count from a decimal; `undefined` when it has a fraction or exceeds `Number.MAX_SAFE_INTEGER`. */
export function wholeOf(value: Decimal): number | undefined {
  if (value.coefficient === 0n) return 0;
  const whole = ceilScaled(value, 0);
  if (whole > BIG_MAX_SAFE) return undefined;
  // Exact when ceil equals floor: compare value × 10^k with whole × 10^k.
  if (value.exponent < 0) {
    if (-value.exponent > value.coefficient.toString().length) return undefined;
    const scale = 10n ** BigInt(-value.exponent);
    if (whole * scale !== value.coefficient) return undefined;
  }
  return Number(whole);
}
