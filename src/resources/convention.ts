/**
 * Which grammar quantity strings follow (`binary` or `kubernetes`), and the
 * options every quantity parser and formatter takes.
 */

/**
 * Which grammar quantity strings follow (the public type is
 * `QuantityOptions['convention']`, written out there).
 * - `binary` (the default, kici-compatible): CPU is cores or whole millicores
 *   (`"1.5"`, `"500m"`); memory single-letter suffixes `k m g t p e` /
 *   `K M G T P E` are powers of 1024, as in Docker, systemd and the kici
 *   orchestrator config (`"2g"` is 2147483648 bytes).
 * - `kubernetes`: exactly what apimachinery's `resource.ParseQuantity` accepts,
 *   for CPU and memory alike: suffixes `n u m k M G T P E` (powers of 1000),
 *   `Ki Mi Gi Ti Pi Ei` (powers of 1024), exponents (`"1e3"`, `"1.3E+6"`), a
 *   leading `+`, a trailing dot (`"1."`). Lower-case `m` is milli for memory too
 *   (`"500m"` is half a byte, which rounds up to 1 byte), as in Kubernetes.
 */
export type QuantityConvention = 'binary' | 'kubernetes';

/** Options of the quantity parsers and formatters. */
export interface QuantityOptions {
  /**
   * The grammar: `binary` (kici-compatible; `"2g"` is 2 GiB) or `kubernetes`
   * (exactly what apimachinery's `resource.ParseQuantity` accepts).
   * @default 'binary'
   */
  convention?: 'binary' | 'kubernetes';
}

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
