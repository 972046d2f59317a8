// How this module runs nft: options, the command runner, the checked context every call
// works in, running one process, applying one transaction and reading one table's state.
import {
  isNftCommandError,
  NftCommandError,
  NftNotInstalledError,
  NftPermissionError,
} from '../errors/nftables.js';
import { strictOptions } from '../internal/strict-keys.js';
import {
  BASE_CHAINS,
  DISPATCH_COMMENT,
  dispatchMaps,
  hookOf,
  type NftLayoutName,
  skeletonCommands,
} from './layout.js';
import { MISSING_TABLE, parseTableState, type TableState } from './parse.js';
import type { NftCommand, NftHook, NftPlan, TableFamily } from './plan.js';
import { renderPlan } from './render.js';
import {
  DEFAULT_FAMILY,
  DEFAULT_TABLE,
  validateFamily,
  validateLayout,
  validateNetnsName,
  validateTableName,
} from './validate.js';

/**
 * Runs one process. Resolves for any exit code; rejects (with `code: 'ENOENT'` when the
 * binary is missing) only when the process could not be started.
 */
export type NftRunner = (
  file: string,
  args: readonly string[],
  options: { input?: string },
) => Promise<{
  /** Standard output. */
  stdout: string;
  /** Standard error. */
  stderr: string;
  /** Exit code. */
  exitCode: number;
}>;

/** What a command runner reports for a process that ran (whatever its exit code). */
export type NftRunResult = Awaited<ReturnType<NftRunner>>;

/**
 * Options shared by every function that runs `nft`. Strict: an unknown key is an
 * `InvalidInputError`, even with `bestEffort`.
 */
export interface NftOptions {
  /** Run `sudo -n nft ...` (needs a NOPASSWD sudoers entry for nft). @default false */
  requireSudo?: boolean;
  /** Run nft inside this network namespace (`ip netns exec <netns> nft ...`). */
  netns?: string;
  /** Table name. @default 'scaler_primitives' */
  table?: string;
  /**
   * Table family: `inet` (IPv4 and IPv6 in one table) or `ip` (IPv4 only, like kici's
   * `ip kici`: IPv6 rules are left out and IPv6 traffic is not filtered at all).
   * @default 'inet'
   */
  family?: NftPlan['family'];
  /**
   * Layout for new rules (see docs/nftables.md): `vmap` (one chain per agent, reached through
   * verdict maps keyed by the agent's identity) or `rules` (the agent's rules appended to the
   * shared base chains: the kici orchestrator's layout). Removal and listing understand both.
   * @default 'vmap'
   */
  layout?: 'vmap' | 'rules';
  /** The nft binary. @default 'nft' */
  nftPath?: string;
  /** Command runner (tests record commands with it). @default execa */
  runner?: NftRunner;
}

// `NftOptions.layout` spells out the layouts of layout.ts for users: a lagging copy fails here.
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
const layoutsAgree: Same<NftLayoutName, NonNullable<NftOptions['layout']>> = true;
void layoutsAgree;

const defaultRunner: NftRunner = async (file, args, { input }) => {
  // Loaded here only, so importing the pure builder never loads execa.
  const { execa } = await import('execa');
  const result = await execa(file, args, {
    reject: false,
    stripFinalNewline: false,
    ...(input === undefined ? { stdin: 'ignore' as const } : { input }),
  });
  if (result.exitCode === undefined) {
    throw Object.assign(new Error(result.message), {
      code: (result as { code?: string }).code,
      cause: result.cause,
    });
  }
  return {
    stdout: String(result.stdout),
    stderr: String(result.stderr),
    exitCode: result.exitCode,
  };
};

export interface Context {
  table: string;
  family: TableFamily;
  layout: NftLayoutName;
  argv: (args: readonly string[]) => [string, string[]];
  runner: NftRunner;
  sudo: boolean;
}

export const NFT_OPTION_KEYS = [
  'requireSudo',
  'netns',
  'table',
  'family',
  'layout',
  'nftPath',
  'runner',
];
export const REMOVE_OPTION_KEYS = [...NFT_OPTION_KEYS, 'policy', 'bestEffort', 'onError'];
export const VERIFY_OPTION_KEYS = [...NFT_OPTION_KEYS, 'repair'];

function optionType(opts: object, key: string, type: 'boolean' | 'function' | 'string'): void {
  const value = (opts as Record<string, unknown>)[key];
  if (value !== undefined && typeof value !== type) {
    throw new TypeError(`Expected \`${key}\` to be a ${type}, got \`${typeof value}\``);
  }
}

