/**
 * Errors name the flag the user typed. The library names the values it refuses by its
 * own words (`cpuQuota`, `interface name`, `allowMemoryPercent`); each command lists,
 * per flag, the words the library uses for that flag's value, and {@link flagMessage}
 * turns a library message into one that names the flag.
 */

/**
 * For each flag of a command, the names the library uses for the value it sets: option
 * names (`cpuQuota`, `allowMemoryPercent`), the `field` of a `CapsValueError`, the
 * `what` of an `InvalidInputError` (`interface name`), the `kind` of a
 * `ResourceParseError`. The first is the one replaced by the flag in a message.
 */
export type FlagNames = Readonly<Record<string, readonly string[]>>;

interface Mark {
  flag: string;
  verbatim: boolean;
}

// Errors thrown inside forFlag, and the flag whose value they are about.
const marks = new WeakMap<object, Mark>();

function mark(error: unknown, flag: string, verbatim: boolean): void {
  if (typeof error === 'object' && error !== null && !marks.has(error)) {
    marks.set(error, { flag, verbatim });
  }
}

/**
 * Run `fn` (sync or async); an error it throws is about the value of `flag`, and its
 * message will name the flag. `verbatim`: the value is a document (a policy file) whose
 * keys the message names as the user wrote them, so option names in it are kept.
 */
export function forFlag<T>(flag: string, fn: () => T, options: { verbatim?: boolean } = {}): T {
  const verbatim = options.verbatim === true;
  try {
    const result = fn();
    if (result instanceof Promise) {
      return result.catch((error: unknown) => {
        mark(error, flag, verbatim);
        throw error;
      }) as T;
    }
    return result;
  } catch (error) {
    mark(error, flag, verbatim);
    throw error;
  }
}

/** Whether `flag` was given on the command line (before a `--`). */
export function flagGiven(flag: string, args: readonly string[]): boolean {
  for (const arg of args) {
    if (arg === '--') return false;
    if (arg === flag || arg.startsWith(`${flag}=`)) return true;
  }
  return false;
}

// The words an error carries about the value it refused.
function errorWords(error: Error): string[] {
  const e = error as { field?: unknown; what?: unknown; kind?: unknown };
  return [e.field, e.what, e.kind].filter((w): w is string => typeof w === 'string');
}

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

function wordPattern(word: string, flags = ''): RegExp {
  return new RegExp(`(?<![\\w-])${escapeRegExp(word)}(?![\\w-])`, flags);
}

/** The flag a failure is about: the one it was thrown for, else the one whose value the library named. */
function flagOf(error: Error, names: FlagNames, args: readonly string[]): Mark | undefined {
  const marked = marks.get(error);
  if (marked !== undefined) return flagGiven(marked.flag, args) ? marked : undefined;
  const words = errorWords(error);
  if (words.length === 0) return undefined;
  for (const [flag, libraryNames] of Object.entries(names)) {
    if (flagGiven(flag, args) && libraryNames.some((n) => words.includes(n))) {
      return { flag, verbatim: false };
    }
  }
  return undefined;
}

/**
 * The message of a failure, naming the flag behind it: the library's name for the value
 * is replaced by the flag (`Invalid cpuQuota "400"` becomes `Invalid --cpu-quota "400"`),
 * or the flag is put first (`--cpus: Invalid CPU quantity "abc" ...`); option names in
 * backticks (a hint such as "set `allowMemoryPercent`") become the flags that set them.
 */
export function flagMessage(
  error: Error,
  names: FlagNames,
  args: readonly string[],
  text: string = error.message,
): string {
  let message = text;
  const found = flagOf(error, names, args);
  if (found?.verbatim !== true) {
    for (const [flag, libraryNames] of Object.entries(names)) {
      for (const name of libraryNames) message = message.replaceAll(`\`${name}\``, `\`${flag}\``);
    }
  }
  if (found === undefined) return message;
  const { flag } = found;
  if (!found.verbatim) {
    // A marked error may name a key of the flag's document (a stored caps value's
    // `cpuQuota`): only the flag's own names are replaced there.
    const own = names[flag] ?? [];
    const words = marks.has(error) ? own : [...errorWords(error), ...own];
    for (const word of words) {
      const pattern = wordPattern(word);
      if (pattern.test(message)) {
        message = message.replace(pattern, flag);
        break;
      }
    }
  }
  return wordPattern(flag).test(message) ? message : `${flag}: ${message}`;
}
