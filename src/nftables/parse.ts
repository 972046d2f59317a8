import { isIP } from 'node:net';
import { NftCommandError } from '../errors/nftables.js';
import { type AgentPart, DISPATCH_MAPS } from './layout.js';
import { parseAgentChainName, parseAgentComment } from './names.js';
import type { NftElementKey, TableFamily } from './plan.js';
import { parseCidr } from './validate.js';

// Values an identifier can be compared with: interface names, addresses and uids
// appear right after one of these keywords (alone or in a `{ a, b }` set).
const VALUE_KEYS = new Set(['iifname', 'oifname', 'saddr', 'daddr', 'skuid', 'skgid']);

/** The longest identifier the parsers compare with (an agent id is at most 64). */
const MAX_IDENTIFIER = 64;

function canonical(identifier: string): string {
  if (
    typeof identifier !== 'string' ||
    identifier.length === 0 ||
    identifier.length > MAX_IDENTIFIER
  ) {
    throw new TypeError(
      `Expected \`identifier\` to be an agent id, interface name, address or uid of 1-${MAX_IDENTIFIER} characters, got ${typeof identifier === 'string' ? `${identifier.length} characters` : `\`${typeof identifier}\``}`,
    );
  }
  if (isIP(identifier.split('/')[0] ?? '') !== 0) {
    try {
      return parseCidr(identifier).text;
    } catch {
      return identifier;
    }
  }
  return identifier;
}

function tokenize(line: string): string[] {
  const tokens: string[] = [];
  const re = /"([^"]*)"|([{},])|([^\s{},"]+)/g;
  for (let m = re.exec(line); m !== null; m = re.exec(line)) {
    tokens.push(m[1] !== undefined ? `"${m[1]}` : (m[2] ?? m[3]!));
  }
  return tokens;
}

function unquote(token: string): string {
  return token.startsWith('"') ? token.slice(1) : token;
}

function lineMatches(tokens: string[], identifier: string): boolean {
  for (let i = 0; i < tokens.length; i++) {
    const token = tokens[i]!;
    if (token === 'comment') {
      const parsed = parseAgentComment(tokens[i + 1] ? unquote(tokens[i + 1]!) : undefined);
      if (parsed?.agentId === identifier) return true;
      continue;
    }
    if (!VALUE_KEYS.has(token)) continue;
    const next = tokens[i + 1];
    if (next === '{') {
      for (let j = i + 2; j < tokens.length && tokens[j] !== '}'; j++) {
        if (tokens[j] !== ',' && unquote(tokens[j]!) === identifier) return true;
      }
    } else if (next !== undefined && unquote(next) === identifier) {
      return true;
    }
  }
  return false;
}

/**
 * Handles of the rules in `nft -a list chain` text whose interface, address or uid equals
 * `identifier` exactly, or whose comment names agent `identifier`.
 *
 * @example
 * ```ts
 * import { parseRuleHandles } from 'scaler-primitives/nftables';
 *
 * declare const listing: string; // output of `nft -a list chain ip kici forward`
 * for (const handle of parseRuleHandles(listing, 'tap-ci-42')) console.log(handle);
 * ```
 */
export function parseRuleHandles(nftOutput: string, identifier: string): number[] {
  const wanted = canonical(identifier);
  if (typeof nftOutput !== 'string') {
    throw new TypeError(`Expected \`nftOutput\` to be a string, got \`${typeof nftOutput}\``);
  }
  const handles: number[] = [];
  for (const line of nftOutput.split('\n')) {
    const match = /^(.*?)\s#\s*handle\s+(\d+)\s*$/.exec(line);
    if (!match) continue;
    const body = match[1]!.trim();
    // Chain, table and set headers end with `{ # handle N`; they are not rules.
    if (body.endsWith('{')) continue;
    if (lineMatches(tokenize(body), wanted)) handles.push(Number(match[2]));
  }
  return handles;
}

/** A rule as read from `nft -j` output. */
export interface ListedRule {
  /** Chain the rule sits in. */
  readonly chain: string;
  /** Kernel handle. */
  readonly handle: number;
  /** Comment, when there is one. */
  readonly comment: string | undefined;
  /** Final verdict of the rule (`accept`, `drop`), undefined for a dispatch rule. */
  readonly verdict: 'accept' | 'drop' | undefined;
  /** Whether this is a `vmap` dispatch rule, and which map it consults. */
  readonly vmap: string | undefined;
  /** The raw `expr` array. */
  readonly expr: readonly unknown[];
}

