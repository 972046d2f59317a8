import { z } from 'zod';
import { CapsValueError } from '../errors/index.js';
import { showValue, strictObject, strictOptions } from '../internal/strict-keys.js';
import { parseCpuQuota, parseMemoryMax } from './grammar.js';

/**
 * One agent's caps: systemd values carried verbatim. An absent field means
 * "not capped by the swarm" (the host's own setting applies), never "uncapped".
 */
export interface AgentCaps {
  /** systemd `CPUQuota=`, e.g. `"400%"` (four CPUs). */
  cpuQuota?: string;
  /** systemd `MemoryMax=`, e.g. `"8G"`. */
  memoryMax?: string;
}

/**
 * Options for the checks of caps values.
 */
export interface CapsValueOptions {
  /**
   * Accept a percentage for `memoryMax` (`"50%"` of the host's memory).
   * Refused by default: caps travel between hosts with different amounts of
   * memory, so a percentage means a different cap on each.
   * @default false
   */
  allowMemoryPercent?: boolean;
}

/**
 * Options of {@link decodeAgentCaps}.
 */
export interface DecodeAgentCapsOptions extends CapsValueOptions {
  /**
   * Return the values as stored, without checking them against the systemd
   * grammar (the JSON shape is still checked). For inspection tools only:
   * never hand raw values to systemd.
   * @default false
   */
  raw?: boolean;
}

/**
 * The longest caps field accepted (`"18446744073709551614"` is 20 characters): a
 * longer value is refused before any parsing.
 */
export const MAX_CAPS_FIELD_LENGTH = 64;

/**
 * The largest stored caps value {@link decodeAgentCaps} reads (64 KiB), checked before
 * parsing. A value is a few dozen bytes; the margin leaves space for fields a newer
 * writer may add, which are tolerated.
 */
export const MAX_CAPS_VALUE_BYTES = 65_536;

/** The keys of {@link AgentCaps}. */
const CAPS_KEYS = ['cpuQuota', 'memoryMax'] as const;
/** The keys of {@link CapsValueOptions}. */
export const CAPS_OPTION_KEYS: readonly string[] = ['allowMemoryPercent'];
const DECODE_OPTION_KEYS: readonly string[] = [...CAPS_OPTION_KEYS, 'raw'];

/** Check an options object strictly: known keys only, booleans where booleans go. */
export function checkCapsOptions<T extends object>(
  options: unknown,
  keys: readonly string[],
  what: string,
): T {
  const checked = strictOptions<Record<string, unknown>>(options, keys, what);
  for (const key of ['allowMemoryPercent', 'raw', 'purge']) {
    const value = checked[key];
    if (value !== undefined && typeof value !== 'boolean') {
      throw new TypeError(`Expected \`${key}\` to be a boolean, got \`${typeof value}\``);
    }
  }
  return checked as T;
}

const FIELDS = [
  { key: 'cpuQuota', wire: 'cpu_quota' },
  { key: 'memoryMax', wire: 'memory_max' },
] as const;

const CPU_FORMS =
  'a positive percentage with at most two decimals, such as "50%", "400%" or "12.5%"';
const MEMORY_FORMS =
  'bytes ("1073741824"), a number with one of the 1024-based units K M G T P E ("512M", "1.5G", "8G"), or "infinity"';

/**
 * Check one field and throw a {@link errors!CapsValueError} naming it when systemd
 * would not apply it.
 */
function checkField(
  key: 'cpuQuota' | 'memoryMax',
  value: string,
  options: CapsValueOptions,
  where: string,
): void {
  if (value.length > MAX_CAPS_FIELD_LENGTH) {
    throw new CapsValueError(
      key,
      `${value.length} characters`,
      `Invalid ${key} ${showValue(value)}${where}: at most ${MAX_CAPS_FIELD_LENGTH} characters are accepted.`,
    );
  }
  if (key === 'cpuQuota') {
    if (parseCpuQuota(value) === undefined) {
      throw new CapsValueError(
        key,
        value,
        `Invalid cpuQuota ${showValue(value)}${where}: expected ${CPU_FORMS} (systemd CPUQuota=).`,
      );
    }
    return;
  }
  const allowPercent = options.allowMemoryPercent === true;
  if (parseMemoryMax(value, allowPercent) === undefined) {
    const percent =
      value.endsWith('%') && !allowPercent
        ? ' Percentages are refused unless `allowMemoryPercent` is set, since they mean a different cap on each host.'
        : '';
    const forms = allowPercent
      ? `${MEMORY_FORMS}, or a percentage from 0.01% to 100%`
      : MEMORY_FORMS;
    throw new CapsValueError(
      key,
      value,
      `Invalid memoryMax ${showValue(value)}${where}: expected ${forms} (systemd MemoryMax=).${percent}`,
    );
  }
}

