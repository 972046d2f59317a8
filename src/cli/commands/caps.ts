/**
 * `scaler-primitives caps encode|decode|dropin`: the per-agent caps codec from the
 * command line.
 */

import { DropInSection, type DropInSectionName } from '../../agent-caps/drop-in.js';
import {
  type AgentCaps,
  capsFromResources,
  decodeAgentCaps,
  encodeAgentCaps,
  renderDropIn,
  resourcesFromCaps,
} from '../../agent-caps/index.js';
import { formatCpu, formatMemory, parseCpu, parseMemory } from '../../resources/index.js';
import {
  type ParsedCommandArgs,
  parseCommandArgs,
  readInputFile,
  readStdin,
  subcommandError,
} from '../args.js';
import { jsonText } from '../escape.js';
import { forFlag } from '../flags.js';
import { type CliCommand, type CliIO, table, UsageError } from '../registry.js';

const help = `Usage: scaler-primitives caps encode <caps> [options]
       scaler-primitives caps decode <value | --file F | -> [options]
       scaler-primitives caps dropin <caps | --from-value V> [--section S] [options]

Per-agent CPU and memory caps as systemd understands them (CPUQuota=, MemoryMax=),
in the wire format of the \`agent-limits\` NATS KV bucket (byte-compatible with the
Rust swarm-queue-client crate). Every value is checked against the systemd grammar:
systemd silently ignores a line it cannot parse and leaves the unit uncapped.

Subcommands:
  encode          Print the wire value, e.g. {"cpu_quota":"400%","memory_max":"8G"}.
  decode          Read a wire value and print its caps and the resources they mean.
  dropin          Print the systemd drop-in that applies the caps, e.g.
                    [Service]
                    CPUQuota=400%
                    MemoryMax=8G
                  Empty caps print nothing: remove the drop-in file instead.

Caps (encode, dropin):
  --cpu-quota <q>       systemd CPUQuota=, e.g. 400% (four CPUs).
  --memory-max <m>      systemd MemoryMax=, e.g. 8G, 512M, 1073741824, infinity.
  --cpus <n>            Or give resources: cores (1.5, 500m), turned into CPUQuota=.
  --memory <m>          Or give resources: memory (8Gi, 2g, bytes), turned into MemoryMax=.

Options:
  --file <path>         decode: read the value from a file (\`-\` for standard input).
  --from-value <json>   dropin: take the caps from a wire value instead.
  --section <s>         dropin: Service (default), Scope or Slice.
  --allow-memory-percent
                        Accept MemoryMax= as a percentage of the host's memory.
  --raw                 decode: print the values as stored, without the grammar check.
  --json                Print JSON: encode { "value", "caps" }; decode the caps
                        { "cpuQuota"?, "memoryMax"? }; dropin { "section", "caps",
                        "text" } (unset fields are absent).
  -h, --help            Show this help.

Exit codes: 0 success, 1 invalid value (the message names the field), 2 usage error.

Examples:
  scaler-primitives caps encode --cpus 3.5 --memory 6Gi
  scaler-primitives caps decode '{"cpu_quota":"400%","memory_max":"8G"}'
  scaler-primitives caps dropin --cpu-quota 200% --memory-max 4G --section Scope
`;

const options = {
  'cpu-quota': { type: 'string' },
  'memory-max': { type: 'string' },
  cpus: { type: 'string' },
  memory: { type: 'string' },
  file: { type: 'string' },
  'from-value': { type: 'string' },
  section: { type: 'string' },
  'allow-memory-percent': { type: 'boolean', default: false },
  raw: { type: 'boolean', default: false },
  json: { type: 'boolean', default: false },
} as const;

type Values = ParsedCommandArgs<typeof options>['values'];

