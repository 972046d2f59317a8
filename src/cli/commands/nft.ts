/**
 * `scaler-primitives nft plan`: print the nftables transaction that isolates an agent,
 * without running nft and without root.
 */
import { buildIsolationPlan, type IsolationPolicy, renderPlan } from '../../nftables/index.js';
import type { NftLayoutName } from '../../nftables/layout.js';
import type { HostPort } from '../../nftables/policy.js';
import { parseCommandArgs, readInputFile, subcommandError } from '../args.js';
import { jsonText } from '../escape.js';
import { type CliCommand, UsageError } from '../registry.js';

const help = `Usage: scaler-primitives nft plan --agent <id> <identity> [rules] [options]
       scaler-primitives nft plan --agent <id> --policy <file.json> [options]

Print the \`nft -f\` script that isolates one build agent: what \`addIsolationRules\`
applies in one transaction. Runs nothing, needs no root: review it, diff it, or pipe
it to \`nft -c -f -\` to have nft check it.

Identity (exactly one):
  --iifname <if>        The agent's interface (a VM's tap device, a container's veth).
  --saddr <ip>          The agent's source address (containers on a bridge).
  --skuid <uid>         The agent's user id (bare-metal agents; output traffic only).

Rules:
  --gateway <ip>        An address the agent must reach even inside blocked ranges
                        (repeatable).
  --allow <cidr>        A range the agent may reach inside blocked ranges (repeatable).
  --host-port <p[/udp]> A port on the host the agent may reach, tcp unless /udp
                        (repeatable).
  --metadata <cidr>     Cloud metadata addresses to block (repeatable; default
                        169.254.169.254 and fd00:ec2::254).
  --blocked <cidr>      Ranges to block unless allowed (repeatable; default the RFC 1918
                        ranges, 100.64.0.0/10, 169.254.0.0/16, fc00::/7, fe80::/10).
  --deny-all            Drop everything that no rule above accepts.
  --policy <file>       Read the whole policy from a JSON file instead, e.g.
                        {"iifname":"tap-ci-42","allowlist":["10.20.30.0/24"],
                         "hostAccess":[8080,{"port":53,"protocol":"udp"}]}

Options:
  --agent <id>          The agent id (names its chains and rule comments). Required.
  --table <name>        Table name. Default: scaler_primitives.
  --family <inet|ip>    Table family. inet (default): IPv4 and IPv6 in one table;
                        ip: IPv4 only, as kici's \`ip kici\` (IPv6 rules and maps are
                        left out, an IPv6 --saddr is refused).
  --layout <vmap|rules> vmap (default): a chain per agent behind verdict maps;
                        rules: the seed-compatible flat layout.
  --with-table          Also print the commands that create the table skeleton.
  --json                Print { "agent", "family", "table", "layout", "script",
                        "commands" }:
                        the script as one string and the typed plan commands.
  -h, --help            Show this help.

A policy file is strict: an unknown key (a typo such as "denyall") is an error naming
the key and the nearest accepted one, never silently ignored.

Exit codes: 0 printed, 1 invalid policy or unreadable file (one line naming the value),
2 usage error.

Example:
  scaler-primitives nft plan --agent ci-42 --iifname tap-ci-42 --allow 10.20.30.0/24 \\
    --host-port 8080 --host-port 53/udp
`;

const options = {
  agent: { type: 'string' },
  iifname: { type: 'string' },
  saddr: { type: 'string' },
  skuid: { type: 'string' },
  gateway: { type: 'string', multiple: true },
  allow: { type: 'string', multiple: true },
  'host-port': { type: 'string', multiple: true },
  metadata: { type: 'string', multiple: true },
  blocked: { type: 'string', multiple: true },
  'deny-all': { type: 'boolean', default: false },
  policy: { type: 'string' },
  table: { type: 'string' },
  family: { type: 'string' },
  layout: { type: 'string' },
  'with-table': { type: 'boolean', default: false },
  json: { type: 'boolean', default: false },
} as const;

// Library option names in messages, and the flag that sets each (flags mode only: in a
// --policy file the library names are what the user wrote).
const FLAG_HINTS: Readonly<Record<string, string>> = {
  hostAccess: '--host-port',
  allowlist: '--allow',
  denyAll: '--deny-all',
  gateway: '--gateway',
  metadata: '--metadata',
  blocked: '--blocked',
  includeTable: '--with-table',
  iifname: '--iifname',
  saddr: '--saddr',
  skuid: '--skuid',
  table: '--table',
  family: '--family',
  layout: '--layout',
};

