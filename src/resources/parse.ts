/**
 * Parsing CPU and memory quantities, in either convention, into whole
 * millicores and whole bytes: exact (digits counted as integers), a finer
 * value rounded **up**, every bad value a `ResourceParseError`.
 */
import { ResourceParseError } from '../errors/index.js';
import { checkConvention, type QuantityConvention, type QuantityOptions } from './convention.js';
import {
  bytesOf,
  type Decimal,
  decimalOfDigits,
  decimalOfNumber,
  fastMillicores,
  MAX_MILLICORES,
  MAX_QUANTITY_LENGTH,
  millicoresOf,
} from './decimal.js';
import { parseKubernetesQuantity } from './kubernetes.js';
import { cpuError, cpuHint, describe, memoryError, memoryHint } from './parse-errors.js';
import { MAX_CPU_CORES } from './quantity.js';

const DECIMAL = /^(\d+)(?:\.(\d+))?$|^\.(\d+)$/;
const MILLICORES = /^(\d+)m$/;

/**
 * Parse a CPU quantity into whole millicores, rounding a finer value **up**
 * (Kubernetes' `MilliValue()`). Exact: digits are counted as integers, never
 * through a binary float.
 *
 * @param value - A number of cores, or a string in the convention's grammar.
 * @param opts - The convention: `binary` (the default) or `kubernetes`.
 * @returns Whole millicores, at most 8796093022208000 (2^43 cores: the most a
 *   number of cores can carry exactly to the millicore).
 * @throws `ResourceParseError` naming the value, the reason and the accepted forms:
 *   malformed strings, strings longer than 64 characters, negatives, NaN, Infinity,
 *   values beyond 2^43 cores.
 * @throws TypeError when `value` is neither a number nor a string, or for a bad convention.
 *
 * @example
 * ```ts
 * import { parseMillicores } from 'scaler-primitives/resources';
 *
 * parseMillicores('500m');                                  // 500
 * parseMillicores('0.0000000001', { convention: 'kubernetes' }); // 1
 * parseMillicores('1.3E+6', { convention: 'kubernetes' });  // 1300000000
 * ```
 */
export function parseMillicores(value: number | string, opts?: QuantityOptions): number {
  const convention = checkConvention(opts);
  if (typeof value === 'number' && value >= 0) {
    const fast = fastMillicores(value);
    if (fast !== undefined) return fast;
  } else if (convention === 'binary' && typeof value === 'string') {
    const fast = fastBinaryMillicores(value);
    if (fast !== undefined) return fast;
  }
  const milli = millicoresOf(cpuDecimal(value, convention));
  if (milli === undefined) {
    throw new ResourceParseError(
      'cpu',
      value,
      `CPU quantity ${describe(value)} is too large: at most ${MAX_CPU_CORES} cores (2^43, ${MAX_MILLICORES} millicores) can be counted exactly: beyond that a number of cores cannot hold every millicore.`,
    );
  }
  return milli;
}

/**
 * Parse a CPU quantity into cores, at millicore precision: a finer value rounds
 * **up** to the next millicore (`"0.0001"` -> `0.001`).
 *
 * Default (`binary`) grammar: finite numbers >= 0, decimal strings (`"2"`,
 * `"1.5"`, `".5"`) and whole millicores (`"500m"`), each string with an optional
 * leading `+` as in Kubernetes (`"+2"`). With
 * `{ convention: 'kubernetes' }`: every string apimachinery's `ParseQuantity`
 * accepts (`"1u"`, `"3k"`, `"1e3"`, `"+1"`, `"1."`), read as `MilliValue()`.
 *
 * @param value - The quantity.
 * @param opts - The convention.
 * @returns Cores, e.g. `0.5` for `"500m"`.
 * @throws `ResourceParseError` as {@link parseMillicores} does.
 * @throws TypeError when `value` is neither a number nor a string.
 *
 * @example
 * ```ts
 * import { parseCpu } from 'scaler-primitives/resources';
 *
 * parseCpu('500m'); // 0.5
 * parseCpu('1.5');  // 1.5
 * parseCpu('1080n', { convention: 'kubernetes' }); // 0.001
 * ```
 */
export function parseCpu(value: number | string, opts?: QuantityOptions): number {
  return parseMillicores(value, opts) / 1000;
}

const FAST_MILLICORES = /^(\d{1,12})m$/;
const FAST_DECIMAL = /^(\d{0,9})(?:\.(\d{1,3}))?$/;

// The common binary-grammar strings ("500m", "2", "1.5", ".25") without BigInt:
// at most 12 digits, so every product below is an exact integer.
function fastBinaryMillicores(value: string): number | undefined {
  if (value.length > 16) return undefined;
  const milli = FAST_MILLICORES.exec(value);
  if (milli) return Number(milli[1]);
  const decimal = FAST_DECIMAL.exec(value);
  if (!decimal || value === '' || value === '.') return undefined;
  const whole = decimal[1] ?? '';
  const fraction = decimal[2] ?? '';
  if (whole === '' && fraction === '') return undefined;
  return Number(whole || '0') * 1000 + Number(fraction.padEnd(3, '0') || '0');
}

