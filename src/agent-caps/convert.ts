import { CapsValueError } from '../errors/index.js';
import { strictObject } from '../internal/strict-keys.js';
import { ceilScaled, decimalOfNumber } from '../resources/decimal.js';
import {
  MAX_CPU_LIMIT_CORES,
  type ResourceAmount,
  type ResourceLimits,
} from '../resources/types.js';
import { type AgentCaps, validateAgentCaps } from './codec.js';
import { parseCpuQuota, parseMemoryMax } from './grammar.js';

/**
 * The largest whole percent the `CPUQuota=` encoder accepts: systemd reads the
 * value into an int of hundredths of a percent, so at most INT_MAX / 100 whole
 * percents (`MAX_CPU_LIMIT_CORES`, 214748.36 cores, the largest
 * limit `resolveResources` resolves).
 */
const MAX_QUOTA_PERCENT = Math.round(MAX_CPU_LIMIT_CORES * 100);

/**
 * Cores to a whole percent, rounding a fraction up (never a smaller cap than
 * asked). Exact: the number is read as the decimal it prints as (`1.1` is 110%,
 * not 111%), with no float noise to snap.
 */
function cpuQuotaFromCores(cpus: number): string {
  if (typeof cpus !== 'number' || !Number.isFinite(cpus) || cpus <= 0) {
    throw new TypeError(
      `Expected \`cpus\` to be a finite number > 0 and <= ${MAX_CPU_LIMIT_CORES}, got \`${String(cpus)}\` (a cap of 0 is never valid: leave \`cpus\` unset for no CPU cap)`,
    );
  }
  const percent = ceilScaled(decimalOfNumber(cpus), 2);
  if (percent > BigInt(MAX_QUOTA_PERCENT)) {
    throw new TypeError(
      `Expected \`cpus\` to be a finite number > 0 and <= ${MAX_CPU_LIMIT_CORES} (the largest CPUQuota= systemd accepts, ${MAX_QUOTA_PERCENT}%), got \`${String(cpus)}\``,
    );
  }
  return `${percent}%`;
}

const UNITS = [
  ['E', 60n],
  ['P', 50n],
  ['T', 40n],
  ['G', 30n],
  ['M', 20n],
  ['K', 10n],
] as const;

/** Bytes to the largest unit that divides them exactly: 8589934592 -> "8G". */
function memoryMaxFromBytes(memBytes: number): string {
  if (typeof memBytes !== 'number' || !Number.isSafeInteger(memBytes) || memBytes < 1) {
    throw new TypeError(
      `Expected \`memBytes\` to be a whole number of bytes from 1 to Number.MAX_SAFE_INTEGER, got \`${String(memBytes)}\` (leave \`memBytes\` unset for no memory cap)`,
    );
  }
  const bytes = BigInt(memBytes);
  for (const [unit, shift] of UNITS) {
    const factor = 1n << shift;
    if (bytes % factor === 0n) return `${bytes / factor}${unit}`;
  }
  return String(bytes);
}

/**
 * Caps from an amount of cores and bytes: 4 cores -> `"400%"`, 1.5 -> `"150%"`,
 * a fraction of a percent rounds up (1.234 -> `"124%"`); bytes -> the largest
 * unit that divides them exactly (`"8G"`, not `"8192M"`; `"1536M"` for 1.5 GiB).
 *
 * Made for a resolved limit (`resolveResources(...).limits`, or a spawn request's
 * `resources.limits`), and valid for every one: a field absent from `amount`
 * (an unset limit) is absent from the caps, which a host reads as "not capped
 * by the swarm", never as 0; `extended` (GPU counts and the like) is accepted
 * and carried by no field, since systemd has no such cap (the backend enforces
 * device assignment).
 *
 * @param amount - `cpus` (cores) and `memBytes` (whole bytes), each optional, and
 *   an optional `extended` that is ignored.
 * @returns Caps that pass {@link validateAgentCaps}.
 * @throws {@link errors!InvalidInputError} for any other key (a typo such as `cpu`, or
 * `gpus`: caps cannot carry it, so it is refused rather than dropped).
 * @throws `TypeError` when `cpus` is not a finite number > 0 and at most 214748.36
 *   (`MAX_CPU_LIMIT_CORES`, the largest `CPUQuota=` systemd accepts),
 *   or `memBytes` is not a whole number from 1 to `Number.MAX_SAFE_INTEGER`: a cap of
 *   0 is never valid (leave the field unset for no cap); `resolveResources` never
 *   resolves a limit outside these ranges.
 *
 * @example
 * ```ts
 * import { resolveResources } from 'scaler-primitives/resources';
 * import { capsFromResources } from 'scaler-primitives/agent-caps';
 *
 * capsFromResources({ cpus: 4, memBytes: 8 * 1024 ** 3 }); // { cpuQuota: '400%', memoryMax: '8G' }
 *
 * // A label set that declares only CPU: the memory limit is unset, so no MemoryMax=.
 * const { limits } = resolveResources([{ requests: { cpus: 2 } }]);
 * capsFromResources(limits); // { cpuQuota: '200%' }
 * ```
 */