export function context(
  input: NftOptions | undefined,
  keys: readonly string[] = NFT_OPTION_KEYS,
): Context {
  const opts = strictOptions<NftOptions>(input, keys, 'nftables options');
  optionType(opts, 'requireSudo', 'boolean');
  optionType(opts, 'runner', 'function');
  optionType(opts, 'nftPath', 'string');
  for (const key of ['bestEffort', 'repair']) optionType(opts, key, 'boolean');
  optionType(opts, 'onError', 'function');
  if (
    opts.nftPath !== undefined &&
    (opts.nftPath.length === 0 || opts.nftPath.length > 4096 || opts.nftPath.includes('\0'))
  ) {
    throw new TypeError(
      `Expected \`nftPath\` to be a path of 1-4096 characters without NUL, got ${opts.nftPath.length} characters`,
    );
  }
  const table = validateTableName(opts.table ?? DEFAULT_TABLE);
  const family = validateFamily(opts.family ?? DEFAULT_FAMILY);
  const layout = validateLayout(opts.layout ?? 'vmap');
  const netns = opts.netns === undefined ? undefined : validateNetnsName(opts.netns);
  const nft = opts.nftPath ?? 'nft';
  const argv = (args: readonly string[]): [string, string[]] => {
    let full = [nft, ...args];
    if (netns !== undefined) full = ['ip', 'netns', 'exec', netns, ...full];
    if (opts.requireSudo) full = ['sudo', '-n', ...full];
    return [full[0]!, full.slice(1)];
  };
  return {
    table,
    family,
    layout,
    argv,
    runner: opts.runner ?? defaultRunner,
    sudo: !!opts.requireSudo,
  };
}

const PERMISSION =
  /operation not permitted|permission denied|a password is required|not allowed to execute|no tty present/i;

export async function run(ctx: Context, args: readonly string[], input?: string): Promise<string> {
  const [file, argv] = ctx.argv(args);
  const command = [file, ...argv].join(' ');
  let result: NftRunResult;
  try {
    result = await ctx.runner(file, argv, input === undefined ? {} : { input });
  } catch (error) {
    if ((error as { code?: unknown })?.code === 'ENOENT') {
      throw new NftNotInstalledError(
        `\`${file}\` was not found on PATH while running \`${command}\`; install nftables (Debian/Ubuntu: apt-get install nftables)${ctx.sudo ? ' and sudo' : ''}.`,
        { command },
        { cause: error },
      );
    }
    throw new NftCommandError(
      `Could not start \`${command}\`: ${String(error)}`,
      { command },
      {
        cause: error,
      },
    );
  }
  if (result.exitCode === 0) return result.stdout;
  const stderr = result.stderr.trim();
  if (/exec of "[^"]*" failed: No such file or directory/.test(stderr)) {
    throw new NftNotInstalledError(
      `nft was not found while running \`${command}\`; install nftables (Debian/Ubuntu: apt-get install nftables).`,
      { command },
    );
  }
  if (PERMISSION.test(stderr)) {
    throw new NftPermissionError(
      `\`${command}\` was refused (${stderr.split('\n')[0]}): nft needs CAP_NET_ADMIN. Run as root, grant the capability, or pass \`requireSudo: true\` with a NOPASSWD sudoers entry for nft.`,
      { command, stderr },
    );
  }
  throw new NftCommandError(
    `\`${command}\` exited with code ${result.exitCode}: ${stderr || '(no output)'}`,
    { command, stderr },
  );
}

export async function apply(ctx: Context, commands: readonly NftCommand[]): Promise<void> {
  if (commands.length === 0) return;
  await run(ctx, ['-f', '-'], renderPlan({ family: ctx.family, table: ctx.table, commands }));
}

export async function readState(ctx: Context): Promise<TableState> {
  try {
    return parseTableState(
      await run(ctx, ['-j', 'list', 'table', ctx.family, ctx.table]),
      ctx.table,
      ctx.family,
    );
  } catch (error) {
    if (isNftCommandError(error) && /No such file or directory/.test(error.stderr ?? '')) {
      return MISSING_TABLE;
    }
    throw error;
  }
}

/**
 * Commands that bring a table's skeleton up to date: base chains, and for the `vmap` layout
 * the maps of the table's family and the dispatch rules.
 */
export function skeletonRepair(ctx: Context, state: TableState): NftCommand[] {
  if (!state.exists) {
    // `create table` fails if a concurrent caller made it first; we then re-read and repair.
    const [, ...rest] = skeletonCommands(ctx.family, ctx.layout);
    return [{ op: 'create table' }, ...rest];
  }
  const commands: NftCommand[] = [];
  for (const hook of Object.values(BASE_CHAINS) as NftHook[]) {
    if (!state.chains.has(hook)) commands.push({ op: 'add chain', chain: hook, hook });
  }
  if (ctx.layout === 'rules') return commands;
  const maps = dispatchMaps(ctx.family);
  for (const { map, key } of maps) {
    if (!state.maps.has(map)) commands.push({ op: 'add map', map, key });
  }
  // Dispatch rules go to the top of their base chain; insert in reverse to keep their order.
  for (const { map, key, part } of [...maps].reverse()) {
    const chain = hookOf(part);
    if (!state.rules.some((r) => r.chain === chain && r.vmap === map)) {
      commands.push({
        op: 'insert rule',
        chain,
        rule: { exprs: [{ type: 'vmap', key, map }], comment: DISPATCH_COMMENT },
      });
    }
  }
  return commands;
}