function flagsInMessage(error: unknown): never {
  if (error instanceof Error) {
    for (const [option, flag] of Object.entries(FLAG_HINTS)) {
      error.message = error.message.replaceAll(`\`${option}\``, `\`${flag}\``);
    }
  }
  throw error;
}

/** The `nft` command. */
export const nftCommand: CliCommand = {
  name: 'nft',
  summary: 'Print the nftables isolation plan for an agent, without root (plan).',
  help,
  subcommands: { plan: help },
  async run(args, io) {
    const parsed = parseCommandArgs(args, options);
    const [sub, ...extra] = parsed.positionals;
    if (sub !== 'plan') throw subcommandError(sub, ['plan']);
    if (extra.length > 0) throw new UsageError(`unexpected argument ${JSON.stringify(extra[0])}`);
    const v = parsed.values;
    if (v.agent === undefined) throw new UsageError('missing --agent <id>');
    const layout = v.layout ?? 'vmap';
    if (layout !== 'vmap' && layout !== 'rules') {
      throw new UsageError(`--layout must be vmap or rules, got ${JSON.stringify(layout)}`);
    }
    const family = v.family ?? 'inet';
    if (family !== 'inet' && family !== 'ip') {
      throw new UsageError(
        `--family must be inet (IPv4 and IPv6) or ip (IPv4 only), got ${JSON.stringify(family.slice(0, 40))}`,
      );
    }
    let policy: IsolationPolicy;
    if (v.policy !== undefined) {
      const flags = [
        'iifname',
        'saddr',
        'skuid',
        'gateway',
        'allow',
        'host-port',
        'metadata',
        'blocked',
      ] as const;
      const mixed = flags.filter((f) => v[f] !== undefined);
      if (mixed.length > 0 || v['deny-all']) {
        throw new UsageError(`--policy cannot be combined with --${mixed[0] ?? 'deny-all'}`);
      }
      const text = await readInputFile(v.policy);
      try {
        policy = JSON.parse(text) as IsolationPolicy;
      } catch (error) {
        throw new Error(`${v.policy}: not valid JSON: ${(error as Error).message}`);
      }
    } else {
      const identities = (['iifname', 'saddr', 'skuid'] as const).filter((k) => v[k] !== undefined);
      if (identities.length !== 1) {
        throw new UsageError(
          identities.length === 0
            ? 'give the agent identity: --iifname, --saddr or --skuid (or --policy)'
            : `give one identity, got --${identities.join(' and --')}`,
        );
      }
      const rules = {
        ...(v.gateway ? { gateway: v.gateway } : {}),
        ...(v.allow ? { allowlist: v.allow } : {}),
        ...(v['host-port'] ? { hostAccess: v['host-port'].map(hostPort) } : {}),
        ...(v.metadata ? { metadata: v.metadata } : {}),
        ...(v.blocked ? { blocked: v.blocked } : {}),
        ...(v['deny-all'] ? { denyAll: true } : {}),
      };
      if (v.iifname !== undefined) policy = { iifname: v.iifname, ...rules };
      else if (v.saddr !== undefined) policy = { saddr: v.saddr, ...rules };
      else policy = { skuid: uid(v.skuid!), ...rules };
    }
    let plan: ReturnType<typeof buildIsolationPlan>;
    try {
      plan = buildIsolationPlan(v.agent, policy, {
        layout: layout as NftLayoutName,
        family,
        includeTable: v['with-table'],
        ...(v.table !== undefined ? { table: v.table } : {}),
      });
    } catch (error) {
      // The family always comes from the flag, also with --policy.
      if (error instanceof Error) {
        error.message = error.message.replaceAll("`family: 'inet'`", '`--family inet`');
      }
      if (v.policy === undefined) flagsInMessage(error);
      throw error;
    }
    const script = renderPlan(plan);
    if (v.json) {
      io.out(
        jsonText({
          agent: v.agent,
          family: plan.family,
          table: plan.table,
          layout,
          script,
          commands: plan.commands,
        }),
      );
    } else {
      io.out(script);
    }
    return 0;
  },
};

function hostPort(value: string): HostPort {
  const match = /^(\d{1,5})(?:\/(tcp|udp))?$/.exec(value);
  if (!match) {
    throw new UsageError(
      `--host-port expects PORT, PORT/tcp or PORT/udp (e.g. 8080 or 53/udp), got ${JSON.stringify(value.slice(0, 40))}`,
    );
  }
  const port = Number(match[1]);
  return match[2] === 'udp' ? { port, protocol: 'udp' } : port;
}

function uid(value: string): number {
  if (!/^\d+$/.test(value)) {
    throw new UsageError(
      `--skuid expects a numeric user id, got ${JSON.stringify(value.slice(0, 40))}`,
    );
  }
  return Number(value);
}
