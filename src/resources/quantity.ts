/**
 * How CPU is counted: whole millicores, a request rounded **up** and a cap
 * rounded **down**, up to {@link MAX_CPU_CORES}. Exact: a number of cores is
 * read as the decimal it prints as, never through binary-float arithmetic.
 */
import {
  decimalOfNumber,
  fastMillicores,
  floorScaled,
  MAX_MILLICORES,
  MAX_QUANTITY_LENGTH,
  millicoresOf,
} from './decimal.js';

/**
 * Largest CPU value, in cores, the library counts: {@link MAX_MILLICORES} / 1000,
 * 2^43 (8796093022208). Up to it, a number of cores holds its millicores exactly.
 */
export const MAX_CPU_CORES = MAX_MILLICORES / 1000;

export { MAX_MILLICORES, MAX_QUANTITY_LENGTH };

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
 */
export function capToMillicores(cores: number): number {
  if (typeof cores !== 'number' || !Number.isFinite(cores) || cores < 0) {
    throw new TypeError(`Expected a CPU cap to be a finite number >= 0, got \`${String(cores)}\``);
  }
  const milli = floorScaled(decimalOfNumber(cores), 3);
  return milli > BigInt(MAX_MILLICORES) ? MAX_MILLICORES : Number(milli);
}
