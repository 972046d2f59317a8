// The whole-plan check: every object of a plan, every key and every value, checked
// before a byte of nft text is produced. The builder only makes valid plans, but the
// renderer is exported, so it trusts nothing it is handed.
import { InvalidInputError } from '../errors/index.js';
import { strictObject } from '../internal/strict-keys.js';
import { DISPATCH_MAPS } from './layout.js';
import type {
  DispatchKey,
  NftCommand,
  NftElementKey,
  NftExpr,
  NftPlan,
  NftRule,
  TableFamily,
} from './plan.js';
import {
  parseAddress,
  parseCidr,
  show,
  validateChainName,
  validateComment,
  validateInterfaceName,
  validatePort,
  validateTableName,
  validateUid,
} from './validate.js';

/** The most commands one plan may hold. */
export const MAX_PLAN_COMMANDS = 10_000;
/** The most values one match (an anonymous set of addresses or ports) may hold. */
export const MAX_SET_SIZE = 1024;

const OPS = [
  'add table',
  'create table',
  'add chain',
  'create chain',
  'flush chain',
  'delete chain',
  'add map',
  'create map',
  'add rule',
  'insert rule',
  'delete rule',
  'add element',
  'delete element',
] as const;
const HOOKS = ['forward', 'input', 'output'] as const;
const DISPATCH_KEYS: readonly DispatchKey[] = ['iifname', 'ip saddr', 'ip6 saddr', 'meta skuid'];
const CT_STATES = ['established', 'related'] as const;
const ICMPV6_TYPES = ['nd-neighbor-solicit', 'nd-neighbor-advert', 'nd-router-solicit'] as const;

function oneOf<T extends string>(value: unknown, accepted: readonly T[], what: string): T {
  if (typeof value !== 'string' || !(accepted as readonly string[]).includes(value)) {
    throw new InvalidInputError(
      what,
      value,
      `Invalid ${what} ${show(value)}: expected one of ${accepted.map((a) => `\`${a}\``).join(', ')}.`,
    );
  }
  return value as T;
}

function values<T>(
  value: unknown,
  what: string,
  max: number,
  check: (item: unknown) => T,
): readonly T[] {
  if (!Array.isArray(value) || value.length === 0 || value.length > max) {
    throw new InvalidInputError(
      what,
      Array.isArray(value) ? `${value.length} entries` : value,
      `Invalid ${what}: expected a list of 1 to ${max} values, got ${Array.isArray(value) ? `${value.length}` : show(value)}.`,
    );
  }
  const out = value.map(check);
  if (new Set(out).size !== out.length) {
    throw new InvalidInputError(what, value, `Invalid ${what}: a value appears twice.`);
  }
  return out;
}

function mapNamed(name: unknown): (typeof DISPATCH_MAPS)[number] {
  const map = DISPATCH_MAPS.find((m) => m.map === name);
  if (map === undefined) {
    oneOf(
      name,
      DISPATCH_MAPS.map((m) => m.map),
      'verdict map name',
    );
  }
  return map!;
}

/** Addresses given in the exact (normalized) form nft prints, all of one family. */
function addresses(value: unknown, family: 'ip' | 'ip6', what: string): readonly string[] {
  return values(value, what, MAX_SET_SIZE, (item) => {
    const cidr = parseCidr(item, what);
    if (cidr.text !== item || (cidr.family === 4) !== (family === 'ip')) {
      throw new InvalidInputError(
        what,
        item,
        `Invalid ${what} ${show(item)}: expected an ${family === 'ip' ? 'IPv4' : 'IPv6'} address or network in normalized form (${cidr.text}).`,
      );
    }
    return cidr.text;
  });
}

function checkExpr(input: unknown, last: boolean): NftExpr {
  const base = strictObject<{ type?: unknown }>(
    input,
    [
      'type',
      'name',
      'family',
      'addrs',
      'uid',
      'states',
      'protocol',
      'ports',
      'types',
      'key',
      'map',
    ],
    'rule expression',
  );
  const type = oneOf(
    base.type,
    ['iifname', 'oifname', 'saddr', 'daddr', 'skuid', 'ctState', 'dport', 'icmpv6Type', 'vmap'],
    'rule expression type',
  );
  switch (type) {
    case 'iifname':
    case 'oifname': {
      const e = strictObject<{ name: unknown }>(input, ['type', 'name'], `${type} expression`);
      return { type, name: validateInterfaceName(e.name) };
    }
    case 'saddr':
    case 'daddr': {
      const e = strictObject<{ family: unknown; addrs: unknown }>(
        input,
        ['type', 'family', 'addrs'],
        `${type} expression`,
      );
      const family = oneOf(e.family, ['ip', 'ip6'], 'address family');
      return { type, family, addrs: addresses(e.addrs, family, `${type} address`) };
    }
    case 'skuid': {
      const e = strictObject<{ uid: unknown }>(input, ['type', 'uid'], 'skuid expression');
      return { type, uid: validateUid(e.uid) };
    }
    case 'ctState': {
      const e = strictObject<{ states: unknown }>(input, ['type', 'states'], 'ctState expression');
      return {
        type,
        states: values(e.states, 'conntrack states', CT_STATES.length, (s) =>
          oneOf(s, CT_STATES, 'conntrack state'),
        ),
      };
    }
    case 'dport': {
      const e = strictObject<{ protocol: unknown; ports: unknown }>(
        input,
        ['type', 'protocol', 'ports'],
        'dport expression',
      );
      return {
        type,
        protocol: oneOf(e.protocol, ['tcp', 'udp'], 'transport protocol'),
        ports: values(e.ports, 'ports', MAX_SET_SIZE, validatePort),
      };
    }
    case 'icmpv6Type': {
      const e = strictObject<{ types: unknown }>(input, ['type', 'types'], 'icmpv6Type expression');
      return {
        type,
        types: values(e.types, 'ICMPv6 types', ICMPV6_TYPES.length, (t) =>
          oneOf(t, ICMPV6_TYPES, 'ICMPv6 type'),
        ),
      };
    }
    case 'vmap': {
      const e = strictObject<{ key: unknown; map: unknown }>(
        input,
        ['type', 'key', 'map'],
        'vmap expression',
      );
      const key = oneOf(e.key, DISPATCH_KEYS, 'dispatch key');
      const map = mapNamed(e.map);
      if (map.key !== key) {
        throw new InvalidInputError(
          'vmap expression',
          key,
          `Invalid vmap expression: map ${map.map} is keyed by \`${map.key}\`, not ${show(key)}.`,
        );
      }
      if (!last) {
        throw new InvalidInputError(
          'vmap expression',
          map.map,
          'Invalid rule: a vmap dispatch must be its last expression.',
        );
      }
      return { type, key, map: map.map };
    }
  }
}

