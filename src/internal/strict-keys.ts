/**
 * Strict objects: every key a caller hands us must be one we read. A typo such as
 * `denyall: true` must never be silently ignored (for an isolation policy that would
 * fail open), so an unknown key is an error naming the key, the nearest accepted key
 * and every accepted one. Internal: not part of the public surface.
 */
import { InvalidInputError } from '../errors/index.js';

/**
 * Optimal string alignment distance: insert, delete, substitute and swap two neighbours
 * (`reqeusts` for `requests`) each cost 1.
 */
function distance(a: string, b: string): number {
  let beforePrevious: number[] = [];
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const current = [i];
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let d = Math.min(previous[j]! + 1, current[j - 1]! + 1, previous[j - 1]! + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) {
        d = Math.min(d, beforePrevious[j - 2]! + 1);
      }
      current.push(d);
    }
    beforePrevious = previous;
    previous = current;
  }
  return previous[b.length]!;
}

/**
 * The candidate nearest to `word` (ignoring case, `-` and `_`), or undefined when none is
 * close enough to be a plausible typo (at most a third of the word's length, minimum 2).
 * The one "did you mean" rule of the library: every strict-key check, the resource
 * names and the CLI use it, so a typo gets the same hint everywhere.
 */
export function nearest(word: string, candidates: readonly string[]): string | undefined {
  // Long inputs are never typos of short keys; bound the work on hostile input.
  if (word.length > 128) return undefined;
  const fold = (s: string) => s.toLowerCase().replace(/[-_]/g, '');
  const folded = fold(word);
  // An abbreviation (`proto` for `protocol`) is as plausible as a typo.
  if (folded.length >= 3) {
    const prefixed = candidates.filter((c) => fold(c).startsWith(folded));
    if (prefixed.length === 1) return prefixed[0];
  }
  let best: string | undefined;
  let bestDistance = Number.POSITIVE_INFINITY;
  for (const candidate of candidates) {
    const d = distance(folded, fold(candidate));
    if (d < bestDistance) {
      best = candidate;
      bestDistance = d;
    }
  }
  return bestDistance <= Math.max(2, Math.floor(folded.length / 3)) ? best : undefined;
}

const SHOW_MAX = 80;

/**
 * A value as an error message shows it: JSON-quoted, every control character (C0, DEL,
 * C1 such as a terminal's CSI, line separators, bidi overrides) escaped, and bounded,
 * so a message never carries a terminal escape or megabytes of hostile input.
 */
export function showValue(value: unknown): string {
  let text: string;
  if (typeof value === 'string') {
    text =
      value.length > SHOW_MAX
        ? `${JSON.stringify(value.slice(0, SHOW_MAX))}... (${value.length} characters)`
        : JSON.stringify(value);
  } else if (typeof value === 'bigint') {
    text = `${value}n`;
  } else if (typeof value === 'symbol') {
    text = value.toString();
  } else {
    try {
      text = JSON.stringify(value) ?? String(value);
    } catch {
      text = String(value);
    }
    if (text.length > SHOW_MAX * 2) text = `${text.slice(0, SHOW_MAX * 2)}...`;
  }
  return text.replace(
    // biome-ignore lint/suspicious/noControlCharactersInRegex: escaping them is the point.
    /[\u0000-\u001f\u007f-\u009f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g,
    (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`,
  );
}

function showKey(key: string | symbol): string {
  return showValue(key);
}

/**
 * Throw an `InvalidInputError` when `value` has an own key outside `accepted`.
 *
 * @param value - The object to check (must already be known to be a non-null object).
 * @param accepted - Every key the caller reads.
 * @param what - What the object is, e.g. `isolation policy`; used in the message.
 */
export function assertKnownKeys(value: object, accepted: readonly string[], what: string): void {
  const keys: Array<string | symbol> = Reflect.ownKeys(value);
  for (const key of keys) {
    if (typeof key === 'string' && accepted.includes(key)) continue;
    const suggestion = typeof key === 'string' ? nearest(key, accepted) : undefined;
    const hint = suggestion === undefined ? '' : ` Did you mean \`${suggestion}\`?`;
    throw new InvalidInputError(
      `${what} key`,
      key,
      `Unknown key ${showKey(key)} in ${what}.${hint} Accepted keys: ${accepted.map((k) => `\`${k}\``).join(', ')}.`,
    );
  }
}

/**
 * Check that `value` is a plain object (not null, not an array) with only `accepted`
 * keys, and return it.
 *
 * @throws {TypeError} when `value` is not an object.
 * @throws {InvalidInputError} for an unknown key.
 */
export function strictObject<T extends object>(
  value: unknown,
  accepted: readonly string[],
  what: string,
): T {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new TypeError(
      `Expected ${what} to be an object, got \`${value === null ? 'null' : Array.isArray(value) ? 'array' : typeof value}\``,
    );
  }
  assertKnownKeys(value, accepted, what);
  return value as T;
}

/** Like {@link strictObject}, but `undefined` is accepted and read as `{}`. */
export function strictOptions<T extends object>(
  value: unknown,
  accepted: readonly string[],
  what: string,
): T {
  if (value === undefined) return {} as T;
  return strictObject<T>(value, accepted, what);
}