/**
 * Check `caps` against the systemd grammar and return it.
 *
 * @param caps - The caps to check.
 * @param options - `allowMemoryPercent`.
 * @returns The same object.
 * @throws {@link errors!CapsValueError} naming the first invalid field and the accepted forms.
 * @throws {@link errors!InvalidInputError} for a key other than `cpuQuota` and `memoryMax` (in
 * `caps`) or `allowMemoryPercent` (in `options`), naming it and the nearest accepted key.
 * @throws `TypeError` when `caps` is not an object or a field is neither a string nor unset.
 *
 * @example
 * ```ts
 * import { validateAgentCaps } from 'scaler-primitives/agent-caps';
 *
 * validateAgentCaps({ cpuQuota: '400%', memoryMax: '8G' }); // ok
 * validateAgentCaps({ memoryMax: '8GB' }); // throws CapsValueError
 * ```
 */
export function validateAgentCaps(
  caps: AgentCaps,
  options?: {
    /**
     * Accept a percentage for `memoryMax` (`"50%"` of the host's memory). Refused by
     * default: caps travel between hosts with different amounts of memory.
     * @default false
     */
    allowMemoryPercent?: boolean;
  },
): AgentCaps {
  checkCaps(caps, checkCapsOptions(options, CAPS_OPTION_KEYS, 'caps options'));
  return caps;
}

/** {@link validateAgentCaps} with options already checked by the caller. */
export function checkCaps(caps: AgentCaps, options: CapsValueOptions): void {
  if (typeof caps !== 'object' || caps === null || Array.isArray(caps)) {
    throw new TypeError(
      `Expected \`caps\` to be an object such as { cpuQuota: '400%' }, got \`${caps === null ? 'null' : typeof caps}\``,
    );
  }
  // A typo (`memoryMAx`, `cpu_quota`) would otherwise leave the agent uncapped.
  strictObject(caps, CAPS_KEYS, 'agent caps');
  for (const { key } of FIELDS) {
    const value: unknown = caps[key];
    if (value === undefined || value === null) continue;
    if (typeof value !== 'string') {
      throw new TypeError(
        `Expected \`caps.${key}\` to be a string or undefined, got \`${typeof value}\` (\`${String(value)}\`)`,
      );
    }
    checkField(key, value, options, '');
  }
}

/**
 * True when no field is set (`AgentCaps::is_empty` of the Rust crate): such caps mean the
 * same as no key at all to a host applying them, so a controller can delete the key
 * instead of writing `{}`. A field set to `null` (as a raw decode may hold) counts as unset.
 * Only the shape is checked, not the systemd grammar.
 *
 * @param caps - The caps.
 * @throws {@link errors!InvalidInputError} for an unknown key in `caps` (`cpu_quota` for
 * `cpuQuota`, say), naming the nearest accepted key.
 * @throws `TypeError` when `caps` is not an object.
 *
 * @example
 * ```ts
 * import { isEmpty } from 'scaler-primitives/agent-caps';
 *
 * isEmpty({}); // true
 * isEmpty({ memoryMax: '8G' }); // false
 * ```
 */
export function isEmpty(caps: AgentCaps): boolean {
  // Shape only (no grammar check): raw decoded caps may be asked too.
  if (typeof caps !== 'object' || caps === null || Array.isArray(caps)) {
    throw new TypeError(
      `Expected \`caps\` to be an object, got \`${caps === null ? 'null' : typeof caps}\``,
    );
  }
  strictObject(caps, CAPS_KEYS, 'agent caps');
  return (
    (caps.cpuQuota === undefined || caps.cpuQuota === null) &&
    (caps.memoryMax === undefined || caps.memoryMax === null)
  );
}

const encoder = new TextEncoder();

/**
 * Encode caps into the bytes stored in the `agent-limits` bucket:
 * `{"cpu_quota":"400%","memory_max":"8G"}`, fields in that order, unset fields
 * absent (never `null`), `{}` when nothing is set. Byte for byte what the Rust
 * `swarm-queue-client` crate writes.
 *
 * @param caps - The caps; checked against the systemd grammar first.
 * @param options - `allowMemoryPercent`.
 * @returns UTF-8 JSON bytes.
 * @throws {@link errors!CapsValueError} when a value is not valid systemd syntax: nothing invalid is ever encoded.
 * @throws {@link errors!InvalidInputError} for an unknown key in `caps` or `options` (a typo
 * would otherwise encode a value without that cap).
 * @throws `TypeError` when `caps` is not an object or a field is not a string.
 *
 * @example
 * ```ts
 * import { encodeAgentCaps } from 'scaler-primitives/agent-caps';
 *
 * new TextDecoder().decode(encodeAgentCaps({ memoryMax: '8G' })); // '{"memory_max":"8G"}'
 * ```
 */
