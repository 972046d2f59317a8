/**
 * `scaler-primitives ledger ls|usage|reap|release`: inspect and repair machine-pool ledgers.
 */

import { InvalidInputError, LedgerDirError } from '../../errors/index.js';
import { checkAgentId, checkInstanceId } from '../../ledger/checks.js';
import { fallbackLedgerDir } from '../../ledger/file/dir.js';
import {
  DEFAULT_LEDGER_DIR,
  LEDGER_DIR_ENV,
  MachineLedger,
  type PoolSnapshot,
  type ReservationRow,
} from '../../ledger/index.js';
import { formatCpu, formatMemory, type ResourceCap } from '../../resources/index.js';
import { parseCommandArgs, subcommandError } from '../args.js';
import { escapeText, jsonText } from '../escape.js';
import { forFlag } from '../flags.js';
import { type CliCommand, type CliIO, table, UsageError } from '../registry.js';
import { extendedUsage, showExtended } from './ledger-extended.js';
import { top, topOptions } from './ledger-top.js';

// Rows this CLI judges as a bystander: it has no rows of its own, so only the
// boot id and peers' leases decide what is stale (rows without a lease are kept).
const CLI_INSTANCE = 'scaler-primitives-cli';

const help = `Usage: scaler-primitives ledger <subcommand> [pool] [options]

Inspect and repair the machine-pool ledger shared by orchestrators on this host.

Subcommands:
  ls [pool]       List reservations (every pool, or one), live and stale, with
                  the device ids each row holds.
  usage [pool]    Show used and maximum CPU, memory and extended resources (free device ids) per pool.
  reap [pool]     Remove stale rows now (rows of another boot or of a dead process;
                  rows whose lease expired are left to the running instances).
  release --pool P --agent A [--instance I]
                  Remove an agent's reservation, whichever instance made it,
                  and say whose it was (only instance I's row with --instance).
  top [--interval S] [--count N]
                  A live view of every pool: rows, CPU and memory against the
                  cap as bars, oldest row, stale rows; redrawn every S seconds
                  (default 2) on a terminal, plain lines otherwise, one JSON
                  object per line with --json. Stops after N frames, or Ctrl-C.

Options:
  --dir DIR       Ledger directory. Default: $SCALER_PRIMITIVES_LEDGER_DIR, else
                  /var/lib/scaler-primitives/ledger, else <tmpdir>/scaler-ledger-<uid>.
  --json          Print JSON instead of a table.
  -h, --help      Show this help.

Nothing is created: the ledger directory must exist, and a pool named for ls,
usage or reap must have a file (an unknown pool is a failure, not an empty answer).

Exit codes: 0 success, 1 failure (no such directory or pool, corrupt or unsafe
file, busy lock, unsafe directory), 2 usage error.
`;

function subHelp(usage: string, what: string): string {
  return `Usage: scaler-primitives ledger ${usage} [--dir DIR] [--json]

${what}

Options:
  --dir DIR       Ledger directory. Default: $SCALER_PRIMITIVES_LEDGER_DIR, else
                  /var/lib/scaler-primitives/ledger, else <tmpdir>/scaler-ledger-<uid>.
  --json          Print JSON instead of a table (shape: docs/cli.md).
  -h, --help      Show this help.

Exit codes: 0 success, 1 failure (one line on standard error), 2 usage error.
`;
}

const options = {
  dir: { type: 'string' },
  json: { type: 'boolean', default: false },
  pool: { type: 'string' },
  agent: { type: 'string' },
  instance: { type: 'string' },
  interval: { type: 'string' },
  count: { type: 'string' },
} as const;

const SUBCOMMANDS = ['ls', 'usage', 'reap', 'release', 'top'];

type Values = {
  dir?: string;
  json: boolean;
  pool?: string;
  agent?: string;
  instance?: string;
  interval?: string;
  count?: string;
};