function cpuDecimal(value: number | string, convention: QuantityConvention): Decimal {
  if (typeof value === 'number') {
    if (!Number.isFinite(value) || value < 0) {
      throw cpuError(value, convention, ': must be finite and >= 0');
    }
    return decimalOfNumber(value);
  }
  if (typeof value !== 'string') {
    throw new TypeError(`Expected a CPU quantity (number or string), got \`${typeof value}\``);
  }
  if (value.length > MAX_QUANTITY_LENGTH) {
    throw cpuError(value, convention, ` is longer than ${MAX_QUANTITY_LENGTH} characters`);
  }
  if (convention === 'kubernetes') {
    return kubernetesDecimal('cpu', value, convention);
  }
  // A leading `+`, as Kubernetes accepts it: `"+2"` is 2.
  const unsigned = value.startsWith('+') ? value.slice(1) : value;
  const milli = MILLICORES.exec(unsigned);
  if (milli) return { coefficient: BigInt(milli[1]!), exponent: -3 };
  const decimal = DECIMAL.exec(unsigned);
  if (decimal) return decimalOfDigits(decimal[1] ?? '', decimal[2] ?? decimal[3] ?? '');
  throw cpuError(value, convention, cpuHint(value));
}

function kubernetesDecimal(
  kind: 'cpu' | 'memory',
  value: string,
  convention: QuantityConvention,
): Decimal {
  const error = kind === 'cpu' ? cpuError : memoryError;
  const parsed = parseKubernetesQuantity(value);
  if (!parsed.ok) {
    // The binary grammar's hints would point back to this convention: only the
    // whitespace and unit-confusion hints apply.
    const hint =
      value.trim() !== value
        ? ' (remove the surrounding whitespace)'
        : kind === 'memory'
          ? memoryHint(value, convention)
          : '';
    throw error(value, convention, hint || ` (${parsed.reason})`);
  }
  const { negative, magnitude } = parsed.quantity;
  if (negative && magnitude.coefficient !== 0n) {
    throw error(value, convention, ': must be >= 0 (a request cannot be negative)');
  }
  return magnitude;
}

const BINARY_POWER: Record<string, number> = { k: 1, m: 2, g: 3, t: 4, p: 5, e: 6 };
const IEC = /^([KMGTPE])i$/;
// An optional leading `+`, as Kubernetes accepts it: `"+8Gi"` is 8Gi.
const BINARY_MEMORY = /^\+?(\d+(?:\.\d+)?|\.\d+)([A-Za-z]*)$/;

/**
 * Parse a memory quantity into whole bytes, rounding a fraction of a byte **up**
 * (Kubernetes' `Value()`). Exact: digits are counted as integers.
 *
 * Plain numbers and digit strings are bytes; `Ki Mi Gi Ti Pi Ei` are 1024-based;
 * the rest follows `opts.convention` (`binary`, the default, or `kubernetes`).
 * A string may start with `+`, as in Kubernetes (`"+8Gi"`).
 *
 * @param value - The quantity.
 * @param opts - The convention.
 * @returns Whole bytes (a safe integer).
 * @throws `ResourceParseError` for negatives, malformed strings (`"1.5.5"`),
 *   SI-looking suffixes (`"8GB"`, `"8Gb"`: the message suggests `"8Gi"`), strings
 *   longer than 64 characters, and results beyond `Number.MAX_SAFE_INTEGER`.
 * @throws TypeError when `value` is neither a number nor a string, or for a bad convention.
 *
 * @example
 * ```ts
 * import { parseMemory } from 'scaler-primitives/resources';
 *
 * parseMemory('8Gi');                              // 8589934592
 * parseMemory('2g');                               // 2147483648
 * parseMemory('500M', { convention: 'kubernetes' }); // 500000000
 * ```
 */
export function parseMemory(value: number | string, opts: QuantityOptions = {}): number {
  const convention = checkConvention(opts);
  if (typeof value === 'number' && Number.isSafeInteger(value) && value >= 0) return value;
  const bytes = bytesOf(memoryDecimal(value, convention));
  if (bytes === undefined) {
    throw new ResourceParseError(
      'memory',
      value,
      `Memory quantity ${describe(value)} is too large: at most ${Number.MAX_SAFE_INTEGER} bytes (8Pi - 1) can be counted exactly.`,
    );
  }
  return bytes;
}

function memoryDecimal(value: number | string, convention: QuantityConvention): Decimal {
  if (typeof value === 'number') {
    if (!Number.isFinite(value) || value < 0) {
      throw memoryError(value, convention, ': must be finite and >= 0');
    }
    return decimalOfNumber(value);
  }
  if (typeof value !== 'string') {
    throw new TypeError(`Expected a memory quantity (number or string), got \`${typeof value}\``);
  }
  if (value.length > MAX_QUANTITY_LENGTH) {
    throw memoryError(value, convention, ` is longer than ${MAX_QUANTITY_LENGTH} characters`);
  }
  if (convention === 'kubernetes') return kubernetesDecimal('memory', value, convention);
  const match = BINARY_MEMORY.exec(value);
  if (!match) {
    const exponent = /^\+?(\d+\.?\d*|\.\d+)[eE][+-]?\d+$/.test(value);
    const hint = exponent
      ? ' (exponents like "1e9" need the kubernetes convention)'
      : memoryHint(value, convention);
    throw memoryError(value, convention, hint);
  }
  const [, mantissa = '', suffix = ''] = match;
  const power = binaryPower(suffix);
  if (power === undefined) throw memoryError(value, convention, memoryHint(value, convention));
  const [whole = '', fraction = ''] = mantissa.split('.');
  const digits = decimalOfDigits(whole, fraction);
  return { coefficient: digits.coefficient << BigInt(power * 10), exponent: digits.exponent };
}

function binaryPower(suffix: string): number | undefined {
  if (suffix === '') return 0;
  const iec = IEC.exec(suffix);
  if (iec) return BINARY_POWER[iec[1]!.toLowerCase()];
  if (suffix.length !== 1) return undefined;
  return BINARY_POWER[suffix.toLowerCase()];
}
