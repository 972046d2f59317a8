import { ResourceParseError } from '../errors.js';
import {
  bytesOf,
  type Decimal,
  decimalOfDigits,
  decimalOfNumber,
  fastMillicores,
  floorScaled,
  MAX_MILLICORES,
  MAX_QUANTITY_LENGTH,
  millicoresOf,
} from './decimal.js';
import { formatBinarySI, formatDecimalSI, parseKubernetesQuantity } from './kubernetes.js';

/**
 * Which grammar quantity strings follow.
 * - `binary` (the default, kici-compatible): CPU is cores or whole millicores
 *   (`"1.5"`, `"500m"`); memory single-letter suffixes `k m g t p e` /
 *   `K M G T P E` are powers of 1024, as in Docker, systemd and the kici
 *   orchestrator config (`"2g"` is 2147483648 bytes).
 * - `kubernetes`: exactly what apimachinery's `resource.ParseQuantity` accepts,
 *   for CPU and memory alike: suffixes `n u m k M G T P E` (powers of 1000),
 *   `Ki Mi Gi Ti Pi Ei` (powers of 1024), exponents (`"1e3"`, `"1.3E+6"`), a
 *   leading `+`, a trailing dot (`"1."`). Lower-case `m` is milli for memory too
 *   (`"500m"` is half a byte, which rounds up to 1 byte), as in Kubernetes.
 *
 * @example
 * ```ts
 * import { parseMemory, type QuantityConvention } from 'scaler-primitives/resources';
 *
 * const convention: QuantityConvention = 'kubernetes';
 * parseMemory('1G', { convention }); // 1000000000 (binary: 1073741824)
 * ```
 */
export type QuantityConvention = 'binary' | 'kubernetes';

/**
 * Which meaning single-letter memory suffixes carry (see {@link QuantityConvention}).
 *
 * @example
 * ```ts
 * import type { MemoryConvention } from 'scaler-primitives/resources';
 *
 * const convention: MemoryConvention = 'binary';
 * ```
 */
export type MemoryConvention = QuantityConvention;

/**
 * Options of the quantity parsers and formatters.
 *
 * @example
 * ```ts
 * import { parseCpu, type QuantityOptions } from 'scaler-primitives/resources';
 *
 * const options: QuantityOptions = { convention: 'kubernetes' };
 * parseCpu('1.3E+6', options); // 1300000
 * ```
 */
export interface QuantityOptions {
  /**
   * The grammar (see {@link QuantityConvention}).
   * @default 'binary'
   */
  convention?: QuantityConvention;
}

/**
 * Options of {@link parseMemory} (and of every function that parses memory).
 *
 * @example
 * ```ts
 * import { parseMemory, type ParseMemoryOptions } from 'scaler-primitives/resources';
 *
 * const options: ParseMemoryOptions = { convention: 'binary' };
 * parseMemory('2g', options); // 2147483648
 * ```
 */
export interface ParseMemoryOptions extends QuantityOptions {}

/**
 * Largest CPU value, in cores, the library counts: {@link MAX_MILLICORES} / 1000
 * (999999999999.999). Up to it, a number of cores holds its millicores exactly.
 *
 * @example
 * ```ts
 * import { MAX_CPU_CORES } from 'scaler-primitives/resources';
 *
 * declare const cores: number;
 * if (cores > MAX_CPU_CORES) throw new TypeError('too many cores');
 * ```
 */
export const MAX_CPU_CORES = MAX_MILLICORES / 1000;

export { MAX_MILLICORES, MAX_QUANTITY_LENGTH };

const CPU_FORMS: Record<QuantityConvention, string> = {
  binary: 'a number of cores >= 0 (2, 1.5, "2", "1.5", ".5") or whole millicores ("500m")',
  kubernetes:
    'a Kubernetes quantity >= 0: cores ("2", "1.5", "1.", ".5", "+2") with an optional suffix n u m k M G T P E or Ki Mi Gi Ti Pi Ei, or an exponent ("1e3", "1.3E+6"): "500m"',
};
const MEMORY_FORMS: Record<QuantityConvention, string> = {
  binary:
    'bytes (1073741824, "1073741824") or a number with a suffix: Ki Mi Gi Ti Pi Ei, or k m g t p e / K M G T P E (all 1024-based): "8Gi", "512m", "1.5G"',
  kubernetes:
    'a Kubernetes quantity >= 0: bytes (1073741824, "1e9", "1.") with an optional suffix Ki Mi Gi Ti Pi Ei (1024-based) or n u m k M G T P E (1000-based), or an exponent: "8Gi", "500M", "1e9"',
};

const DECIMAL = /^(\d+)(?:\.(\d+))?$|^\.(\d+)$/;
const MILLICORES = /^(\d+)m$/;

function describe(value: unknown): string {
  if (typeof value !== 'string') return String(value);
  if (value.length <= MAX_QUANTITY_LENGTH) return JSON.stringify(value);
  return `${JSON.stringify(value.slice(0, 16))}... (${value.length} characters)`;
}