/** The `ledger` command. */
export const ledgerCommand: CliCommand = {
  name: 'ledger',
  summary: 'Inspect and repair machine-pool ledgers (ls, usage, reap, release).',
  help,
  options,
  subcommands: {
    ls: subHelp(
      'ls [pool]',
      "List reservations (every pool, or one), live and stale. DEVICES shows the device ids\neach row holds (<resource>=<id>,<id>); '?' marks a row that counts a resource whose\nids the pool lists but carries none (written by a writer that does not assign them).",
    ),
    usage: subHelp(
      'usage [pool]',
      'Show used and maximum CPU, memory and extended resources (with the free device ids) per pool.',
    ),
    reap: subHelp(
      'reap [pool]',
      'Remove stale rows now (rows of another boot or of a dead process). Rows whose lease\nexpired are reaped by the running ledger instances: a peer is judged only by an\ninstance that has renewed its own lease for leaseTtlMs + margin, which this one-shot\ncommand has not. Use release for such a row.',
    ),
    release: subHelp(
      'release --pool P --agent A [--instance I]',
      "Remove an agent's reservation (only instance I's row with --instance). Idempotent.",
    ),
    top: subHelp(
      'top [--interval S] [--count N]',
      'A live view of every pool (rows, CPU and memory against the cap, oldest row, stale\nrows), redrawn every S seconds (0.1 to 3600, default 2) on a terminal, plain lines\notherwise, one JSON object per line with --json. Stops after N frames, or on Ctrl-C.',
    ),
  },
  // The library's names for each flag's value (--interval and --count are checked here).
  flags: {
    '--dir': ['dir'],
    '--pool': ['pool name'],
    '--agent': ['agentId'],
    '--instance': ['instanceId'],
  },
  async run(args, io) {
    const parsed = parseCommandArgs(args, options);
    const values = parsed.values as Values;
    const [sub, ...positionals] = parsed.positionals;
    if (sub === undefined || !SUBCOMMANDS.includes(sub)) throw subcommandError(sub, SUBCOMMANDS);
    if (values.dir === '') {
      throw new UsageError('--dir needs a directory path, got an empty string');
    }
    const ledger = new MachineLedger({
      instanceId: CLI_INSTANCE,
      dir: values.dir,
      env: io.env,
    });
    try {
      if (!SUBCOMMANDS.includes(sub)) {
        throw new UsageError(
          `unknown subcommand ${JSON.stringify(sub)}: use ls, usage, reap or release`,
        );
      }
      // A repair tool never creates a ledger: a mistyped --dir is a failure.
      const timing = sub === 'top' ? topOptions(values) : undefined;
      const dir = await forFlag('--dir', () => existingDir(ledger, values, io));
      switch (sub) {
        case 'ls':
          return await ls(ledger, await poolsOf(ledger, positionals), values, io);
        case 'usage':
          return await usage(ledger, await poolsOf(ledger, positionals), values, io);
        case 'reap':
          return await reap(ledger, await poolsOf(ledger, positionals), values, io);
        case 'release':
          return await release(ledger, positionals, values, io);
        case 'top':
          if (positionals.length > 0)
            throw new UsageError('ledger top takes no pool: it shows every pool');
          return await top(ledger, dir, timing!, io);
        default:
          throw subcommandError(sub, SUBCOMMANDS);
      }
    } finally {
      await ledger.close();
    }
  },
};

async function existingDir(ledger: MachineLedger, values: Values, io: CliIO): Promise<string> {
  const dir = await ledger.existingDir();
  if (dir !== undefined) return dir;
  const configured = values.dir ?? (io.env[LEDGER_DIR_ENV] || undefined);
  const where =
    configured === undefined
      ? `neither ${DEFAULT_LEDGER_DIR} nor ${fallbackLedgerDir()} exists`
      : `${configured} does not exist`;
  throw new LedgerDirError(
    configured ?? DEFAULT_LEDGER_DIR,
    `No ledger directory: ${where}. Check --dir (or ${LEDGER_DIR_ENV}); nothing was created.`,
  );
}