function checkRule(input: unknown): NftRule {
  const r = strictObject<{ exprs: unknown; verdict?: unknown; comment?: unknown }>(
    input,
    ['exprs', 'verdict', 'comment'],
    'rule',
  );
  if (!Array.isArray(r.exprs) || r.exprs.length > 32) {
    throw new InvalidInputError(
      'rule expressions',
      r.exprs,
      `Invalid rule: \`exprs\` must be a list of at most 32 expressions, got ${show(r.exprs)}.`,
    );
  }
  const list = r.exprs as unknown[];
  const exprs = list.map((e, i) => checkExpr(e, i === list.length - 1));
  checkOneProtocol(exprs);
  const dispatches = exprs.some((e) => e.type === 'vmap');
  const verdict =
    r.verdict === undefined ? undefined : oneOf(r.verdict, ['accept', 'drop'] as const, 'verdict');
  if (dispatches === (verdict !== undefined)) {
    throw new InvalidInputError(
      'rule',
      verdict,
      'Invalid rule: a rule ends either with a verdict (`accept` or `drop`) or with a vmap dispatch, exactly one of them.',
    );
  }
  return {
    exprs,
    ...(verdict === undefined ? {} : { verdict }),
    ...(r.comment === undefined ? {} : { comment: validateComment(r.comment) }),
  };
}

/**
 * Refuse a rule that matches two network protocols (`ip` and `ip6`) or two transport
 * protocols (`tcp`, `udp`, `icmpv6`): no packet matches it, and nft refuses it with
 * "conflicting protocols" for the whole transaction.
 */
function checkOneProtocol(exprs: readonly NftExpr[]): void {
  const network = new Set<string>();
  const transport = new Set<string>();
  for (const expr of exprs) {
    if (expr.type === 'saddr' || expr.type === 'daddr') network.add(expr.family);
    else if (expr.type === 'vmap' && expr.key !== 'iifname' && expr.key !== 'meta skuid')
      network.add(expr.key === 'ip6 saddr' ? 'ip6' : 'ip');
    else if (expr.type === 'icmpv6Type') {
      network.add('ip6');
      transport.add('icmpv6');
    } else if (expr.type === 'dport') transport.add(expr.protocol);
  }
  for (const [what, set] of [
    ['network', network],
    ['transport', transport],
  ] as const) {
    if (set.size > 1) {
      throw new InvalidInputError(
        'rule expressions',
        [...set].join(' and '),
        `Invalid rule: it matches two ${what} protocols (${[...set].join(' and ')}), which no packet has; split it into one rule per protocol.`,
      );
    }
  }
}