function checkConvention(opts: QuantityOptions | undefined): QuantityConvention {
  const convention = opts?.convention ?? 'binary';
  if (convention !== 'binary' && convention !== 'kubernetes') {
    throw new TypeError(
      `Expected \`convention\` to be 'binary' or 'kubernetes', got \`${String(convention)}\``,
    );
  }
  return convention;
}

/**
 * Convert cores to whole millicores, the unit CPU is accounted in. The number is
 * read as the exact decimal it prints as (`0.3` is 3/10, `1e-10` is 10^-10) and a
 * fraction of a millicore rounds **up**: `1e-10` is 1 millicore, `0.0010000001`
 * is 2, and a float sum carrying noise (`0.1 + 0.2` = `0.30000000000000004`)
 * is 301. A request is never under-counted.
 *
 * @param cores - A finite number of cores, >= 0 and <= {@link MAX_CPU_CORES}.
 * @returns Whole millicores (a safe integer).
 * @throws TypeError for anything else.
 *
 * @example
 * ```ts
 * import { coresToMillicores } from 'scaler-primitives/resources';
 *
 * coresToMillicores(1.5); // 1500
 * ```
 */
export function coresToMillicores(cores: number): number {
  if (typeof cores !== 'number' || !Number.isFinite(cores) || cores < 0) {
    throw new TypeError(`Expected \`cores\` to be a finite number >= 0, got \`${String(cores)}\``);
  }
  const milli = fastMillicores(cores) ?? millicoresOf(decimalOfNumber(cores));
  if (milli === undefined) {
    throw new TypeError(`Expected \`cores\` to be <= ${MAX_CPU_CORES}, got \`${String(cores)}\``);
  }
  return milli;
}

/**
 * Convert a **cap** in cores to whole millicores, rounding a fraction of a
 * millicore **down**: a cap never admits more than was written (`0.0015` is 1
 * millicore). Requests round up ({@link coresToMillicores}); caps round down.
 *
 * @param cores - A finite number of cores >= 0. A cap beyond {@link MAX_CPU_CORES}
 *   is {@link MAX_MILLICORES}: nothing the library counts can exceed it.
 * @returns Whole millicores (a safe integer).
 * @throws TypeError for a negative, non-finite or non-number value.
 *
 * @example
 * ```ts
 * import { capToMillicores } from 'scaler-primitives/resources';
 *
 * capToMillicores(0.0015); // 1: a cap rounds down to whole millicores, never up
 * ```
 */
export function capToMillicores(cores: number): number {
  if (typeof cores !== 'number' || !Number.isFinite(cores) || cores < 0) {
    throw new TypeError(`Expected a CPU cap to be a finite number >= 0, got \`${String(cores)}\``);
  }
  const milli = floorScaled(decimalOfNumber(cores), 3);
  return milli > BigInt(MAX_MILLICORES) ? MAX_MILLICORES : Number(milli);
}