export function encodeAgentCaps(
  caps: AgentCaps,
  options?: {
    /**
     * Accept a percentage for `memoryMax` (`"50%"` of the host's memory). Refused by
     * default: caps travel between hosts with different amounts of memory.
     * @default false
     */
    allowMemoryPercent?: boolean;
  },
): Uint8Array {
  validateAgentCaps(caps, options);
  // Built by hand rather than from an object so the field order is fixed.
  const parts: string[] = [];
  for (const { key, wire } of FIELDS) {
    const value = caps[key];
    if (typeof value === 'string') parts.push(`"${wire}":${JSON.stringify(value)}`);
  }
  return encoder.encode(`{${parts.join(',')}}`);
}

// serde's Option<String> reads `null` as unset; unknown fields are stripped.
const wireSchema = z.object({
  cpu_quota: z.string().nullish(),
  memory_max: z.string().nullish(),
});

const decoder = new TextDecoder('utf-8', { fatal: true });

/**
 * Decode the bytes (or string) stored under an agent's key.
 *
 * `{}` decodes to all unset; unknown fields are ignored, so a newer writer
 * that adds fields does not cost an older reader its caps; `null` reads as
 * unset, as it does for the Rust crate.
 *
 * @param data - The stored value: UTF-8 JSON bytes or a string.
 * @param options - `raw` to skip the systemd grammar check; `allowMemoryPercent`.
 * @returns The caps, with unset fields absent.
 * @throws {@link errors!CapsValueError} (`field` is `value`) when the data is larger than
 * 64 KiB or not UTF-8 JSON
 * of an object with string fields, or (`field` is `cpuQuota`/`memoryMax`) when a
 * value is not valid systemd syntax and `raw` is not set.
 *
 * @example
 * ```ts
 * import { decodeAgentCaps } from 'scaler-primitives/agent-caps';
 *
 * decodeAgentCaps('{"cpu_quota":"400%","io_weight":"10"}'); // { cpuQuota: '400%' }
 * ```
 */
export function decodeAgentCaps(
  data: Uint8Array | string,
  options?: {
    /**
     * Accept a percentage for `memoryMax` (`"50%"` of the host's memory). Refused by
     * default: caps travel between hosts with different amounts of memory.
     * @default false
     */
    allowMemoryPercent?: boolean;
    /**
     * Return the values as stored, without the systemd grammar check (the JSON shape is
     * still checked). For inspection tools only: never hand raw values to systemd.
     * @default false
     */
    raw?: boolean;
  },
): AgentCaps {
  const opts = checkCapsOptions<DecodeAgentCapsOptions>(
    options,
    DECODE_OPTION_KEYS,
    'decode options',
  );
  if (typeof data !== 'string' && !(data instanceof Uint8Array)) {
    throw new TypeError(
      `Expected \`data\` to be a Uint8Array or a string, got \`${data === null ? 'null' : typeof data}\``,
    );
  }
  const size = typeof data === 'string' ? Buffer.byteLength(data) : data.byteLength;
  if (size > MAX_CAPS_VALUE_BYTES) {
    throw new CapsValueError(
      'value',
      `${size} bytes`,
      `Agent caps value is ${size} bytes: at most ${MAX_CAPS_VALUE_BYTES} are read (a caps value is a few dozen bytes).`,
    );
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(typeof data === 'string' ? data : decoder.decode(data));
  } catch (error) {
    throw new CapsValueError(
      'value',
      typeof data === 'string' ? data : data.slice(0, 256),
      `Agent caps value is not UTF-8 JSON: expected an object such as {"cpu_quota":"400%","memory_max":"8G"}.`,
      { cause: error },
    );
  }
  const result = wireSchema.safeParse(parsed);
  if (!result.success) {
    const issue = result.error.issues[0];
    const where = issue && issue.path.length > 0 ? ` at ${issue.path.join('.')}` : '';
    throw new CapsValueError(
      'value',
      parsed,
      `Agent caps value has the wrong shape${where}: expected an object whose "cpu_quota" and "memory_max" are strings when present, such as {"cpu_quota":"400%","memory_max":"8G"}.`,
      { cause: result.error },
    );
  }
  const caps: AgentCaps = {};
  if (typeof result.data.cpu_quota === 'string') caps.cpuQuota = result.data.cpu_quota;
  if (typeof result.data.memory_max === 'string') caps.memoryMax = result.data.memory_max;
  if (opts.raw !== true) {
    for (const { key } of FIELDS) {
      const value = caps[key];
      if (value !== undefined) checkField(key, value, opts, ' in a stored caps value');
    }
  }
  return caps;
}
