import { isScalerError } from '../errors.js';
import { commands } from './commands/index.js';
import { type CliIO, UsageError } from './registry.js';

const NAME = 'scaler-primitives';

function topHelp(): string {
  const width = Math.max(...commands.map((c) => c.name.length));
  return [
    `Usage: ${NAME} <command> [arguments] [options]`,
    '',
    'Commands:',
    ...commands.map((c) => `  ${c.name.padEnd(width)}  ${c.summary}`),
    '',
    `Run \`${NAME} <command> --help\` for a command's arguments and options.`,
    '',
  ].join('\n');
}

/**
 * Run the CLI with `argv` (without `node` and the script) and resolve to the exit code:
 * 0 success, 1 failure, 2 usage error.
 */
export async function main(argv: string[], io: CliIO): Promise<number> {
  const [name, ...rest] = argv;
  if (name === undefined || name === '--help' || name === '-h' || name === 'help') {
    io.out(topHelp());
    return name === undefined ? 2 : 0;
  }
  const command = commands.find((c) => c.name === name);
  if (!command) {
    io.err(`${NAME}: unknown command ${JSON.stringify(name)}\n\n${topHelp()}`);
    return 2;
  }
  if (rest.includes('--help') || rest.includes('-h')) {
    io.out(command.help);
    return 0;
  }
  try {
    return await command.run(rest, io);
  } catch (error) {
    if (error instanceof UsageError) {
      io.err(
        `${NAME} ${command.name}: ${error.message}\nRun \`${NAME} ${command.name} --help\` for usage.\n`,
      );
      return 2;
    }
    if (isScalerError(error) || error instanceof TypeError) {
      const code = isScalerError(error) ? ` [${error.code}]` : '';
      io.err(`${NAME} ${command.name}: ${error.message}${code}\n`);
      return 1;
    }
    io.err(
      `${NAME} ${command.name}: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`,
    );
    return 1;
  }
}
