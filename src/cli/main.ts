import pkg from '../../package.json' with { type: 'json' };
import { isScalerError } from '../errors/index.js';
import { nearest } from '../internal/strict-keys.js';
import { capsCommand } from './commands/caps.js';
import { configCommand } from './commands/config.js';
import { ledgerCommand } from './commands/ledger.js';
import { nftCommand } from './commands/nft.js';
import { guardText, messageLine } from './escape.js';
import { flagMessage } from './flags.js';
import { type CliCommand, type CliIO, UsageError } from './registry.js';

const NAME = 'scaler-primitives';

/** Every command of the CLI, in help order. */
const commands: CliCommand[] = [ledgerCommand, configCommand, nftCommand, capsCommand];

/** The version printed by `--version`. */
export const VERSION: string = pkg.version;

function topHelp(): string {
  const width = Math.max(...commands.map((c) => c.name.length));
  return [
    `Usage: ${NAME} <command> [subcommand] [arguments] [options]`,
    '',
    'Commands:',
    ...commands.map((c) => `  ${c.name.padEnd(width)}  ${c.summary}`),
    '',
    'Options:',
    "  -h, --help     Show this help (or a command's: <command> --help).",
    '  -v, --version  Print the version.',
    '',
    `Run \`${NAME} <command> --help\` for a command's arguments and options.`,
    '',
  ].join('\n');
}

function oneLine(message: string): string {
  return messageLine(message);
}

function failure(error: unknown, command: CliCommand, args: readonly string[]): string {
  if (!(error instanceof Error)) return oneLine(String(error));
  const code = (error as { code?: unknown }).code;
  // A file error (ENOENT, EACCES, EISDIR, ...): Node's message names the path.
  const text =
    !isScalerError(error) && typeof code === 'string' && !error.message.startsWith(code)
      ? `${code}: ${error.message}`
      : error.message;
  // The message names the flag the user typed, not the library option behind it.
  const message = oneLine(flagMessage(error, command.flags ?? {}, args, text));
  return isScalerError(error) ? `${message} [${error.code}]` : message;
}

/**
 * Run the CLI with `argv` (without `node` and the script) and resolve to the exit code:
 * 0 success, 1 failure, 2 usage error. Every failure is one line on standard error;
 * usage goes to standard output only when asked for with `--help`.
 */
export async function main(argv: string[], rawIo: CliIO): Promise<number> {
  // Last guard: nothing the CLI prints carries a raw control character.
  const io: CliIO = {
    out: (text) => rawIo.out(guardText(text)),
    err: (text) => rawIo.err(guardText(text)),
    env: rawIo.env,
    isTTY: rawIo.isTTY === true,
    ...(rawIo.redraw ? { redraw: (text: string) => rawIo.redraw!(guardText(text)) } : {}),
  };
  const [name, ...rest] = argv;
  if (name === undefined) {
    io.err(topHelp());
    return 2;
  }
  if (name === '--help' || name === '-h' || name === 'help') {
    io.out(topHelp());
    return 0;
  }
  if (name === '--version' || name === '-v') {
    io.out(`${VERSION}\n`);
    return 0;
  }
  const command = commands.find((c) => c.name === name);
  if (!command) {
    const what = name.startsWith('-') ? 'option' : 'command';
    const candidates = what === 'option' ? ['help', 'version'] : commands.map((c) => c.name);
    const suggestion = nearest(name.replace(/^-+/, ''), candidates);
    const hint =
      suggestion === undefined
        ? ''
        : `; did you mean ${what === 'option' ? `--${suggestion}` : suggestion}?`;
    io.err(
      `${NAME}: unknown ${what} ${oneLine(JSON.stringify(name.slice(0, 40)))}${hint} (run \`${NAME} --help\` for the commands)\n`,
    );
    return 2;
  }
  const helpAt = rest.findIndex((a) => a === '--help' || a === '-h');
  if (helpAt !== -1 && !rest.slice(0, helpAt).includes('--')) {
    const sub = rest[0];
    io.out((sub !== undefined && command.subcommands?.[sub]) || command.help);
    return 0;
  }
  try {
    return await command.run(rest, io);
  } catch (error) {
    if (error instanceof UsageError) {
      io.err(
        `${NAME} ${command.name}: ${oneLine(error.message)} (run \`${NAME} ${command.name} --help\` for usage)\n`,
      );
      return 2;
    }
    io.err(`${NAME} ${command.name}: ${failure(error, command, rest)}\n`);
    return 1;
  }
}