/** The `caps` command. */
export const capsCommand: CliCommand = {
  name: 'caps',
  summary: 'Encode, decode and render per-agent systemd caps (encode, decode, dropin).',
  help,
  options,
  subcommands: {
    encode: `Usage: scaler-primitives caps encode <caps> [--allow-memory-percent] [--json]

Print the agent-limits wire value, e.g. {"cpu_quota":"400%","memory_max":"8G"}.

Caps (at least one):
  --cpu-quota <q>       systemd CPUQuota=, e.g. 400% (four CPUs).
  --memory-max <m>      systemd MemoryMax=, e.g. 8G, 512M, 1073741824, infinity.
  --cpus <n>            Or cores (1.5, 500m), turned into CPUQuota= (rounded up).
  --memory <m>          Or memory (8Gi, 2g, bytes), turned into MemoryMax=.
  --json                Print { "value": <wire value>, "caps": { "cpuQuota"?, "memoryMax"? } }.

Exit codes: 0 printed, 1 invalid value (the message names the flag), 2 usage error.
`,
    decode: `Usage: scaler-primitives caps decode <value | --file F | -> [--raw] [--json]

Read a wire value and print its caps and the resources they mean. Unknown wire fields
are ignored (a newer writer's), as the Rust crate does; a value systemd would ignore
is refused unless --raw.

  --file <path>         Read the value from a regular file (\`-\` for standard input), at most 1 MiB.
  --raw                 Print the values as stored, without the grammar check.
  --allow-memory-percent
                        Accept MemoryMax= as a percentage of the host's memory.
  --json                Print the caps as { "cpuQuota"?, "memoryMax"? }.

Exit codes: 0 printed, 1 invalid or unreadable value, 2 usage error.
`,
    dropin: `Usage: scaler-primitives caps dropin <caps | --from-value V> [--section S] [--json]

Print the systemd drop-in that applies the caps (empty caps print nothing: remove the
drop-in file instead). Caps flags as for \`caps encode\`.

  --from-value <json>   Take the caps from a wire value instead of flags.
  --section <s>         Service (default), Scope or Slice.
  --json                Print { "section", "caps", "text" }.

Exit codes: 0 printed, 1 invalid value, 2 usage error.
`,
  },
  flags: {
    '--cpu-quota': ['cpuQuota'],
    '--memory-max': ['memoryMax'],
    '--cpus': ['cpus'],
    '--memory': ['memBytes'],
    '--section': ['section'],
    '--allow-memory-percent': ['allowMemoryPercent'],
  },
  async run(args, io) {
    const parsed = parseCommandArgs(args, options);
    const [sub, ...rest] = parsed.positionals;
    const v = parsed.values;
    const opts = { allowMemoryPercent: v['allow-memory-percent'] };
    switch (sub) {
      case 'encode': {
        noPositionals(rest);
        const caps = capsFromFlags(v, true);
        const value = new TextDecoder().decode(encodeAgentCaps(caps, opts));
        io.out(v.json ? jsonText({ value, caps }) : `${value}\n`);
        return 0;
      }
      case 'decode': {
        const value = await valueToDecode(rest, v);
        // A value read with --file: its errors name --file (ignored for a positional value).
        const caps = forFlag('--file', () => decodeAgentCaps(value, { ...opts, raw: v.raw }));
        printDecoded(caps, v, io);
        return 0;
      }
      case 'dropin': {
        noPositionals(rest);
        const section = v.section ?? 'Service';
        if (!Object.values(DropInSection).includes(section as DropInSectionName)) {
          throw new UsageError(
            `--section must be Service, Scope or Slice, got ${JSON.stringify(section)}`,
          );
        }
        let caps: AgentCaps;
        if (v['from-value'] !== undefined) {
          if (capsFromFlags(v, false) !== undefined) {
            throw new UsageError('--from-value cannot be combined with caps flags');
          }
          const value = v['from-value'];
          caps = forFlag('--from-value', () => decodeAgentCaps(value, opts));
        } else {
          caps = capsFromFlags(v, true);
        }
        const text = renderDropIn(caps, { ...opts, section: section as DropInSectionName });
        io.out(v.json ? jsonText({ section, caps, text }) : text);
        return 0;
      }
      default:
        throw subcommandError(sub, ['encode', 'decode', 'dropin']);
    }
  },
};

function noPositionals(rest: string[]): void {
  if (rest.length > 0) {
    throw new UsageError(
      `unexpected argument ${JSON.stringify(rest[0])}; give caps as flags (--cpu-quota, --memory-max, --cpus, --memory)`,
    );
  }
}

function capsFromFlags(v: Values, required: true): AgentCaps;
function capsFromFlags(v: Values, required: false): AgentCaps | undefined;
function capsFromFlags(v: Values, required: boolean): AgentCaps | undefined {
  const given = (['cpu-quota', 'memory-max', 'cpus', 'memory'] as const).filter(
    (k) => v[k] !== undefined,
  );
  if (given.length === 0) {
    if (!required) return undefined;
    throw new UsageError('give at least one of --cpu-quota, --memory-max, --cpus, --memory');
  }
  if (v['cpu-quota'] !== undefined && v.cpus !== undefined) {
    throw new UsageError('give --cpu-quota or --cpus, not both');
  }
  if (v['memory-max'] !== undefined && v.memory !== undefined) {
    throw new UsageError('give --memory-max or --memory, not both');
  }
  const fromResources = capsFromResources({
    ...(v.cpus !== undefined ? { cpus: forFlag('--cpus', () => parseCpu(v.cpus!)) } : {}),
    ...(v.memory !== undefined
      ? { memBytes: forFlag('--memory', () => parseMemory(v.memory!)) }
      : {}),
  });
  const caps: AgentCaps = { ...fromResources };
  if (v['cpu-quota'] !== undefined) caps.cpuQuota = v['cpu-quota'];
  if (v['memory-max'] !== undefined) caps.memoryMax = v['memory-max'];
  return caps;
}

async function valueToDecode(rest: string[], v: Values): Promise<string> {
  if (v.file !== undefined) {
    if (rest.length > 0) throw new UsageError('give the value or --file, not both');
    const file = v.file;
    return forFlag('--file', () => readInputFile(file));
  }
  if (rest.length === 0) {
    throw new UsageError('missing value: give it as an argument, with --file F, or - for stdin');
  }
  if (rest.length > 1) throw new UsageError(`expected one value, got ${rest.length}`);
  return rest[0] === '-' ? readStdin() : rest[0]!;
}

function printDecoded(caps: AgentCaps, v: Values, io: CliIO): void {
  if (v.json) {
    io.out(jsonText(caps));
    return;
  }
  let resources: { cpus?: number; memBytes?: number } = {};
  if (!v.raw)
    resources = resourcesFromCaps(caps, { allowMemoryPercent: v['allow-memory-percent'] });
  io.out(
    table(
      ['field', 'systemd', 'value', 'means'],
      [
        [
          'cpu_quota',
          'CPUQuota=',
          caps.cpuQuota ?? '(unset)',
          resources.cpus === undefined ? '-' : `${formatCpu(resources.cpus)} cores`,
        ],
        [
          'memory_max',
          'MemoryMax=',
          caps.memoryMax ?? '(unset)',
          resources.memBytes === undefined ? '-' : formatMemory(resources.memBytes),
        ],
      ],
    ),
  );
}
