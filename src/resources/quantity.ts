import { ResourceParseError } from '../errors.js';

/** Which meaning single-letter memory suffixes carry. */
export type MemoryConvention = 'binary' | 'kubernetes';

/** Options of {@link parseMemory}. */
export interface ParseMemoryOptions {
  /**
   * How to read single-letter suffixes.
   * - `binary`: `k m g t p e` and `K M G T P E` are powers of 1024, as in Docker,
   *   systemd and the kici orchestrator config (`"2g"` is 2147483648 bytes).
   * - `kubernetes`: `k M G T P E` are powers of 1000, `e` exponents (`"1e9"`) are
   *   accepted, and lower-case `m` (millibytes) is refused.
   *
   * `Ki Mi Gi Ti Pi Ei` are powers of 1024 in both.
   * @default 'binary'
   */
  convention?: MemoryConvention;
}

const CPU_FORMS = 'a number of cores >= 0 (2, 1.5, "2", "1.5", ".5") or whole millicores ("500m")';
const MEMORY_FORMS: Record<MemoryConvention, string> = {
  binary:
    'bytes (1073741824, "1073741824") or a number with a suffix: Ki Mi Gi Ti Pi Ei, or k m g t p e / K M G T P E (all 1024-based): "8Gi", "512m", "1.5G"',
  kubernetes:
    'bytes (1073741824, "1e9") or a number with a suffix: Ki Mi Gi Ti Pi Ei (1024-based) or k M G T P E (1000-based): "8Gi", "500M", "1e9"',
};

/** Largest CPU value, in cores, whose millicore count is a safe integer. */
export const MAX_CPU_CORES = Math.floor(Number.MAX_SAFE_INTEGER / 1000);

const DECIMAL = /^(\d+)(?:\.(\d+))?$|^\.(\d+)$/;
const MILLICORES = /^(\d+)m$/;

function describe(value: unknown): string {
  return typeof value === 'string' ? JSON.stringify(value) : String(value);
}

/**
 * Convert cores to whole millicores, the unit CPU is accounted in. Floating-point
 * noise (`0.1 + 0.2`) snaps to the nearest millicore; a genuinely finer value
 * rounds up, so a request is never under-counted.
 *
 * @param cores - A finite number of cores >= 0.
 * @returns Whole millicores.
 */
export function coresToMillicores(cores: number): number {
  const scaled = cores * 1000;
  const nearest = Math.round(scaled);
  return Math.abs(scaled - nearest) < 1e-6 ? nearest : Math.ceil(scaled);
}

/**
 * Parse a CPU quantity into cores.
 *
 * Accepts finite numbers >= 0, decimal strings (`"2"`, `"1.5"`, `".5"`) and whole
 * millicores (`"500m"`). The result is at millicore precision: finer values round
 * up to the next millicore (`0.0001` -> `0.001`).
 *
 * @param value - The quantity.
 * @returns Cores, e.g. `0.5` for `"500m"`.
 * @throws {@link ResourceParseError} for negatives, NaN, Infinity, empty strings,
 *   malformed strings (`"1.5.5"`, `"2 cores"`, `"500M"`) and values too large to count.
 * @throws TypeError when `value` is neither a number nor a string.
 *
 * @example
 * ```ts
 * parseCpu('500m'); // 0.5
 * parseCpu('1.5');  // 1.5
 * parseCpu(2);      // 2
 * ```
 */
export function parseCpu(value: number | string): number {
  let cores: number;
  if (typeof value === 'number') {
    cores = value;
  } else if (typeof value === 'string') {
    const milli = MILLICORES.exec(value);
    if (milli) {
      cores = Number(milli[1]) / 1000;
    } else if (DECIMAL.test(value)) {
      cores = Number(value);
    } else {
      throw new ResourceParseError(
        'cpu',
        value,
        `Invalid CPU quantity ${describe(value)}${cpuHint(value)}. Expected ${CPU_FORMS}.`,
      );
    }
  } else {
    throw new TypeError(`Expected a CPU quantity (number or string), got \`${typeof value}\``);
  }
  if (!Number.isFinite(cores) || cores < 0) {
    throw new ResourceParseError(
      'cpu',
      value,
      `Invalid CPU quantity ${describe(value)}: must be finite and >= 0. Expected ${CPU_FORMS}.`,
    );
  }
  if (cores > MAX_CPU_CORES) {
    throw new ResourceParseError(
      'cpu',
      value,
      `CPU quantity ${describe(value)} is too large: at most ${MAX_CPU_CORES} cores can be counted exactly.`,
    );
  }
  return coresToMillicores(cores) / 1000;
}