/** A verdict-map element as read from `nft -j` output. */
export interface ListedElement {
  /** The map. */
  readonly map: string;
  /** The key. */
  readonly key: NftElementKey;
  /** The chain the element jumps to. */
  readonly target: string | undefined;
}

/** What one table holds, read from `nft -j list table`. */
export interface TableState {
  /** False when the table does not exist. */
  readonly exists: boolean;
  /** Chain names. */
  readonly chains: ReadonlySet<string>;
  /** Map names. */
  readonly maps: ReadonlySet<string>;
  /** Every rule. */
  readonly rules: readonly ListedRule[];
  /** Every verdict-map element. */
  readonly elements: readonly ListedElement[];
}

/** An empty table state (the table does not exist). */
export const MISSING_TABLE: TableState = {
  exists: false,
  chains: new Set(),
  maps: new Set(),
  rules: [],
  elements: [],
};

function parseJson(json: string | unknown): unknown[] {
  let doc: unknown = json;
  if (typeof json === 'string') {
    try {
      doc = JSON.parse(json);
    } catch (error) {
      throw new NftCommandError(
        'nft -j output is not valid JSON; is this nft >= 0.9?',
        {},
        {
          cause: error,
        },
      );
    }
  }
  const list = (doc as { nftables?: unknown })?.nftables;
  if (!Array.isArray(list)) {
    throw new NftCommandError('nft -j output has no `nftables` array; is this nft >= 0.9?');
  }
  return list;
}

function values(node: unknown, out: Array<string | number>): void {
  if (typeof node === 'string' || typeof node === 'number') out.push(node);
  else if (Array.isArray(node)) for (const item of node) values(item, out);
  else if (node && typeof node === 'object') {
    const prefix = (node as { prefix?: { addr?: unknown; len?: unknown } }).prefix;
    if (prefix && typeof prefix.addr === 'string') out.push(`${prefix.addr}/${prefix.len}`);
    else for (const item of Object.values(node)) values(item, out);
  }
}

function ruleMatchesJson(rule: ListedRule, identifier: string): boolean {
  if (parseAgentComment(rule.comment)?.agentId === identifier) return true;
  for (const expr of rule.expr) {
    const match = (expr as { match?: { left?: unknown; right?: unknown } }).match;
    if (!match) continue;
    const left = match.left as { meta?: { key?: string }; payload?: { field?: string } };
    const key = left?.meta?.key ?? left?.payload?.field;
    if (key === undefined || !VALUE_KEYS.has(key)) continue;
    const found: Array<string | number> = [];
    values(match.right, found);
    if (found.some((v) => String(v) === identifier)) return true;
  }
  return false;
}

function keyOf(map: string, raw: unknown): NftElementKey | undefined {
  const inner = (raw as { elem?: { val?: unknown } })?.elem?.val ?? raw;
  const entry = DISPATCH_MAPS.find((m) => m.map === map);
  if (!entry) return undefined;
  if (entry.key === 'iifname' && typeof inner === 'string') return { kind: 'ifname', value: inner };
  if (entry.key === 'meta skuid' && typeof inner === 'number') return { kind: 'uid', value: inner };
  if (typeof inner === 'string') return { kind: 'addr', value: inner };
  return undefined;
}

/**
 * Read the state of table `table` of family `family` from `nft -j list table|ruleset`
 * output. Objects of another family (a `ip kici` beside an `inet kici`) are not part of it.
 */
