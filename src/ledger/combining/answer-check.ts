/**
 * The check of a combiner's answer values. A reply comes from another process
 * (over NATS, from any client allowed to answer), and a grant's device ids go
 * on to a backend's command line (`--gpus device=1,3`): each answer must have
 * the shape its call answers, and a grant exactly as many well-formed ids as
 * it asked for. Pure.
 */
import { deviceIdsProblem, extendedNameProblem } from '../../resources/names.js';
import { MAX_ID_LENGTH } from '../checks.js';
import type { LedgerOp } from '../ops.js';

type Value = Record<string, unknown>;

const isObject = (value: unknown): value is Value =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

const isCount = (value: unknown): boolean =>
  typeof value === 'number' && Number.isFinite(value) && value >= 0;

/**
 * What is wrong with `value` as the answer of `op` on `pool`, or `undefined`
 * when it is well formed.
 */
export function answerValueProblem(op: LedgerOp, value: unknown, pool: string): string | undefined {
  switch (op.kind) {
    case 'reserve':
      return isObject(value) && value.ok === true
        ? grantProblem(value, ['ok', 'devices'], op.row.extended)
        : refusalProblem(value, pool);
    case 'adopt': {
      if (!Array.isArray(value) || value.length !== op.rows.length) {
        return 'an adopt answer is not one result per row';
      }
      for (const [i, result] of value.entries()) {
        const problem =
          isObject(result) && result.ok === true
            ? (grantProblem(result, ['ok', 'adopted', 'devices'], undefined) ??
              (typeof result.adopted === 'boolean' ? undefined : 'adopted is not a boolean'))
            : isObject(result) && 'heldBy' in result
              ? heldByProblem(result)
              : refusalProblem(result, pool);
        if (problem !== undefined) return `adopt result ${i}: ${problem}`;
      }
      return undefined;
    }
    case 'release':
      return typeof value === 'boolean' ? undefined : 'a release answer is not a boolean';
    case 'releaseInstance':
      return value === undefined || value === null
        ? undefined
        : 'a releaseInstance answer has a value';
    default:
      return isCount(value) && Number.isInteger(value) ? undefined : 'a reap answer is not a count';
  }
}

// A grant: only `keys`, and its device ids well formed; for a reserve (`asked`
// given) one list per resource it asked for that has ids, as long as the count.
function grantProblem(
  value: Value,
  keys: readonly string[],
  asked: Readonly<Record<string, number>> | undefined,
): string | undefined {
  const extra = Object.keys(value).find((key) => !keys.includes(key));
  if (extra !== undefined)
    return `a grant has an unknown key ${JSON.stringify(extra.slice(0, 64))}`;
  if (value.devices === undefined) return undefined;
  if (!isObject(value.devices)) return 'devices is not an object';
  for (const [name, ids] of Object.entries(value.devices)) {
    const problem = extendedNameProblem(name) ?? deviceIdsProblem(ids);
    if (problem !== undefined) return `devices of ${JSON.stringify(name.slice(0, 64))}: ${problem}`;
    if (asked !== undefined && (ids as string[]).length !== asked[name]) {
      return `devices of ${JSON.stringify(name)}: ${(ids as string[]).length} ids for a request of ${asked[name] ?? 0}`;
    }
  }
  return undefined;
}

const REFUSAL_KEYS = ['ok', 'pool', 'dimension', 'requested', 'used', 'max', 'neverFits'];

function refusalProblem(value: unknown, pool: string): string | undefined {
  if (!isObject(value) || value.ok !== false) return 'an answer is neither a grant nor a refusal';
  const extra = Object.keys(value).find((key) => !REFUSAL_KEYS.includes(key));
  if (extra !== undefined)
    return `a refusal has an unknown key ${JSON.stringify(extra.slice(0, 64))}`;
  if (value.pool !== pool) return 'a refusal names another pool';
  const dimension = value.dimension;
  if (
    typeof dimension !== 'string' ||
    (dimension !== 'cpu' &&
      dimension !== 'memory' &&
      dimension !== 'agents' &&
      extendedNameProblem(dimension) !== undefined)
  ) {
    return 'a refusal names no known dimension';
  }
  if (!isCount(value.requested) || !isCount(value.used) || !isCount(value.max)) {
    return 'a refusal has an amount that is not a number >= 0';
  }
  return typeof value.neverFits === 'boolean' ? undefined : 'neverFits is not a boolean';
}

function heldByProblem(value: Value): string | undefined {
  if (value.ok !== false || Object.keys(value).length !== 2)
    return 'a held-by answer has other keys';
  const by = value.heldBy;
  return typeof by === 'string' && by.length > 0 && by.length <= MAX_ID_LENGTH
    ? undefined
    : 'heldBy is not an instance id';
}
