/**
 * The shape of the table: the two layouts, the base chains, the verdict maps of the
 * `vmap` layout and the skeleton commands that create them.
 */
import type { DispatchKey, NftCommand, NftHook, TableFamily } from './plan.js';

/**
 * Where an agent's rules live: see docs/nftables.md for both layouts.
 *
 * @example
 * ```ts
 * import { addIsolationRules, NftLayout } from 'scaler-primitives/nftables';
 *
 * // kici's layout: the agent's rules go into the shared base chains.
 * await addIsolationRules('ci-42', { iifname: 'tap-ci-42' }, { layout: NftLayout.rules });
 * ```
 */
export const NftLayout = {
  /** One chain per agent, reached through verdict maps keyed by the agent's identity. */
  vmap: 'vmap',
  /** The seed's layout: the agent's rules appended to the shared base chains. */
  rules: 'rules',
} as const;

/**
 * `'vmap' | 'rules'`.
 *
 * @example
 * ```ts
 * import { listIsolatedAgents, type NftLayoutName } from 'scaler-primitives/nftables';
 *
 * const layout: NftLayoutName = 'rules';
 * const agents = await listIsolatedAgents({ family: 'ip', table: 'kici', layout });
 * ```
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
 *
 * @example
 * ```ts
 * import { type AgentPart, agentChainName } from 'scaler-primitives/nftables';
 *
 * const parts: AgentPart[] = ['fwd', 'in', 'out'];
 * parts.map((part) => agentChainName('ci-42', part)); // ['agent-ci-42-fwd', 'agent-ci-42-in', ...]
 * ```
 */
export type AgentPart = 'fwd' | 'in' | 'out';

const PART_HOOK: Readonly<Record<AgentPart, NftHook>> = {
  fwd: 'forward',
  in: 'input',
  out: 'output',
};

/**
 * One verdict map of the `vmap` layout.
 *
 * @example
 * ```ts
 * import { DISPATCH_MAPS, type DispatchMap } from 'scaler-primitives/nftables';
 *
 * const byInterface: DispatchMap[] = DISPATCH_MAPS.filter((m) => m.key === 'iifname');
 * byInterface.map((m) => m.map); // ['fwd_iif', 'in_iif']
 * ```
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
 *
 * @example
 * ```ts
 * import { DISPATCH_MAPS } from 'scaler-primitives/nftables';
 *
 * for (const { map, key, part } of DISPATCH_MAPS) console.log(`${map}: ${key} -> agent chain ${part}`);
 * // fwd_iif: iifname -> agent chain fwd ... out_uid: meta skuid -> agent chain out
 * ```
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
 * map: its skeleton is the table and the base chains, as the seed's.
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
