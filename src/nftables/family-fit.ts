// Whether a checked plan fits its table's family: a table of family `ip` never sees an IPv6
// packet, so a plan for one may hold no IPv6 part (nft refuses most of them anyway, with a
// message that does not say which of our commands was at fault).
import { InvalidInputError } from '../errors.js';
import { DISPATCH_MAPS } from './layout.js';
import type { NftCommand, NftExpr, TableFamily } from './plan.js';

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
export function checkFamilyFit(family: TableFamily, commands: readonly NftCommand[]): void {
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