// The pools to show: the one named (which must have a file), or every pool.
async function poolsOf(ledger: MachineLedger, positionals: string[]): Promise<string[]> {
  if (positionals.length > 1) {
    throw new UsageError(`expected at most one pool, got ${positionals.length}`);
  }
  if (positionals.length === 0) return ledger.pools();
  const pool = positionals[0]!;
  const snapshot = await ledger.inspect(pool);
  if (!snapshot.exists) {
    const known = await ledger.pools();
    const list = known.length === 0 ? 'there are no pools' : `pools: ${known.join(', ')}`;
    throw new InvalidInputError(
      'pool',
      pool,
      `No pool ${JSON.stringify(pool)} in ${await ledger.existingDir()} (${list}).`,
    );
  }
  return [pool];
}

async function ls(ledger: MachineLedger, pools: string[], values: Values, io: CliIO) {
  const snapshots = await Promise.all(pools.map((pool) => ledger.inspect(pool)));
  if (values.json) {
    io.out(
      jsonText(
        snapshots.map((s) => ({
          pool: s.pool,
          file: s.file,
          cap: s.cap,
          reservations: [
            ...s.live.map((row) => ({ ...row, state: 'live' })),
            ...s.stale.map(({ row, reason }) => ({ ...row, state: `stale (${reason})` })),
          ],
        })),
      ),
    );
    return 0;
  }
  const rows: string[][] = [];
  for (const s of snapshots) {
    const stale = new Map(s.stale.map(({ row, reason }) => [row, reason]));
    for (const row of [...s.live, ...s.stale.map((x) => x.row)]) {
      const reason = stale.get(row);
      rows.push([
        s.pool,
        row.agentId,
        row.instanceId,
        String(row.pid),
        showCpu(row.cpus),
        showMemory(row.memBytes),
        showDevices(row, s.cap),
        new Date(row.reservedAt).toISOString(),
        reason === undefined ? 'live' : `stale (${reason})`,
      ]);
    }
  }
  if (rows.length === 0) {
    io.out(
      pools.length === 0 ? `No pools in ${escapeText(await ledger.dir())}\n` : 'No reservations\n',
    );
    return 0;
  }
  io.out(
    table(
      ['POOL', 'AGENT', 'INSTANCE', 'PID', 'CPU', 'MEMORY', 'DEVICES', 'RESERVED_AT', 'STATE'],
      rows,
      [3, 4, 5],
    ),
  );
  return 0;
}

function usageOf(s: PoolSnapshot) {
  return {
    pool: s.pool,
    cpus: s.usage.cpus,
    maxCpu: s.cap.maxCpu ?? null,
    memBytes: s.usage.memBytes,
    maxMemoryBytes: s.cap.maxMemoryBytes ?? null,
    extended: extendedUsage(s),
    live: s.live.length,
    stale: s.stale.length,
  };
}

async function usage(ledger: MachineLedger, pools: string[], values: Values, io: CliIO) {
  const usages = (await Promise.all(pools.map((pool) => ledger.inspect(pool)))).map(usageOf);
  if (values.json) {
    io.out(jsonText(usages));
    return 0;
  }
  if (usages.length === 0) {
    io.out(`No pools in ${escapeText(await ledger.dir())}\n`);
    return 0;
  }
  io.out(
    table(
      ['POOL', 'CPU', 'MAX_CPU', 'MEMORY', 'MAX_MEMORY', 'LIVE', 'STALE', 'EXTENDED'],
      usages.map((u) => [
        u.pool,
        showCpu(u.cpus),
        u.maxCpu === null ? '-' : showCpu(u.maxCpu),
        showMemory(u.memBytes),
        u.maxMemoryBytes === null ? '-' : showMemory(u.maxMemoryBytes),
        String(u.live),
        String(u.stale),
        showExtended(u.extended),
      ]),
      [1, 2, 3, 4, 5, 6],
    ),
  );
  return 0;
}

