import { type ParseArgsConfig, parseArgs } from 'node:util';
import { UsageError } from './registry.js';

type Options = NonNullable<ParseArgsConfig['options']>;

/** What {@link parseCommandArgs} returns for an options table `O`. */
export type ParsedCommandArgs<O extends Options> = ReturnType<
  typeof parseArgs<{ options: O; allowPositionals: true; strict: true }>
>;

/**
 * Parse a command's arguments strictly (unknown options refused); a parse error is a
 * {@link UsageError} (exit code 2, with a hint to `--help`).
 */
export function parseCommandArgs<O extends Options>(
  args: string[],
  options: O,
): ParsedCommandArgs<O> {
  try {
    return parseArgs({ args, options, allowPositionals: true, strict: true });
  } catch (error) {
    throw new UsageError((error as Error).message);
  }
}

/** Read standard input to the end as UTF-8 (for `-` arguments). */
export async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}
