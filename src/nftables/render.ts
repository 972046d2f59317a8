import { InvalidInputError } from '../errors/index.js';
import { validatePlan } from './check.js';
import type { NftCommand, NftElementKey, NftExpr, NftPlan, NftRule } from './plan.js';

// Defence in depth: the builder only hands us validated values, but the renderer
// still refuses anything that could end a quoted string or a line.
const SAFE_QUOTED = /^[A-Za-z0-9_.@+=:/ -]*$/;
const SAFE_WORD = /^[A-Za-z0-9_.:/-]+$/;

function quoted(value: string): string {
  if (!SAFE_QUOTED.test(value)) {
    throw new InvalidInputError(
      'nft string',
      value,
      `Invalid nft string ${JSON.stringify(value)}: expected letters, digits, spaces and \`_ . @ + = : / -\` only.`,
    );
  }
  return `"${value}"`;
}

function word(value: string | number): string {
  const text = String(value);
  if (!SAFE_WORD.test(text)) {
    throw new InvalidInputError(
      'nft word',
      value,
      `Invalid nft word ${JSON.stringify(text)}: expected letters, digits and \`_ . : / -\` only.`,
    );
  }
  return text;
}

function setOrOne(values: readonly (string | number)[]): string {
  if (values.length === 0) throw new TypeError('Expected a non-empty list of values, got `[]`');
  return values.length === 1 ? word(values[0]!) : `{ ${values.map(word).join(', ')} }`;
}

function renderExpr(expr: NftExpr): string {
  switch (expr.type) {
    case 'iifname':
      return `iifname ${quoted(expr.name)}`;
    case 'oifname':
      return `oifname ${quoted(expr.name)}`;
    case 'saddr':
      return `${expr.family} saddr ${setOrOne(expr.addrs)}`;
    case 'daddr':
      return `${expr.family} daddr ${setOrOne(expr.addrs)}`;
    case 'skuid':
      return `meta skuid ${word(expr.uid)}`;
    case 'ctState':
      return `ct state ${expr.states.map(word).join(',')}`;
    case 'dport':
      return `${expr.protocol} dport ${setOrOne(expr.ports)}`;
    case 'icmpv6Type':
      return `icmpv6 type ${setOrOne(expr.types)}`;
    case 'vmap':
      return `${expr.key} vmap @${word(expr.map)}`;
  }
}

// Render one rule body (what follows `add rule <family> <table> <chain>`).
function renderRule(rule: NftRule): string {
  const parts = rule.exprs.map(renderExpr);
  if (rule.verdict) parts.push(rule.verdict);
  if (rule.comment !== undefined) parts.push(`comment ${quoted(rule.comment)}`);
  return parts.join(' ');
}

function renderKey(key: NftElementKey): string {
  return key.kind === 'ifname' ? quoted(key.value) : word(key.value);
}

function renderCommand(family: string, table: string, command: NftCommand): string {
  const at = `${family} ${table}`;
  switch (command.op) {
    case 'add table':
    case 'create table':
      return `${command.op} ${at}`;
    case 'add chain':
    case 'create chain':
      return command.hook
        ? `${command.op} ${at} ${word(command.chain)} { type filter hook ${command.hook} priority 0 ; policy accept ; }`
        : `${command.op} ${at} ${word(command.chain)}`;
    case 'flush chain':
    case 'delete chain':
      return `${command.op} ${at} ${word(command.chain)}`;
    case 'add map':
    case 'create map':
      return `${command.op} ${at} ${word(command.map)} { typeof ${command.key} : verdict ; }`;
    case 'add rule':
    case 'insert rule':
      return `${command.op} ${at} ${word(command.chain)} ${renderRule(command.rule)}`;
    case 'delete rule':
      return `delete rule ${at} ${word(command.chain)} handle ${word(command.handle)}`;
    case 'add element':
      return `add element ${at} ${word(command.map)} { ${renderKey(command.key)} : jump ${word(command.target)} }`;
    case 'delete element':
      return `delete element ${at} ${word(command.map)} { ${renderKey(command.key)} }`;
  }
}

/**
 * Render a plan as an `nft -f` script: one command per line, ending with a newline.
 *
 * The whole plan is checked first, whoever built it: the family (`inet` or `ip`; an `ip`
 * table holds no IPv6 part), the table,
 * every command's `op`, chain, map, hook, key, rule, expression, verdict, comment,
 * address, port, uid and handle, and no unknown key anywhere. Nothing is rendered
 * unless all of it is valid.
 *
 * @throws {InvalidInputError} naming the first refused value and the accepted forms.
 * @throws {TypeError} when a part that must be an object is not one.
 * @example
 * ```ts
 * import { renderPlan } from 'scaler-primitives/nftables';
 *
 * renderPlan({ family: 'inet', table: 'scaler_primitives', commands: [{ op: 'add table' }] });
 * // 'add table inet scaler_primitives\n'
 * renderPlan({ family: 'ip', table: 'kici', commands: [{ op: 'add table' }] });
 * // 'add table ip kici\n'
 * ```
 */
export function renderPlan(plan: NftPlan): string {
  const checked = validatePlan(plan);
  if (checked.commands.length === 0) return '';
  const table = word(checked.table);
  return `${checked.commands.map((c) => renderCommand(checked.family, table, c)).join('\n')}\n`;
}
