/**
 * Kubernetes `resource.Quantity`, read and written exactly as apimachinery does
 * (`ParseQuantity` and `Quantity.String()` in `k8s.io/apimachinery/pkg/api/resource`),
 * over the exact-decimal core. Same grammar, same acceptance of odd corners
 * (`"1."`, `".5"`, `"1.G"`, `"+1"`, `"."`), same rounding (up); the caller turns
 * the exact value into millicores or bytes.
 */
import type { Decimal } from './decimal.js';

/** What {@link parseKubernetesQuantity} read: the sign and the exact magnitude. */
export interface KubernetesQuantity {
  /** True when the string had a leading `-` (the magnitude may still be zero: `"-0"`). */
  negative: boolean;
  /** The exact magnitude. */
  magnitude: Decimal;
}

/** Why a string is not a Kubernetes quantity, or the quantity. */
export type KubernetesParseResult =
  | { ok: true; quantity: KubernetesQuantity }
  | { ok: false; reason: string };

const DECIMAL_SUFFIX: Readonly<Record<string, number>> = {
  n: -9,
  u: -6,
  m: -3,
  '': 0,
  k: 3,
  M: 6,
  G: 9,
  T: 12,
  P: 15,
  E: 18,
};
const BINARY_SUFFIX: Readonly<Record<string, bigint>> = {
  Ki: 10n,
  Mi: 20n,
  Gi: 30n,
  Ti: 40n,
  Pi: 50n,
  Ei: 60n,
};
// Characters apimachinery lets into a suffix before an optional exponent sign and digits.
const SUFFIX_CHARS = 'eEinumkKMGTP';
const INT32_MIN = -(2 ** 31);
const INT32_MAX = 2 ** 31 - 1;
const INT64_MIN = -(2n ** 63n);
const INT64_MAX = 2n ** 63n - 1n;

function isDigit(c: string | undefined): boolean {
  return c !== undefined && c >= '0' && c <= '9';
}

/**
 * Read `str` as apimachinery's `ParseQuantity` does:
 * `[+-]? (digits | digits. | digits.digits | .digits) suffix`, where the suffix is
 * one of `n u m "" k M G T P E`, `Ki Mi Gi Ti Pi Ei`, or `e`/`E` followed by a
 * signed integer exponent. Leading zeros are skipped; a string that ends after
 * its sign or zeros (`"+"`, `"000"`) is zero, as in Kubernetes.
 *
 * One refusal Kubernetes does not make: an exponent outside the 32-bit range,
 * which Kubernetes silently wraps to a different number.
 */
export function parseKubernetesQuantity(str: string): KubernetesParseResult {
  if (str.length === 0) return { ok: false, reason: 'empty' };
  const end = str.length;
  let pos = 0;
  let negative = false;
  if (str[0] === '-' || str[0] === '+') {
    negative = str[0] === '-';
    pos++;
  }
  while (pos < end && str[pos] === '0') pos++;
  if (pos >= end) return zero(negative);

  const numStart = pos;
  while (pos < end && isDigit(str[pos])) pos++;
  const num = str.slice(numStart, pos);
  let denom = '';
  if (pos < end && str[pos] === '.') {
    pos++;
    const denomStart = pos;
    while (pos < end && isDigit(str[pos])) pos++;
    denom = str.slice(denomStart, pos);
  }

  const suffixStart = pos;
  while (pos < end && SUFFIX_CHARS.includes(str[pos]!)) pos++;
  if (pos < end && (str[pos] === '-' || str[pos] === '+')) pos++;
  while (pos < end && isDigit(str[pos])) pos++;
  if (pos < end) return { ok: false, reason: 'not a number followed by a suffix' };
  const suffix = str.slice(suffixStart);

  const coefficient = BigInt(`${num}${denom}` || '0');
  const decimal = DECIMAL_SUFFIX[suffix];
  if (decimal !== undefined && Object.hasOwn(DECIMAL_SUFFIX, suffix)) {
    return quantity(negative, { coefficient, exponent: decimal - denom.length });
  }
  const binary = Object.hasOwn(BINARY_SUFFIX, suffix) ? BINARY_SUFFIX[suffix] : undefined;
  if (binary !== undefined) {
    return quantity(negative, { coefficient: coefficient << binary, exponent: -denom.length });
  }
  if (suffix.length > 1 && (suffix[0] === 'e' || suffix[0] === 'E')) {
    const exponent = goParseInt64(suffix.slice(1));
    if (exponent === undefined) return { ok: false, reason: `unknown suffix "${suffix}"` };
    if (exponent < INT32_MIN || exponent > INT32_MAX) {
      return {
        ok: false,
        reason: `exponent ${exponent} is outside the 32-bit range (Kubernetes would wrap it to a different number)`,
      };
    }
    return quantity(negative, { coefficient, exponent: exponent - denom.length });
  }
  return { ok: false, reason: `unknown suffix "${suffix}"` };
}

