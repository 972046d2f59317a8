import { InvalidInputError } from '../errors/index.js';
import { nearest } from '../internal/strict-keys.js';

/** A domain-prefixed resource name such as `nvidia.com/gpu`. */
export type ExtendedResourceName = `${string}/${string}`;

/** The longest extended resource name: a 253-character DNS prefix, `/`, a 63-character name. */
export const MAX_EXTENDED_NAME_LENGTH = 317;

// Kubernetes qualified names: a DNS-1123 subdomain prefix, then a name part.
const DNS_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const NAME_PART = /^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$/;

/** The most device ids a cap may list for one resource. */
export const MAX_DEVICE_IDS = 256;

/** A device id: 1 to 128 characters of letters, digits and `. _ : / -`. */
const DEVICE_ID = /^[A-Za-z0-9._:/-]{1,128}$/;

/** Why `id` is not a device id, or undefined when it is one. */
export function deviceIdProblem(id: unknown): string | undefined {
  if (typeof id !== 'string') return `it is a ${id === null ? 'null' : typeof id}, not a string`;
  if (!DEVICE_ID.test(id)) {
    return 'a device id is 1 to 128 characters of letters, digits and . _ : / - (e.g. "0", "GPU-8f6e0c1a", "0000:3b:00.0")';
  }
  return undefined;
}

/**
 * Why `ids` is not a list of device ids (at least `min`, at most
 * {@link MAX_DEVICE_IDS}, each a device id, none twice), or undefined when it is one.
 */
export function deviceIdsProblem(ids: unknown, min = 1): string | undefined {
  if (!Array.isArray(ids))
    return `it must list ${min} to ${MAX_DEVICE_IDS} device ids, got ${String(ids)}`;
  if (ids.length < min || ids.length > MAX_DEVICE_IDS) {
    return `it must list ${min} to ${MAX_DEVICE_IDS} device ids, got ${ids.length}`;
  }
  const seen = new Set<string>();
  for (const id of ids) {
    const problem = deviceIdProblem(id);
    if (problem !== undefined) {
      return `Invalid device id ${JSON.stringify(String(id).slice(0, 140))}: ${problem}`;
    }
    if (seen.has(id))
      return `device id ${JSON.stringify(id)} is listed twice; list each device once`;
    seen.add(id);
  }
  return undefined;
}

/**
 * Why `name` is not an extended resource name, or `undefined` when it is one.
 * Kubernetes' rule: `<prefix>/<name>`, the prefix a lower-case DNS subdomain of
 * at most 253 characters outside `kubernetes.io` (whose names are native), the
 * name at most 63 characters of `[A-Za-z0-9._-]` starting and ending alphanumeric.
 */
export function extendedNameProblem(name: string): string | undefined {
  if (name.length > MAX_EXTENDED_NAME_LENGTH) {
    return `it is longer than ${MAX_EXTENDED_NAME_LENGTH} characters`;
  }
  const slash = name.indexOf('/');
  if (slash < 0) return 'it has no domain prefix (write e.g. "nvidia.com/gpu")';
  const prefix = name.slice(0, slash);
  const part = name.slice(slash + 1);
  if (
    prefix.length === 0 ||
    prefix.length > 253 ||
    !prefix.split('.').every((l) => DNS_LABEL.test(l) && l.length <= 63)
  ) {
    return 'its prefix is not a lower-case DNS name of at most 253 characters';
  }
  if (prefix === 'kubernetes.io' || prefix.endsWith('.kubernetes.io')) {
    return 'the kubernetes.io prefix is reserved for native resources';
  }
  if (part.length === 0 || part.length > 63 || !NAME_PART.test(part)) {
    return 'its name after the "/" is not 1-63 characters of A-Z a-z 0-9 . _ - starting and ending with a letter or digit';
  }
  return undefined;
}

/**
 * True when `name` is a valid extended resource name, as Kubernetes names them:
 * `<prefix>/<name>`, the prefix a lower-case DNS subdomain outside `kubernetes.io`,
 * the name 1-63 characters of `A-Z a-z 0-9 . _ -` (`nvidia.com/gpu`, `example.com/fpga`).
 *
 * @example
 * ```ts
 * import { isExtendedResourceName } from 'scaler-primitives/resources';
 *
 * isExtendedResourceName('nvidia.com/gpu'); // true
 * isExtendedResourceName('gpu'); // false: a name needs a domain prefix
 * ```
 */
export function isExtendedResourceName(name: unknown): name is `${string}/${string}` {
  return typeof name === 'string' && extendedNameProblem(name) === undefined;
}

/**
 * Check an extended resource name, as Kubernetes names extended resources:
 * domain-prefixed (`nvidia.com/gpu`, `example.com/fpga`).
 *
 * @param where - Where the name was found, for the messages (e.g. `cap.maxExtended`).
 * @returns The name, unchanged.
 * @throws `InvalidInputError` naming the value and what is wrong with it.
 * @throws TypeError when `name` is not a string.
 */
export function validateExtendedResourceName(name: unknown, where?: string): ExtendedResourceName {
  const at = () => (where === undefined ? '' : ` in ${where}`);
  if (typeof name !== 'string') {
    throw new TypeError(`Expected a resource name${at()} to be a string, got \`${typeof name}\``);
  }
  const problem = extendedNameProblem(name);
  if (problem !== undefined) {
    const shown =
      name.length > 80
        ? `${JSON.stringify(name.slice(0, 40))}... (${name.length} characters)`
        : JSON.stringify(name);
    throw new InvalidInputError(
      'extended resource name',
      name,
      `Invalid extended resource name ${shown}${at()}: ${problem}. Expected <dns-prefix>/<name>, e.g. "nvidia.com/gpu".`,
    );
  }
  return name as ExtendedResourceName;
}

/**
 * The sentence for an unknown key: names it, the accepted keys, and the nearest one.
 *
 * @param where - What the object is, e.g. `job resources`.
 * @param key - The unknown key.
 * @param accepted - The keys that are accepted there.
 * @param extra - A note on further accepted keys (e.g. extended resource names).
 */
export function unknownKeyMessage(
  where: string,
  key: string,
  accepted: readonly string[],
  extra = '',
): string {
  const near = nearest(key, accepted);
  const shown = key.length > 80 ? `${JSON.stringify(key.slice(0, 40))}...` : JSON.stringify(key);
  return `Unknown key ${shown} in ${where}${near ? ` (did you mean "${near}"?)` : ''}. Accepted keys: ${accepted.join(', ')}${extra}.`;
}
