import { escapeText } from './escape.js';
import type { FlagNames } from './flags.js';

/**
 * The operator CLI's command registry. Each command lives in `commands/<name>.ts`
 * and is listed in `main.ts`; `main` dispatches on the first argument.
 */

/** Where a command writes, so tests and embedders can capture it. */
export interface CliIO {
  /** Write to standard output (the text is written as is). */
  out(text: string): void;
  /** Write to standard error (the text is written as is). */
  err(text: string): void;
  /** The environment (for defaults such as `SCALER_PRIMITIVES_LEDGER_DIR`). */
  env: NodeJS.ProcessEnv;
  /** Standard output is a terminal (live views redraw in place). @default false */
  isTTY?: boolean;
  /** Clear the terminal and write `text` (live views on a terminal). */
  redraw?(text: string): void;
}

/** One top-level command, e.g. `ledger`. */
export interface CliCommand {
  /** The word that selects it. */
  name: string;
  /** One line for the top-level help. */
  summary: string;
  /** Its full help text. */
  help: string;
  /** Help for each subcommand (`<command> <sub> --help`); the full help when absent. */
  subcommands?: Readonly<Record<string, string>>;
  /** Its options, as `parseArgs` takes them (`type: 'string'` for a flag with a value). */
  options?: Readonly<Record<string, { type: 'string' | 'boolean'; multiple?: boolean }>>;
  /**
   * For each flag, the names the library uses for its value, so that an error names the
   * flag instead, e.g. `{ '--cpu-quota': ['cpuQuota'] }` (see `flags.ts`).
   */
  flags?: FlagNames;
  /** Run with the arguments after the command word; resolves to the exit code. */
  run(args: string[], io: CliIO): Promise<number>;
}

/** A usage mistake: printed with a hint to `--help`, exit code 2. */
export class UsageError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'UsageError';
  }
}

/**
 * Render rows as an aligned table: a header line, then one line per row. Every cell is
 * escaped ({@link escapeText}): ids and names come from files other processes write.
 */
export function table(headers: string[], cells: string[][], rightAligned: number[] = []): string {
  const rows = cells.map((row) => row.map(escapeText));
  const widths = headers.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: string[]) =>
    cells
      .map((cell, i) =>
        rightAligned.includes(i) ? cell.padStart(widths[i]!) : cell.padEnd(widths[i]!),
      )
      .join('  ')
      .trimEnd();
  return `${[line(headers), ...rows.map(line)].join('\n')}\n`;
}