/**
 * Parse a CPU quantity into whole millicores, rounding a finer value **up**
 * (Kubernetes' `MilliValue()`). Exact: digits are counted as integers, never
 * through a binary float.
 *
 * @param value - A number of cores, or a string in the convention's grammar.
 * @param opts - The convention (see {@link QuantityConvention}).
 * @returns Whole millicores, at most {@link MAX_MILLICORES}.
 * @throws {@link ResourceParseError} naming the value, the reason and the accepted forms:
 *   malformed strings, strings longer than {@link MAX_QUANTITY_LENGTH}, negatives,
 *   NaN, Infinity, values beyond {@link MAX_CPU_CORES}.
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
      `CPU quantity ${describe(value)} is too large: at most ${MAX_CPU_CORES} cores (${MAX_MILLICORES} millicores) can be counted exactly.`,
    );
  }
  return milli;
}

/**
 * Parse a CPU quantity into cores, at millicore precision: a finer value rounds
 * **up** to the next millicore (`"0.0001"` -> `0.001`).
 *
 * Default (`binary`) grammar: finite numbers >= 0, decimal strings (`"2"`,
 * `"1.5"`, `".5"`) and whole millicores (`"500m"`). With
 * `{ convention: 'kubernetes' }`: every string apimachinery's `ParseQuantity`
 * accepts (`"1u"`, `"3k"`, `"1e3"`, `"+1"`, `"1."`), read as `MilliValue()`.
 *
 * @param value - The quantity.
 * @param opts - The convention.
 * @returns Cores, e.g. `0.5` for `"500m"`.
 * @throws {@link ResourceParseError} as {@link parseMillicores} does.
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
  const milli = MILLICORES.exec(value);
  if (milli) return { coefficient: BigInt(milli[1]!), exponent: -3 };
  const decimal = DECIMAL.exec(value);
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

function cpuError(value: unknown, convention: QuantityConvention, detail: string) {
  return new ResourceParseError(
    'cpu',
    value,
    `Invalid CPU quantity ${describe(value)}${detail}. Expected ${CPU_FORMS[convention]}.`,
  );
}

function cpuHint(value: string): string {
  if (value.trim() !== value) return ' (remove the surrounding whitespace)';
  if (value.startsWith('-')) return ': must be >= 0 (a request cannot be negative)';
  if (/^\d+M$/.test(value)) return ` (millicores are a lower-case m: "${value.slice(0, -1)}m")`;
  if (/^\d+(\.\d+)?m$/.test(value)) return ' (millicores must be a whole number)';
  if (/^(\d+\.?\d*|\.\d+)([eE][+-]?\d+|[nukKMGTPE]i?)$/.test(value)) {
    return ' (this form needs { convention: "kubernetes" })';
  }
  return '';
}

const BINARY_POWER: Record<string, number> = { k: 1, m: 2, g: 3, t: 4, p: 5, e: 6 };
const IEC = /^([KMGTPE])i$/;
const BINARY_MEMORY = /^(\d+(?:\.\d+)?|\.\d+)([A-Za-z]*)$/;

/**
 * Parse a memory quantity into whole bytes, rounding a fraction of a byte **up**
 * (Kubernetes' `Value()`). Exact: digits are counted as integers.
 *
 * Plain numbers and digit strings are bytes; `Ki Mi Gi Ti Pi Ei` are 1024-based;
 * the rest follows `opts.convention` (see {@link QuantityConvention}).
 *
 * @param value - The quantity.
 * @param opts - The convention.
 * @returns Whole bytes (a safe integer).
 * @throws {@link ResourceParseError} for negatives, malformed strings (`"1.5.5"`),
 *   SI-looking suffixes (`"8GB"`, `"8Gb"`: the message suggests `"8Gi"`), strings
 *   longer than {@link MAX_QUANTITY_LENGTH}, and results beyond `Number.MAX_SAFE_INTEGER`.
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
export function parseMemory(value: number | string, opts: ParseMemoryOptions = {}): number {
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
    const exponent = /^(\d+\.?\d*|\.\d+)[eE][+-]?\d+$/.test(value);
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

function memoryHint(value: string, convention: QuantityConvention): string {
  if (value.trim() !== value) return ' (remove the surrounding whitespace)';
  if (value.startsWith('-')) return ': must be >= 0 (a request cannot be negative)';
  const si = /^(\d+(?:\.\d+)?|\.\d+)([kKmMgGtTpPeE])[bB]$/.exec(value);
  if (si) return ` (did you mean "${si[1]}${si[2]!.toUpperCase()}i"?)`;
  if (/^(\d+(?:\.\d+)?|\.\d+)[kmgtpe]i$/.test(value)) {
    return ` (binary suffixes are written with an upper-case letter: "${value.slice(0, -2)}${value.at(-2)!.toUpperCase()}i")`;
  }
  if (convention === 'kubernetes' && /^(\d+(?:\.\d+)?|\.\d+)[gtpK]$/.test(value)) {
    return ` (Kubernetes suffixes are k M G T P E or Ki Mi Gi Ti Pi Ei)`;
  }
  return '';
}

function memoryError(value: unknown, convention: QuantityConvention, detail: string) {
  return new ResourceParseError(
    'memory',
    value,
    `Invalid memory quantity ${describe(value)}${detail}. Expected ${MEMORY_FORMS[convention]}.`,
  );
}

/**
 * Format cores as a canonical CPU string that {@link parseCpu} (same convention)
 * reads back to the same value.
 * - `binary`: whole cores as `"2"`, less than a core as millicores (`"500m"`),
 *   otherwise a decimal (`"1.5"`).
 * - `kubernetes`: `Quantity.String()` of `resource.NewMilliQuantity(m, DecimalSI)`,
 *   what `kubectl` prints: `"500m"`, `"1500m"`, `"2"`, `"1k"`.
 *
 * @param cores - A finite number of cores >= 0 and <= {@link MAX_CPU_CORES}
 *   (rounded up to millicores as {@link parseCpu} does).
 * @param opts - The convention.
 * @throws TypeError for anything else.
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
  if (typeof cores !== 'number' || !Number.isFinite(cores) || cores < 0 || cores > MAX_CPU_CORES) {
    throw new TypeError(
      `Expected \`cores\` to be a finite number >= 0 and <= ${MAX_CPU_CORES}, got \`${String(cores)}\``,
    );
  }
  const milli = coresToMillicores(cores);
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
 * @param bytes - A safe integer >= 0.
 * @param opts - The convention.
 * @throws TypeError for anything else.
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
  if (typeof bytes !== 'number' || !Number.isSafeInteger(bytes) || bytes < 0) {
    throw new TypeError(`Expected \`bytes\` to be a safe integer >= 0, got \`${String(bytes)}\``);
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