function cpuHint(value: string): string {
  if (value.trim() !== value) return ' (remove the surrounding whitespace)';
  if (/^\d+M$/.test(value)) return ` (millicores are a lower-case m: "${value.slice(0, -1)}m")`;
  if (/^\d+(\.\d+)?m$/.test(value)) return ' (millicores must be a whole number)';
  return '';
}

const BINARY_POWER: Record<string, number> = { k: 1, m: 2, g: 3, t: 4, p: 5, e: 6 };
const KUBERNETES_DECIMAL: Record<string, number> = { k: 1, M: 2, G: 3, T: 4, P: 5, E: 6 };
const IEC = /^([KMGTPE])i$/;

/**
 * Parse a memory quantity into whole bytes.
 *
 * Plain numbers and digit strings are bytes; `Ki Mi Gi Ti Pi Ei` are 1024-based;
 * single-letter suffixes follow `opts.convention` (see {@link ParseMemoryOptions}).
 * Decimals are allowed (`"1.5Gi"`); a fractional byte count rounds up.
 *
 * @param value - The quantity.
 * @param opts - The suffix convention.
 * @returns Whole bytes (a safe integer).
 * @throws {@link ResourceParseError} for negatives, malformed strings (`"1.5.5"`),
 *   SI-looking suffixes (`"8GB"`, `"8Gb"`: the message suggests `"8Gi"`), and
 *   results beyond `Number.MAX_SAFE_INTEGER`.
 * @throws TypeError when `value` is neither a number nor a string.
 *
 * @example
 * ```ts
 * parseMemory('8Gi');                              // 8589934592
 * parseMemory('2g');                               // 2147483648
 * parseMemory('500M', { convention: 'kubernetes' }); // 500000000
 * ```
 */
export function parseMemory(value: number | string, opts: ParseMemoryOptions = {}): number {
  const convention = opts.convention ?? 'binary';
  if (convention !== 'binary' && convention !== 'kubernetes') {
    throw new TypeError(
      `Expected \`convention\` to be 'binary' or 'kubernetes', got \`${String(convention)}\``,
    );
  }
  if (typeof value === 'number') {
    if (!Number.isFinite(value) || value < 0) {
      throw memoryError(value, convention, ': must be finite and >= 0');
    }
    const bytes = Math.ceil(value);
    if (!Number.isSafeInteger(bytes)) throw tooLarge(value);
    return bytes;
  }
  if (typeof value !== 'string') {
    throw new TypeError(`Expected a memory quantity (number or string), got \`${typeof value}\``);
  }
  const match = /^(\d+(?:\.\d+)?|\.\d+)(?:[eE](\d+))?([A-Za-z]*)$/.exec(value);
  if (!match) throw memoryError(value, convention, memoryHint(value, convention));
  const [, mantissa = '', exponent, suffix = ''] = match;
  if (exponent !== undefined && convention !== 'kubernetes') {
    // In the binary convention a trailing `e` is exbibytes, so "1e9" is ambiguous.
    throw memoryError(value, convention, ' (exponents like "1e9" need the kubernetes convention)');
  }
  const factor = suffixFactor(suffix, convention);
  if (factor === undefined) throw memoryError(value, convention, memoryHint(value, convention));

  // Exact decimal arithmetic: mantissa digits * 10^exponent * factor / 10^fraction digits.
  const [whole = '', fraction = ''] = mantissa.split('.');
  let numerator = BigInt(`${whole}${fraction}` || '0') * factor;
  if (exponent !== undefined) {
    if (exponent.length > 3) throw tooLarge(value);
    numerator *= 10n ** BigInt(exponent);
  }
  const denominator = 10n ** BigInt(fraction.length);
  const bytes = (numerator + denominator - 1n) / denominator;
  if (bytes > BigInt(Number.MAX_SAFE_INTEGER)) throw tooLarge(value);
  return Number(bytes);
}

