/**
 * `scaler-primitives nft plan`: print the nftables transaction that isolates an agent,
 * without running nft and without root.
 */
import { buildIsolationPlan, type IsolationPolicy, renderPlan } from '../../nftables/index.js';
import type { NftLayoutName } from '../../nftables/layout.js';
import type { HostPort } from '../../nftables/policy.js';
import { validateAgentId, validateTableName } from '../../nftables/validate.js';
import { parseCommandArgs, readInputFile, subcommandError } from '../args.js';
import { jsonText } from '../escape.js';
import { forFlag } from '../flags.js';
import { type CliCommand, UsageError } from '../registry.js';

const help = `Usage: scaler-primitives nft plan --agent <id> <identity> [rules] [options]
       scaler-primitives nft plan --agent <id> --policy <file.json> [options]

Print the \`nft -f\` script that isolates one build agent: what \`addIsolationRules\`
applies in one transaction on a host without the table (the table skeleton, then the
agent's chains, rules and map elements). Runs nothing, needs no root: review it, diff
it, or have nft check it, on any host (the script declares its table):

  scaler-primitives nft plan --agent ci-42 --iifname tap-ci-42 --deny-all | nft -c -f -

Where the table exists, its skeleton must not be added again (its dispatch rules would
be doubled): to compare with or apply to such a table, print --agent-only.

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
  --agent-only          Leave out the table skeleton: only the agent's commands, what
                        \`addIsolationRules\` adds to a table that exists (nft -c
                        accepts them only where the table exists).
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
  'agent-only': { type: 'boolean', default: false },
  json: { type: 'boolean', default: false },
} as const;

/** The `nft` command. */
export const nftCommand: CliCommand = {
  name: 'nft',
  summary: 'Print the nftables isolation plan for an agent, without root (plan).',
  help,
  options,
  subcommands: { plan: help },
  // The library's names for each flag's value (option names, and what its errors call them).
  flags: {
    '--agent': ['agent id'],
    '--iifname': ['interface name', 'iifname'],
    '--saddr': ['agent source address', 'saddr'],
    '--skuid': ['uid', 'skuid'],
    '--gateway': ['gateway address', 'gateway'],
    '--allow': ['allowlist entry', 'allowlist'],
    '--host-port': ['port', 'hostAccess'],
    '--metadata': ['metadata address', 'metadata'],
    '--blocked': ['blocked range', 'blocked'],
    '--deny-all': ['denyAll'],
    '--table': ['table name', 'table'],
    '--family': ['family'],
    '--layout': ['layout'],
    '--agent-only': ['includeTable'],
  },
  async run(args, io) {
    const parsed = parseCommandArgs(args, options);
    const [sub, ...extra] = parsed.positionals;
    if (sub !== 'plan') throw subcommandError(sub, ['plan']);
    if (extra.length > 0) throw new UsageError(`unexpected argument ${JSON.stringify(extra[0])}`);
    const v = parsed.values;
    if (v.agent === undefined) throw new UsageError('missing --agent <id>');
    // Checked before the policy, so that their errors name --agent and --table.
    validateAgentId(v.agent);
    if (v.table !== undefined) validateTableName(v.table);
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
      const file = v.policy;
      policy = await forFlag('--policy', async () => {
        const text = await readInputFile(file);
        try {
          return JSON.parse(text) as IsolationPolicy;
        } catch (error) {
          throw new Error(`${file}: not valid JSON: ${(error as Error).message}`);
        }
      });
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
    const build = () =>
      buildIsolationPlan(v.agent!, policy, {
        layout: layout as NftLayoutName,
        family,
        includeTable: !v['agent-only'],
        ...(v.table !== undefined ? { table: v.table } : {}),
      });
    let plan: ReturnType<typeof buildIsolationPlan>;
    try {
      // A policy file's errors name its keys as the user wrote them.
      plan = v.policy === undefined ? build() : forFlag('--policy', build, { verbatim: true });
    } catch (error) {
      // The family always comes from the flag, also with --policy.
      if (error instanceof Error) {
        error.message = error.message.replaceAll("`family: 'inet'`", '`--family inet`');
      }
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