function checkElementKey(input: unknown, mapKey: DispatchKey): NftElementKey {
  const k = strictObject<{ kind: unknown; value: unknown }>(
    input,
    ['kind', 'value'],
    'verdict map element key',
  );
  const wanted = mapKey === 'iifname' ? 'ifname' : mapKey === 'meta skuid' ? 'uid' : 'addr';
  const kind = oneOf(k.kind, [wanted], `element key kind for a map keyed by \`${mapKey}\``);
  if (kind === 'ifname') return { kind, value: validateInterfaceName(k.value) };
  if (kind === 'uid') return { kind, value: validateUid(k.value) };
  const address = parseAddress(k.value, 'element address');
  if (address.text !== k.value || (address.family === 4) !== (mapKey === 'ip saddr')) {
    throw new InvalidInputError(
      'element address',
      k.value,
      `Invalid element address ${show(k.value)}: expected a single ${mapKey === 'ip saddr' ? 'IPv4' : 'IPv6'} address in normalized form (${address.text}).`,
    );
  }
  return { kind, value: address.text };
}

const COMMAND_KEYS = ['op', 'chain', 'hook', 'map', 'key', 'rule', 'handle', 'target'];

function checkCommand(input: unknown): NftCommand {
  const base = strictObject<{ op?: unknown }>(input, COMMAND_KEYS, 'plan command');
  const op = oneOf(base.op, OPS, 'plan command op');
  switch (op) {
    case 'add table':
    case 'create table':
      strictObject(input, ['op'], `\`${op}\` command`);
      return { op };
    case 'add chain':
    case 'create chain': {
      const c = strictObject<{ chain: unknown; hook?: unknown }>(
        input,
        ['op', 'chain', 'hook'],
        `\`${op}\` command`,
      );
      const chain = validateChainName(c.chain);
      if (c.hook === undefined) return { op, chain };
      const hook = oneOf(c.hook, HOOKS, 'chain hook');
      // The table's base chains are named after their hook; agent chains have none.
      if (hook !== chain) {
        throw new InvalidInputError(
          'chain hook',
          hook,
          `Invalid hook ${show(hook)} for chain ${show(chain)}: a base chain is named after its hook (\`forward\`, \`input\`, \`output\`).`,
        );
      }
      return { op, chain, hook };
    }
    case 'flush chain':
    case 'delete chain': {
      const c = strictObject<{ chain: unknown }>(input, ['op', 'chain'], `\`${op}\` command`);
      return { op, chain: validateChainName(c.chain) };
    }
    case 'add map':
    case 'create map': {
      const c = strictObject<{ map: unknown; key: unknown }>(
        input,
        ['op', 'map', 'key'],
        `\`${op}\` command`,
      );
      const map = mapNamed(c.map);
      const key = oneOf(c.key, DISPATCH_KEYS, 'dispatch key');
      if (key !== map.key) {
        throw new InvalidInputError(
          'dispatch key',
          key,
          `Invalid key ${show(key)} for map ${map.map}: it is keyed by \`${map.key}\`.`,
        );
      }
      return { op, map: map.map, key };
    }
    case 'add rule':
    case 'insert rule': {
      const c = strictObject<{ chain: unknown; rule: unknown }>(
        input,
        ['op', 'chain', 'rule'],
        `\`${op}\` command`,
      );
      return { op, chain: validateChainName(c.chain), rule: checkRule(c.rule) };
    }
    case 'delete rule': {
      const c = strictObject<{ chain: unknown; handle: unknown }>(
        input,
        ['op', 'chain', 'handle'],
        '`delete rule` command',
      );
      if (
        typeof c.handle !== 'number' ||
        !Number.isSafeInteger(c.handle) ||
        c.handle < 1 ||
        c.handle > 0xffff_ffff_ffff
      ) {
        throw new InvalidInputError(
          'rule handle',
          c.handle,
          `Invalid rule handle ${show(c.handle)}: expected a whole number >= 1, as \`nft -j\` reports it.`,
        );
      }
      return { op, chain: validateChainName(c.chain), handle: c.handle };
    }
    case 'add element': {
      const c = strictObject<{ map: unknown; key: unknown; target: unknown }>(
        input,
        ['op', 'map', 'key', 'target'],
        '`add element` command',
      );
      const map = mapNamed(c.map);
      const target = validateChainName(c.target);
      if (!target.startsWith('agent-')) {
        throw new InvalidInputError(
          'element target',
          target,
          `Invalid element target ${show(target)}: a dispatch jumps to an agent chain \`agent-<agent id>-<fwd|in|out>\`, never to a base chain.`,
        );
      }
      return { op, map: map.map, key: checkElementKey(c.key, map.key), target };
    }
    case 'delete element': {
      const c = strictObject<{ map: unknown; key: unknown }>(
        input,
        ['op', 'map', 'key'],
        '`delete element` command',
      );
      const map = mapNamed(c.map);
      return { op, map: map.map, key: checkElementKey(c.key, map.key) };
    }
  }
}

