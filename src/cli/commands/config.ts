/**
 * `scaler-primitives config check <file>`: validate a ScalerManager config and print
 * every problem with its path.
 */
import { extname } from 'node:path';
import { formatConfigPath, validateScalerConfig } from '../../manager/index.js';
import { formatCpu, formatMemory } from '../../resources/index.js';
import { parseCommandArgs, readInputFile, subcommandError } from '../args.js';
import { escapeText, jsonText } from '../escape.js';
import { type CliCommand, type CliIO, table, UsageError } from '../registry.js';

const help = `Usage: scaler-primitives config check <file> [options]

Validate a ScalerManager configuration (the \`config\` given to \`new ScalerManager\`
and to \`reload\`) without starting anything: the schema (names, counts, quantities
such as "500m" and "8Gi"), unknown keys (typos), and the rules across fields (unique
scaler names, machine pools that exist, no user label using the automatic-label
prefix, mandatory labels present in every label set, warm pools within maxAgents,
label-set resources whose request would exceed their limit).

Prints a summary of the scalers when the file is valid; otherwise every problem, one
per line, as \`<path>: <message>\` (e.g. \`scalers[0].labelSets[1].labels: ...\`).

Arguments:
  <file>          A JSON file (a regular file of at most 1 MiB), or \`-\` for standard input. YAML (.yaml, .yml) is read
                  only when the \`yaml\` package is installed alongside
                  scaler-primitives; it is not a dependency, so otherwise convert
                  the file to JSON.

Options:
  --json          Print the result as JSON on standard output:
                  { "ok": true, "config": <the parsed config, quantities as numbers,
                  defaults filled in> } or { "ok": false, "errors": [{ "path": [...],
                  "message" }] } (every problem, schema and cross-field, in one pass).
  -h, --help      Show this help.

Exit codes: 0 valid, 1 invalid or unreadable, 2 usage error.

Example:
  scaler-primitives config check /etc/ci/scalers.json
`;

const options = { json: { type: 'boolean', default: false } } as const;

/** The `config` command. */
export const configCommand: CliCommand = {
  name: 'config',
  summary: 'Validate a ScalerManager config file and print every issue with its path (check).',
  help,
  options,
  subcommands: { check: help },
  async run(args, io) {
    const parsed = parseCommandArgs(args, options);
    const [sub, file, ...extra] = parsed.positionals;
    if (sub !== 'check') throw subcommandError(sub, ['check']);
    if (file === undefined) throw new UsageError('missing <file> (a JSON file, or - for stdin)');
    if (extra.length > 0) throw new UsageError(`expected one file, got ${extra.length + 1}`);
    return check(file, parsed.values.json, io);
  },
};

async function check(file: string, json: boolean, io: CliIO): Promise<number> {
  let value: unknown;
  try {
    value = await load(file);
  } catch (error) {
    const message = (error instanceof Error ? error.message : String(error)).replace(
      /\s*\n\s*/g,
      ' ',
    );
    if (json) io.out(jsonText({ ok: false, errors: [{ path: [], message }] }));
    else io.err(`${escapeText(file)}: ${escapeText(message)}\n`);
    return 1;
  }
  const result = validateScalerConfig(value);
  if (json) {
    io.out(jsonText(result.ok ? { ok: true, config: result.config } : result));
    return result.ok ? 0 : 1;
  }
  if (!result.ok) {
    const n = result.errors.length;
    io.err(`${escapeText(file)}: ${n} problem${n === 1 ? '' : 's'}\n`);
    for (const e of result.errors) {
      io.err(`  ${escapeText(formatConfigPath(e.path))}: ${escapeText(e.message)}\n`);
    }
    return 1;
  }
  const config = result.config;
  const pools = Object.keys(config.machinePools);
  io.out(
    `${escapeText(file)}: valid. ${config.scalers.length} scaler${config.scalers.length === 1 ? '' : 's'}, globalMaxAgents ${config.globalMaxAgents}, ${pools.length} machine pool${pools.length === 1 ? '' : 's'}${pools.length ? ` (${pools.map(escapeText).join(', ')})` : ''}, automatic-label prefix "${escapeText(config.autoLabelPrefix)}"\n\n`,
  );
  const cap = (c: { maxCpu?: number; maxMemoryBytes?: number } | undefined) =>
    c === undefined
      ? '-'
      : [
          c.maxCpu === undefined ? undefined : `${formatCpu(c.maxCpu)} cpu`,
          c.maxMemoryBytes === undefined ? undefined : formatMemory(c.maxMemoryBytes),
        ]
          .filter(Boolean)
          .join(', ') || '-';
  io.out(
    table(
      ['scaler', 'type', 'max', 'label sets', 'mandatory', 'pool', 'cap', 'warm'],
      config.scalers.map((s) => [
        s.name,
        s.type,
        String(s.maxAgents),
        s.labelSets.map((set) => `[${set.labels.join(',')}]`).join(' '),
        s.mandatoryLabels.join(',') || '-',
        (s.machinePools ?? (s.machinePool === undefined ? [] : [s.machinePool])).join(',') || '-',
        cap(s.resourceCap),
        s.warmPool ? `${s.warmPool.size} (idle ${s.warmPool.idleTimeoutSeconds}s)` : '-',
      ]),
      [2],
    ),
  );
  return 0;
}

async function load(file: string): Promise<unknown> {
  const text = await readInputFile(file);
  const ext = extname(file).toLowerCase();
  if (ext === '.yaml' || ext === '.yml') return parseYaml(text);
  try {
    return JSON.parse(text);
  } catch (error) {
    throw new Error(`not valid JSON: ${(error as Error).message}`);
  }
}

async function parseYaml(text: string): Promise<unknown> {
  // Optional: loaded only when installed; a variable specifier keeps bundlers from
  // pulling it in.
  const specifier = 'yaml';
  let yaml: { parse(text: string): unknown };
  try {
    yaml = (await import(specifier)) as { parse(text: string): unknown };
  } catch {
    throw new Error(
      'reading YAML needs the `yaml` package (npm install yaml), which scaler-primitives does not depend on; or convert the file to JSON',
    );
  }
  try {
    return yaml.parse(text);
  } catch (error) {
    throw new Error(`not valid YAML: ${(error as Error).message}`);
  }
}