export function capsFromResources(amount: ResourceLimits): AgentCaps {
  strictObject(amount, ['cpus', 'memBytes', 'extended'], 'resource amount');
  const extended: unknown = amount.extended;
  if (extended !== undefined && (typeof extended !== 'object' || extended === null)) {
    throw new TypeError(
      `Expected \`extended\` to be an object of counts such as { "nvidia.com/gpu": 1 } or undefined, got \`${String(extended)}\``,
    );
  }
  const caps: AgentCaps = {};
  if (amount.cpus !== undefined) caps.cpuQuota = cpuQuotaFromCores(amount.cpus);
  if (amount.memBytes !== undefined) caps.memoryMax = memoryMaxFromBytes(amount.memBytes);
  return caps;
}

/**
 * Cores and bytes from caps: `"400%"` -> 4 cores, `"8G"` -> 8589934592 bytes.
 * A field that is unset, `infinity`, or a memory percentage (whose size depends
 * on the host) is `undefined`. Round-trips {@link capsFromResources} for whole
 * percents and whole bytes.
 *
 * @param caps - The caps; checked against the systemd grammar first.
 * @param options - `allowMemoryPercent`.
 * @throws {@link errors!CapsValueError} when a value is not valid systemd syntax, or
 *   when `memoryMax` is more bytes than `Number.MAX_SAFE_INTEGER` (it could not be counted exactly).
 *
 * @example
 * ```ts
 * import { resourcesFromCaps } from 'scaler-primitives/agent-caps';
 *
 * resourcesFromCaps({ cpuQuota: '150%', memoryMax: '1.5G' }); // { cpus: 1.5, memBytes: 1610612736 }
 * ```
 */
export function resourcesFromCaps(
  caps: AgentCaps,
  options: {
    /**
     * Accept a percentage for `memoryMax` (`"50%"` of the host's memory). Refused by
     * default: caps travel between hosts with different amounts of memory.
     * @default false
     */
    allowMemoryPercent?: boolean;
  } = {},
): Partial<ResourceAmount> {
  validateAgentCaps(caps, options);
  const amount: Partial<ResourceAmount> = {};
  if (typeof caps.cpuQuota === 'string') {
    amount.cpus = parseCpuQuota(caps.cpuQuota)! / 10_000;
  }
  if (typeof caps.memoryMax === 'string') {
    const memory = parseMemoryMax(caps.memoryMax, options.allowMemoryPercent === true)!;
    if (memory.kind === 'bytes') {
      // Never hand back an unsafe integer: it would not count exactly.
      if (memory.bytes > BigInt(Number.MAX_SAFE_INTEGER)) {
        throw new CapsValueError(
          'memoryMax',
          caps.memoryMax,
          `memoryMax ${JSON.stringify(caps.memoryMax)} is ${memory.bytes} bytes, more than the ${Number.MAX_SAFE_INTEGER} bytes (8Pi - 1) this library counts exactly; use "infinity" for no limit.`,
        );
      }
      amount.memBytes = Number(memory.bytes);
    }
  }
  return amount;
}