/**
 * Check a whole plan (family, table, every command, rule, expression, name and value,
 * and no unknown key anywhere) and return a copy made only of checked values. A plan for an
 * `ip` table may hold no IPv6 part (`ip6` match, ICMPv6 type, `ip6 saddr` map or element).
 *
 * @throws {InvalidInputError} naming the first refused value and the accepted forms.
 * @throws {TypeError} when a part that must be an object is not one.
 */
export function validatePlan(input: unknown): NftPlan {
  const plan = strictObject<{ family: unknown; table: unknown; commands: unknown }>(
    input,
    ['family', 'table', 'commands'],
    'nft plan',
  );
  const family = oneOf(plan.family, ['inet', 'ip'] as const, 'table family');
  const table = validateTableName(plan.table);
  if (!Array.isArray(plan.commands) || plan.commands.length > MAX_PLAN_COMMANDS) {
    throw new InvalidInputError(
      'plan commands',
      Array.isArray(plan.commands) ? `${plan.commands.length} commands` : plan.commands,
      `Invalid plan: \`commands\` must be a list of at most ${MAX_PLAN_COMMANDS} commands.`,
    );
  }
  const commands = (plan.commands as unknown[]).map(checkCommand);
  checkFamilyFit(family, commands);
  return { family, table, commands };
}

// Whether a checked plan fits its table's family: a table of family `ip` never sees an IPv6
// packet, so a plan for one may hold no IPv6 part (nft refuses most of them anyway, with a
// message that does not say which of our commands was at fault).

/** What of an expression only IPv6 packets can match, or undefined. */
function ipv6Expr(expr: NftExpr): string | undefined {
  switch (expr.type) {
    case 'saddr':
    case 'daddr':
      return expr.family === 'ip6' ? `\`ip6 ${expr.type} ${expr.addrs.join(', ')}\`` : undefined;
    case 'icmpv6Type':
      return `\`icmpv6 type ${expr.types.join(', ')}\``;
    case 'vmap':
      return expr.key === 'ip6 saddr' ? `\`ip6 saddr vmap @${expr.map}\`` : undefined;
    default:
      return undefined;
  }
}

/** What of a checked command is IPv6-only (an `ip6` match, map, key or element), or undefined. */
function ipv6Part(command: NftCommand): string | undefined {
  switch (command.op) {
    case 'add rule':
    case 'insert rule':
      for (const expr of command.rule.exprs) {
        const found = ipv6Expr(expr);
        if (found !== undefined) return found;
      }
      return undefined;
    case 'add map':
    case 'create map':
      return command.key === 'ip6 saddr' ? `map ${command.map} keyed by \`ip6 saddr\`` : undefined;
    case 'add element':
    case 'delete element':
      return DISPATCH_MAPS.find((m) => m.map === command.map)?.key === 'ip6 saddr'
        ? `an element of map ${command.map} (keyed by \`ip6 saddr\`)`
        : undefined;
    default:
      return undefined;
  }
}

function describeCommand(command: NftCommand, index: number): string {
  const where =
    'chain' in command
      ? ` in chain ${command.chain}`
      : 'map' in command
        ? ` on map ${command.map}`
        : '';
  const comment =
    'rule' in command && command.rule.comment !== undefined
      ? ` (comment ${JSON.stringify(command.rule.comment)})`
      : '';
  return `command ${index + 1} (\`${command.op}\`${where}${comment})`;
}

/**
 * Refuse every IPv6-only part in a plan for an `ip` table: such a table never sees IPv6
 * packets, and nft itself refuses `ip6` matches and keys in it.
 */
function checkFamilyFit(family: TableFamily, commands: readonly NftCommand[]): void {
  if (family !== 'ip') return;
  commands.forEach((command, index) => {
    const part = ipv6Part(command);
    if (part === undefined) return;
    throw new InvalidInputError(
      'rule for an `ip` table',
      part,
      `Invalid ${describeCommand(command, index)} for a table of family \`ip\`: ${part} is IPv6, which an \`ip\` table never sees. Use family \`inet\` for IPv6, or leave IPv6 out of the plan.`,
    );
  });
}