async function reap(ledger: MachineLedger, pools: string[], values: Values, io: CliIO) {
  const results: Array<{ pool: string; reaped: number }> = [];
  for (const pool of pools) results.push({ pool, reaped: await ledger.reapStale(pool) });
  if (values.json) {
    io.out(jsonText(results));
  } else if (results.length === 0) {
    io.out(`No pools in ${escapeText(await ledger.dir())}\n`);
  } else {
    io.out(
      table(
        ['POOL', 'REAPED'],
        results.map((r) => [r.pool, String(r.reaped)]),
        [1],
      ),
    );
  }
  return 0;
}

async function release(ledger: MachineLedger, positionals: string[], values: Values, io: CliIO) {
  if (positionals.length > 0) {
    throw new UsageError(`release takes --pool and --agent, not ${JSON.stringify(positionals[0])}`);
  }
  if (!values.pool || !values.agent) throw new UsageError('release needs --pool and --agent');
  const { pool, agent, instance } = values;
  checkAgentId(agent);
  if (instance !== undefined) checkInstanceId(instance);
  // The operator path of the release contract: the CLI holds no rows, so it
  // names the owner it found, and the ledger removes the row only while that
  // instance still owns it (a row replaced meanwhile is left alone).
  const snapshot = await ledger.inspect(pool);
  const row = [...snapshot.live, ...snapshot.stale.map((s) => s.row)].find(
    (r) => r.agentId === agent,
  );
  const owner = row?.instanceId;
  const released =
    owner !== undefined && (instance === undefined || instance === owner)
      ? await ledger.release(pool, agent, { instanceId: owner })
      : false;
  if (values.json) {
    io.out(jsonText({ pool, agent, released, instanceId: released ? owner : (owner ?? null) }));
  } else if (released) {
    io.out(
      `Released agent ${escapeText(agent)} in pool ${escapeText(pool)} (row of instance ${escapeText(owner ?? '')})\n`,
    );
  } else if (owner !== undefined && instance !== undefined && owner !== instance) {
    io.out(
      `The reservation for agent ${escapeText(agent)} in pool ${escapeText(pool)} belongs to instance ${escapeText(owner)}, not ${escapeText(instance)}; nothing to do\n`,
    );
  } else {
    const which = instance === undefined ? '' : ` of instance ${escapeText(instance)}`;
    io.out(
      `No reservation for agent ${escapeText(agent)}${which} in pool ${escapeText(pool)}; nothing to do\n`,
    );
  }
  return 0;
}

// The device ids a row holds, `<resource>=<id>,<id>` per resource (`;` between
// resources), for every resource it holds ids of or whose ids the pool's cap
// lists: `?` when the row counts such a resource but carries no ids (a writer
// that does not assign them: which devices it uses is unknown); `-` for none.
function showDevices(row: ReservationRow, cap: ResourceCap): string {
  const parts: string[] = [];
  const names = new Set([...Object.keys(row.devices ?? {}), ...Object.keys(cap.devices ?? {})]);
  for (const name of [...names].sort()) {
    const ids = row.devices?.[name];
    if (ids !== undefined && ids.length > 0) parts.push(`${name}=${ids.join(',')}`);
    else if ((row.extended?.[name] ?? 0) > 0) parts.push(`${name}=?`);
  }
  return parts.length === 0 ? '-' : parts.join(';');
}

// Human tables use the canonical quantity forms ("500m", "2560Mi"); --json keeps
// raw cores and bytes. A value the formatters refuse (a hand-edited file) is shown as is.
function showCpu(cores: number): string {
  try {
    return formatCpu(cores);
  } catch {
    return String(cores);
  }
}

function showMemory(bytes: number): string {
  try {
    return formatMemory(bytes);
  } catch {
    return String(bytes);
  }
}