function zero(negative: boolean): KubernetesParseResult {
  return { ok: true, quantity: { negative, magnitude: { coefficient: 0n, exponent: 0 } } };
}

function quantity(negative: boolean, magnitude: Decimal): KubernetesParseResult {
  return { ok: true, quantity: { negative, magnitude } };
}

// Go's strconv.ParseInt(s, 10, 64): an optional sign, then one or more digits, in range.
function goParseInt64(s: string): number | undefined {
  if (!/^[+-]?\d+$/.test(s)) return undefined;
  const value = BigInt(s);
  if (value < INT64_MIN || value > INT64_MAX) return undefined;
  // Beyond the int32 check the exact value no longer matters; clamp for Number().
  if (value < -(2n ** 40n)) return -(2 ** 40);
  if (value > 2n ** 40n) return 2 ** 40;
  return Number(value);
}

const DECIMAL_SUFFIX_OF: Readonly<Record<number, string>> = {
  [-9]: 'n',
  [-6]: 'u',
  [-3]: 'm',
  0: '',
  3: 'k',
  6: 'M',
  9: 'G',
  12: 'T',
  15: 'P',
  18: 'E',
};

/**
 * `Quantity.String()` of `value × 10^scale` in the `DecimalSI` format: the
 * fewest digits with an exponent that is a multiple of three, named by its
 * suffix (`1500m`, `1k`, `300M`).
 *
 * @param value - A whole number >= 0.
 * @param scale - The power of ten `value` is counted in (`-3` for millicores).
 */
export function formatDecimalSI(value: bigint, scale: number): string {
  if (value === 0n) return '0';
  let amount = value;
  let exponent = scale;
  while (amount % 10n === 0n) {
    amount /= 10n;
    exponent++;
  }
  const rest = exponent % 3;
  if (rest === 1 || rest === -2) {
    amount *= 10n;
    exponent -= 1;
  } else if (rest === 2 || rest === -1) {
    amount *= 100n;
    exponent -= 2;
  }
  const suffix = DECIMAL_SUFFIX_OF[exponent];
  // apimachinery falls back to exponent notation past E (10^18).
  return suffix === undefined ? `${amount}e${exponent}` : `${amount}${suffix}`;
}

const BINARY_SUFFIX_OF = ['', 'Ki', 'Mi', 'Gi', 'Ti', 'Pi', 'Ei'] as const;

/**
 * `Quantity.String()` of a whole number in the `BinarySI` format: below 1024 it
 * is written as `DecimalSI` (`1000` is `"1k"`), otherwise the largest power of
 * 1024 that divides it (`"1536Mi"`), else plain (`"1025"`).
 *
 * @param value - A whole number >= 0.
 */
export function formatBinarySI(value: bigint): string {
  if (value < 1024n) return formatDecimalSI(value, 0);
  let amount = value;
  let power = 0;
  while (amount % 1024n === 0n && power < BINARY_SUFFIX_OF.length - 1) {
    amount /= 1024n;
    power++;
  }
  return `${amount}${BINARY_SUFFIX_OF[power]}`;
}