export function parseTableState(
  json: string | unknown,
  table: string,
  family: TableFamily = 'inet',
): TableState {
  const chains = new Set<string>();
  const maps = new Set<string>();
  const rules: ListedRule[] = [];
  const elements: ListedElement[] = [];
  let exists = false;
  for (const item of parseJson(json)) {
    const object = item as Record<string, Record<string, unknown>>;
    const [kind] = Object.keys(object);
    const body = kind === undefined ? undefined : object[kind];
    if (body?.family !== family) continue;
    if (kind === 'table' && body.name === table) exists = true;
    if (body.table !== table) continue;
    if (kind === 'chain') chains.add(String(body.name));
    else if (kind === 'map') {
      const name = String(body.name);
      maps.add(name);
      for (const pair of (body.elem as unknown[] | undefined) ?? []) {
        if (!Array.isArray(pair)) continue;
        const key = keyOf(name, pair[0]);
        const verdict = pair[1] as { jump?: { target?: string }; goto?: { target?: string } };
        if (key) {
          elements.push({
            map: name,
            key,
            target: verdict?.jump?.target ?? verdict?.goto?.target,
          });
        }
      }
    } else if (kind === 'rule') {
      const expr = Array.isArray(body.expr) ? (body.expr as unknown[]) : [];
      const last = expr.at(-1) as Record<string, unknown> | undefined;
      const vmap = expr.find((e) => (e as { vmap?: unknown }).vmap !== undefined) as
        | { vmap: { data?: unknown } }
        | undefined;
      rules.push({
        chain: String(body.chain),
        handle: Number(body.handle),
        comment: typeof body.comment === 'string' ? body.comment : undefined,
        verdict: last && 'accept' in last ? 'accept' : last && 'drop' in last ? 'drop' : undefined,
        vmap:
          vmap && typeof vmap.vmap.data === 'string' ? vmap.vmap.data.replace(/^@/, '') : undefined,
        expr,
      });
    }
  }
  return { exists, chains, maps, rules, elements };
}

/**
 * Handles of the rules in `nft -j` output (a list of a chain, table or ruleset) that belong
 * to `identifier`: the JSON twin of {@link parseRuleHandles}, with the same exact matching.
 *
 * @example
 * ```ts
 * import { parseRuleHandlesJson } from 'scaler-primitives/nftables';
 *
 * declare const json: string; // output of `nft -j -a list table inet scaler_primitives`
 * const handles: number[] = parseRuleHandlesJson(json, 'ci-42'); // rules of ci-42 only, never ci-420
 * ```
 */
export function parseRuleHandlesJson(json: string | unknown, identifier: string): number[] {
  const wanted = canonical(identifier);
  const handles: number[] = [];
  for (const item of parseJson(json)) {
    const body = (item as { rule?: Record<string, unknown> }).rule;
    if (!body) continue;
    const rule: ListedRule = {
      chain: String(body.chain),
      handle: Number(body.handle),
      comment: typeof body.comment === 'string' ? body.comment : undefined,
      verdict: undefined,
      vmap: undefined,
      expr: Array.isArray(body.expr) ? body.expr : [],
    };
    if (ruleMatchesJson(rule, wanted)) handles.push(rule.handle);
  }
  return handles;
}

/** Everything one agent owns in a table. */
export interface AgentFootprint {
  /** The agent id. */
  readonly agentId: string;
  /** Rules carrying the agent's comment (in its own chains or in shared chains). */
  readonly rules: ListedRule[];
  /** The agent's own chains (vmap layout). */
  readonly chains: Array<{ name: string; part: AgentPart }>;
  /** Map elements that jump to the agent's chains. */
  readonly elements: ListedElement[];
  /** Policy digests found in the agent's rule comments. */
  readonly digests: Set<string>;
}

/** Group a table's contents by agent, matching ids exactly (comments and chain names). */
export function agentFootprints(state: TableState): Map<string, AgentFootprint> {
  const agents = new Map<string, AgentFootprint>();
  const get = (agentId: string): AgentFootprint => {
    let entry = agents.get(agentId);
    if (!entry) {
      entry = { agentId, rules: [], chains: [], elements: [], digests: new Set() };
      agents.set(agentId, entry);
    }
    return entry;
  };
  const chainOwner = new Map<string, string>();
  for (const chain of state.chains) {
    const parsed = parseAgentChainName(chain);
    if (parsed) {
      get(parsed.agentId).chains.push({ name: chain, part: parsed.part });
      chainOwner.set(chain, parsed.agentId);
    }
  }
  for (const rule of state.rules) {
    const parsed = parseAgentComment(rule.comment);
    const owner = parsed?.agentId ?? chainOwner.get(rule.chain);
    if (owner === undefined) continue;
    const entry = get(owner);
    entry.rules.push(rule);
    if (parsed?.digest) entry.digests.add(parsed.digest);
  }
  for (const element of state.elements) {
    const owner = element.target === undefined ? undefined : chainOwner.get(element.target);
    if (owner !== undefined) get(owner).elements.push(element);
  }
  return agents;
}
