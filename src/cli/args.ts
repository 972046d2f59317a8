import { constants } from 'node:fs';
import { open } from 'node:fs/promises';
import { type ParseArgsConfig, parseArgs } from 'node:util';
import { nearest } from '../internal/strict-keys.js';
import { UsageError } from './registry.js';

type Options = NonNullable<ParseArgsConfig['options']>;

/** What {@link parseCommandArgs} returns for an options table `O`. */
export type ParsedCommandArgs<O extends Options> = ReturnType<
  typeof parseArgs<{ options: O; allowPositionals: true; strict: true }>
>;

function flag(name: string): string {
  return name.length === 1 ? `-${name}` : `--${name}`;
}

/** ` (did you mean --x?)` for the option nearest to `given`, or nothing. */
function didYouMean(given: string, options: Options): string {
  const names = Object.keys(options);
  const suggestion = nearest(given.replace(/^-+/, ''), names);
  return suggestion === undefined ? '' : `; did you mean ${flag(suggestion)}?`;
}

/**
 * Parse a command's arguments strictly. Every mistake is a {@link UsageError} (exit code
 * 2) of one line naming the option and, for an unknown one, the nearest valid option:
 * `unknown option --agnet; did you mean --agent?`, `--agent needs a value`,
 * `--json takes no value`. `-h`/`--help` are handled before this is called.
 */
export function parseCommandArgs<O extends Options>(
  args: string[],
  options: O,
): ParsedCommandArgs<O> {
  // First pass without strictness, to see every token and judge each one ourselves.
  const { tokens } = parseArgs({
    args,
    options,
    allowPositionals: true,
    strict: false,
    tokens: true,
  });
  for (const token of tokens) {
    if (token.kind !== 'option') continue;
    const spec = options[token.name];
    const shown = token.rawName;
    if (spec === undefined) {
      throw new UsageError(`unknown option ${shown}${didYouMean(token.name, options)}`);
    }
    if (spec.type === 'string' && token.value === undefined) {
      throw new UsageError(`${shown} needs a value`);
    }
    if (spec.type === 'string' && token.inlineValue === false && token.value?.startsWith('-')) {
      // `--agent --json` reads `--json` as the agent: almost always a missing value.
      const other = token.value.replace(/=.*$/, '').replace(/^-+/, '');
      if (options[other] !== undefined || token.value.startsWith('--')) {
        throw new UsageError(`${shown} needs a value (got the option ${token.value})`);
      }
    }
    if (spec.type === 'boolean' && token.inlineValue) {
      throw new UsageError(`${shown} takes no value`);
    }
    if (spec.type === 'string' && !spec.multiple) {
      const repeated = tokens.filter((t) => t.kind === 'option' && t.name === token.name);
      if (repeated.length > 1) throw new UsageError(`${shown} was given more than once`);
    }
  }
  try {
    return parseArgs({ args, options, allowPositionals: true, strict: true });
  } catch (error) {
    // Not expected after the checks above; still one line.
    throw new UsageError((error as Error).message.split('\n')[0] ?? 'invalid arguments');
  }
}

/**
 * The usage error for a missing or unknown subcommand, naming the nearest valid one:
 * `unknown subcommand "lss"; did you mean ls? (ls, usage, reap, release)`.
 */
export function subcommandError(sub: string | undefined, valid: readonly string[]): UsageError {
  const list = valid.join(', ');
  if (sub === undefined) return new UsageError(`missing subcommand: ${list}`);
  const suggestion = nearest(sub, valid);
  const hint = suggestion === undefined ? '' : `; did you mean ${suggestion}?`;
  return new UsageError(`unknown subcommand ${JSON.stringify(sub.slice(0, 40))}${hint} (${list})`);
}

/** The largest input file (or standard input) the CLI reads: 1 MiB. */
export const MAX_INPUT_BYTES = 1024 * 1024;

function tooLarge(what: string): Error {
  return new Error(`${what} is larger than ${MAX_INPUT_BYTES} bytes; the CLI reads at most 1 MiB`);
}

/** Read standard input to the end as UTF-8 (for `-` arguments), at most 1 MiB. */
export async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of process.stdin) {
    size += (chunk as Buffer).length;
    if (size > MAX_INPUT_BYTES) throw tooLarge('standard input');
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks).toString('utf8');
}

/**
 * Read a file the user named, as UTF-8: only a regular file (a FIFO would hang, a device
 * never end, a directory fail with a raw EISDIR) of at most 1 MiB, checked on the opened
 * descriptor before reading.
 */
export async function readInputFile(path: string): Promise<string> {
  if (path === '-') return readStdin();
  // O_NONBLOCK: opening a FIFO must not wait for a writer before we can refuse it.
  const handle = await open(path, constants.O_RDONLY | constants.O_NONBLOCK);
  try {
    const stat = await handle.stat();
    if (!stat.isFile()) {
      throw new Error(`${path} is not a regular file (a directory, FIFO, socket or device)`);
    }
    if (stat.size > MAX_INPUT_BYTES) throw tooLarge(path);
    const buffer = Buffer.alloc(MAX_INPUT_BYTES + 1);
    let length = 0;
    for (;;) {
      const { bytesRead } = await handle.read(buffer, length, buffer.length - length, null);
      if (bytesRead === 0) break;
      length += bytesRead;
      if (length > MAX_INPUT_BYTES) throw tooLarge(path);
    }
    return buffer.subarray(0, length).toString('utf8');
  } finally {
    await handle.close();
  }
}