function suffixFactor(suffix: string, convention: MemoryConvention): bigint | undefined {
  if (suffix === '') return 1n;
  const iec = IEC.exec(suffix);
  if (iec) return 1024n ** BigInt(BINARY_POWER[iec[1]!.toLowerCase()]!);
  if (suffix.length !== 1) return undefined;
  if (convention === 'binary') {
    const power = BINARY_POWER[suffix.toLowerCase()];
    return power === undefined ? undefined : 1024n ** BigInt(power);
  }
  const power = KUBERNETES_DECIMAL[suffix];
  return power === undefined ? undefined : 1000n ** BigInt(power);
}

function memoryHint(value: string, convention: MemoryConvention): string {
  if (value.trim() !== value) return ' (remove the surrounding whitespace)';
  if (value.startsWith('-')) return ': must be >= 0';
  const si = /^(\d+(?:\.\d+)?|\.\d+)([kKmMgGtTpPeE])[bB]$/.exec(value);
  if (si) return ` (did you mean "${si[1]}${si[2]!.toUpperCase()}i"?)`;
  if (convention === 'kubernetes' && /^(\d+(?:\.\d+)?|\.\d+)m$/.test(value)) {
    return ' (lower-case m is millibytes in Kubernetes; did you mean "M" or "Mi"?)';
  }
  if (/^(\d+(?:\.\d+)?|\.\d+)[kmgtpe]i$/.test(value)) {
    return ` (binary suffixes are written with an upper-case letter: "${value.slice(0, -2)}${value.at(-2)!.toUpperCase()}i")`;
  }
  return '';
}

function memoryError(
  value: unknown,
  convention: MemoryConvention,
  detail: string,
): ResourceParseError {
  return new ResourceParseError(
    'memory',
    value,
    `Invalid memory quantity ${describe(value)}${detail}. Expected ${MEMORY_FORMS[convention]}.`,
  );
}

function tooLarge(value: unknown): ResourceParseError {
  return new ResourceParseError(
    'memory',
    value,
    `Memory quantity ${describe(value)} is too large: at most ${Number.MAX_SAFE_INTEGER} bytes (8Pi - 1) can be counted exactly.`,
  );
}

/**
 * Format cores as a canonical CPU string that {@link parseCpu} reads back to the
 * same value: whole cores as `"2"`, less than a core as millicores (`"500m"`),
 * otherwise a decimal (`"1.5"`).
 *
 * @param cores - A finite number of cores >= 0 (rounded to millicores as {@link parseCpu} does).
 * @throws TypeError for anything else.
 *
 * @example
 * ```ts
 * formatCpu(0.5); // "500m"
 * formatCpu(1.5); // "1.5"
 * ```
 */
export function formatCpu(cores: number): string {
  if (typeof cores !== 'number' || !Number.isFinite(cores) || cores < 0 || cores > MAX_CPU_CORES) {
    throw new TypeError(
      `Expected \`cores\` to be a finite number >= 0 and <= ${MAX_CPU_CORES}, got \`${String(cores)}\``,
    );
  }
  const milli = coresToMillicores(cores);
  if (milli % 1000 === 0) return String(milli / 1000);
  if (milli < 1000) return `${milli}m`;
  return String(milli / 1000);
}

const IEC_UNITS = ['', 'Ki', 'Mi', 'Gi', 'Ti', 'Pi'] as const;

/**
 * Format bytes as a canonical memory string that {@link parseMemory} reads back to
 * the same value: the largest binary unit that divides it exactly (`"8Gi"`,
 * `"1536Mi"`), or plain bytes (`"1000"`).
 *
 * @param bytes - A safe integer >= 0.
 * @throws TypeError for anything else.
 *
 * @example
 * ```ts
 * formatMemory(8 * 1024 ** 3);  // "8Gi"
 * formatMemory(1.5 * 1024 ** 3); // "1536Mi"
 * ```
 */
export function formatMemory(bytes: number): string {
  if (typeof bytes !== 'number' || !Number.isSafeInteger(bytes) || bytes < 0) {
    throw new TypeError(`Expected \`bytes\` to be a safe integer >= 0, got \`${String(bytes)}\``);
  }
  if (bytes === 0) return '0';
  let unit = 0;
  let amount = bytes;
  while (unit < IEC_UNITS.length - 1 && amount % 1024 === 0) {
    amount /= 1024;
    unit++;
  }
  return `${amount}${IEC_UNITS[unit]}`;
}
