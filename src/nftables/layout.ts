/**
 * The shape of the table: the two layouts, the base chains, the verdict maps of the
 * `vmap` layout and the skeleton commands that create them.
 */
import type { DispatchKey, NftCommand, NftHook, TableFamily } from './plan.js';

/**
 * Where an agent's rules live: see docs/nftables.md for both layouts.
 */
export const NftLayout = {
  /** One chain per agent, reached through verdict maps keyed by the agent's identity. */
  vmap: 'vmap',
  /** The agent's rules appended to the shared base chains (the kici orchestrator's layout). */
  rules: 'rules',
} as const;

/**
 * `'vmap' | 'rules'`.
 */
export type NftLayoutName = (typeof NftLayout)[keyof typeof NftLayout];

/** Base chains of the table: name -> hook. */
export const BASE_CHAINS: Readonly<Record<NftHook, NftHook>> = {
  forward: 'forward',
  input: 'input',
  output: 'output',
};

/**
 * Which part of the path a set of agent rules guards.
 */
export type AgentPart = 'fwd' | 'in' | 'out';

const PART_HOOK: Readonly<Record<AgentPart, NftHook>> = {
  fwd: 'forward',
  in: 'input',
  out: 'output',
};

/**
 * One verdict map of the `vmap` layout.
 */
export interface DispatchMap {
  /** The map's name. */
  readonly map: string;
  /** What it is keyed by. */
  readonly key: DispatchKey;
  /** Which of an agent's chains its elements jump to (forward, input or output). */
  readonly part: AgentPart;
}

/**
 * Verdict maps of the `vmap` layout, with their key and the base chain that consults them.
 */
export const DISPATCH_MAPS: ReadonlyArray<DispatchMap> = [
  { map: 'fwd_iif', key: 'iifname', part: 'fwd' },
  { map: 'fwd_v4', key: 'ip saddr', part: 'fwd' },
  { map: 'fwd_v6', key: 'ip6 saddr', part: 'fwd' },
  { map: 'in_iif', key: 'iifname', part: 'in' },
  { map: 'in_v4', key: 'ip saddr', part: 'in' },
  { map: 'in_v6', key: 'ip6 saddr', part: 'in' },
  { map: 'out_uid', key: 'meta skuid', part: 'out' },
];

/**
 * The verdict maps a table of `family` holds (vmap layout): all of {@link DISPATCH_MAPS} in
 * an `inet` table, those without an `ip6 saddr` key in an `ip` table.
 */
export function dispatchMaps(family: TableFamily): ReadonlyArray<DispatchMap> {
  return family === 'ip' ? DISPATCH_MAPS.filter((m) => m.key !== 'ip6 saddr') : DISPATCH_MAPS;
}

/** The base chain that consults an agent part's chain or holds its rules. */
export function hookOf(part: AgentPart): NftHook {
  return PART_HOOK[part];
}

/** Comment carried by the dispatch rules the table skeleton puts in the base chains. */
export const DISPATCH_COMMENT = 'dispatch';

/**
 * The commands that create the table and its base chains and, for the `vmap` layout, the
 * verdict maps of the table's family and the dispatch rules. The `rules` layout needs no
 * map: its skeleton is the table and the base chains, as kici's.
 */
export function skeletonCommands(
  tableFamily: TableFamily = 'inet',
  layout: NftLayoutName = 'vmap',
): NftCommand[] {
  const commands: NftCommand[] = [{ op: 'add table' }];
  for (const hook of Object.values(BASE_CHAINS))
    commands.push({ op: 'add chain', chain: hook, hook });
  if (layout === 'rules') return commands;
  const maps = dispatchMaps(tableFamily);
  for (const { map, key } of maps) commands.push({ op: 'add map', map, key });
  for (const { map, key, part } of maps) {
    commands.push({
      op: 'add rule',
      chain: PART_HOOK[part],
      rule: { exprs: [{ type: 'vmap', key, map }], comment: DISPATCH_COMMENT },
    });
  }
  return commands;
}
