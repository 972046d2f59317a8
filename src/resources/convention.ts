/**
 * Which grammar quantity strings follow (`binary` or `kubernetes`), and the
 * options every quantity parser and formatter takes.
 */

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

/** The convention `opts` names (`binary` when absent); a TypeError for any other. */
export function checkConvention(opts: QuantityOptions | undefined): QuantityConvention {
  const convention = opts?.convention ?? 'binary';
  if (convention !== 'binary' && convention !== 'kubernetes') {
    throw new TypeError(
      `Expected \`convention\` to be 'binary' or 'kubernetes', got \`${String(convention)}\``,
    );
  }
  return convention;
}
