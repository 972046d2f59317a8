/**
 * The combine wire format: the calls one ledger instance hands to whoever
 * applies them for it, and the reply. Shared by both ledgers that combine: the
 * NATS ledger sends it to a pool's combiner over the network (`nats/`), the
 * file ledger posts it in the pool's combining directory (`channel.ts`). Pure:
 * encode, decode and validate. Everything decoded comes from another process,
 * so it is checked as strictly as a document read from disk: a malformed
 * message is refused, never half-applied.
 */
import {
  DuplicateReservationError,
  ErrorCode,
  InvalidInputError,
  LedgerUnavailableError,
} from '../errors/index.js';
import { SCALAR_DIMENSIONS } from '../resources/cap-fields.js';
import { deviceIdsProblem, extendedNameProblem } from '../resources/names.js';
import type { ResourceCap } from '../resources/types.js';
import { MAX_ID_LENGTH } from './checks.js';
import { CAP_KEYS, normalizeCap } from './document/cap.js';
import { validateDocument } from './document/codec.js';
import { validatePoolName } from './document/pool-name.js';
import type { LedgerAnswer, LedgerOp, OpAnswer } from './ops.js';
import { type AdoptResult, MAX_ADOPT, type ReservationRow, type ReserveResult } from './types.js';

/** The wire version; a message of another version is refused. */
export const COMBINE_WIRE_VERSION = 1;
/** The most calls one request carries. */
export const MAX_FORWARDED_OPS = 1000;
/** The largest request or reply accepted, in bytes. */
export const MAX_COMBINE_MESSAGE_BYTES = 1024 * 1024;

/**
 * Refuse a pool name that cannot travel on the wire: one the file ledger
 * refuses, or one that would make an empty NATS subject token (a leading or
 * trailing `.`, or `..`).
 *
 * @throws InvalidInputError naming the pool.
 */
export function assertSubjectSafePool(pool: string): void {
  validatePoolName(pool);
  if (pool.startsWith('.') || pool.endsWith('.') || pool.includes('..')) {
    throw new InvalidInputError(
      'pool name',
      pool,
      `Invalid pool name ${JSON.stringify(pool)} for a NATS KV ledger: a name may not start or end with '.' or hold '..', because each '.' separates a subject token.`,
    );
  }
}

/** A request: the calls one instance sends the combiner of a pool. */
export interface CombineRequest {
  pool: string;
  /** The cap the sender registered: the combiner serves it only when its own is the same. */
  cap: ResourceCap;
  ops: LedgerOp[];
}

/** Serialize a request. */
export function encodeRequest(request: CombineRequest): string {
  return JSON.stringify({ v: COMBINE_WIRE_VERSION, ...request });
}

/**
 * Parse and validate a request.
 *
 * @throws TypeError naming what is wrong (the combiner answers `refused`).
 */
export function decodeRequest(data: Uint8Array): CombineRequest {
  if (data.length > MAX_COMBINE_MESSAGE_BYTES) {
    throw new TypeError(`request of ${data.length} bytes is over ${MAX_COMBINE_MESSAGE_BYTES}`);
  }
  return parseRequest(new TextDecoder().decode(data));
}

/**
 * {@link decodeRequest} for a request already read as text (the file ledger's
 * posted requests): the same checks, without encoding it to bytes first.
 *
 * @throws TypeError naming what is wrong.
 */
export function decodeRequestText(text: string): CombineRequest {
  const bytes = utf8Length(text);
  if (bytes > MAX_COMBINE_MESSAGE_BYTES) {
    throw new TypeError(`request of ${bytes} bytes is over ${MAX_COMBINE_MESSAGE_BYTES}`);
  }
  return parseRequest(text);
}

// The checks of a request whose size was checked (as bytes or as text).
function parseRequest(text: string): CombineRequest {
  const value: unknown = JSON.parse(text);
  if (!isObject(value) || value.v !== COMBINE_WIRE_VERSION) {
    throw new TypeError(`request is not a version ${COMBINE_WIRE_VERSION} object`);
  }
  const { pool, cap, ops } = value;
  if (typeof pool !== 'string') throw new TypeError('request pool is not a string');
  assertSubjectSafePool(pool);
  if (!isObject(cap)) throw new TypeError('request cap is not an object');
  onlyKeys(cap, CAP_KEYS, 'cap');
  const normalized = normalizeCap(cap as ResourceCap);
  if (!Array.isArray(ops) || ops.length === 0 || ops.length > MAX_FORWARDED_OPS) {
    throw new TypeError(`request ops is not an array of 1 to ${MAX_FORWARDED_OPS} calls`);
  }
  return { pool, cap: normalized, ops: ops.map((op) => decodeOp(op, pool)) };
}

function decodeRow(value: unknown, pool: string, kind: string): ReservationRow {
  const row = validateDocument(
    { version: 1, cap: {}, reservations: [value] },
    { pool, location: `a forwarded ${kind} call` },
  ).reservations[0] as ReservationRow;
  if (row.agentId === '' || typeof row.leaseId !== 'string' || row.leaseId === '') {
    throw new TypeError(`${kind} call row needs an agentId and a leaseId`);
  }
  return row;
}

function decodeOp(value: unknown, pool: string): LedgerOp {
  if (!isObject(value)) throw new TypeError('call is not an object');
  switch (value.kind) {
    case 'reserve': {
      onlyKeys(value, ['kind', 'row', 'maybeApplied'], 'reserve call');
      return {
        kind: 'reserve',
        row: decodeRow(value.row, pool, 'reserve'),
        ...flag(value, 'maybeApplied'),
      };
    }
    case 'adopt': {
      onlyKeys(value, ['kind', 'rows', 'maybeApplied'], 'adopt call');
      if (!Array.isArray(value.rows) || value.rows.length === 0 || value.rows.length > MAX_ADOPT) {
        throw new TypeError(`adopt call rows is not an array of 1 to ${MAX_ADOPT} rows`);
      }
      const rows = value.rows.map((row: unknown) => decodeRow(row, pool, 'adopt'));
      return { kind: 'adopt', rows, ...flag(value, 'maybeApplied') };
    }
    case 'release': {
      onlyKeys(
        value,
        ['kind', 'agentId', 'instanceId', 'maybeApplied', 'removedBefore'],
        'release call',
      );
      if (typeof value.agentId !== 'string' || value.agentId === '') {
        throw new TypeError('release call agentId is not a non-empty string');
      }
      if (value.instanceId !== undefined && typeof value.instanceId !== 'string') {
        throw new TypeError('release call instanceId is not a string');
      }
      return {
        kind: 'release',
        agentId: value.agentId,
        ...(value.instanceId !== undefined ? { instanceId: value.instanceId as string } : {}),
        ...flag(value, 'maybeApplied'),
        ...flag(value, 'removedBefore'),
      };
    }
    case 'releaseInstance':
      onlyKeys(value, ['kind', 'instanceId'], 'releaseInstance call');
      if (typeof value.instanceId !== 'string' || value.instanceId === '') {
        throw new TypeError('releaseInstance call instanceId is not a non-empty string');
      }
      return { kind: 'releaseInstance', instanceId: value.instanceId };
    case 'reap':
      onlyKeys(value, ['kind', 'background'], 'reap call');
      return { kind: 'reap', ...flag(value, 'background') };
    default:
      throw new TypeError(`unknown call kind ${JSON.stringify(String(value.kind).slice(0, 32))}`);
  }
}

/**
 * A reply:
 * - `answers`: every call was decided, in order (an answer may be a
 *   `DuplicateReservationError`).
 * - `redirect`: nothing was applied; this instance does not combine the pool
 *   (any more). Ask again who does.
 * - `direct`: the combiner gave up on the batch (its own error); nothing of it
 *   will be applied later. `maybeApplied` says, per call, whether a write that
 *   carried it may have landed. The sender does the calls itself.
 */
export type CombineReply =
  | { kind: 'answers'; answers: OpAnswer[] }
  | { kind: 'redirect'; reason: string }
  | { kind: 'direct'; maybeApplied: boolean[]; reason: string };

/** Serialize a reply. */
export function encodeReply(reply: CombineReply): string {
  if (reply.kind !== 'answers') return JSON.stringify({ v: COMBINE_WIRE_VERSION, ...reply });
  return JSON.stringify({
    v: COMBINE_WIRE_VERSION,
    kind: 'answers',
    answers: reply.answers.map((answer) =>
      answer.ok
        ? { ok: true, value: answer.value ?? null }
        : {
            ok: false,
            code: (answer.error as { code?: unknown }).code,
            id: (answer.error as { id?: unknown }).id,
            message: String((answer.error as Error).message ?? answer.error),
          },
    ),
  });
}

/**
 * Parse a reply to the calls `ops` on `pool`: one answer per call, each of the
 * shape its call answers (a grant's device ids checked).
 *
 * @throws TypeError when it is malformed.
 */
export function decodeReply(
  data: Uint8Array,
  pool: string,
  ops: readonly LedgerOp[],
): CombineReply {
  if (data.length > MAX_COMBINE_MESSAGE_BYTES) throw new TypeError('reply too large');
  return parseReply(new TextDecoder().decode(data), pool, ops);
}

/**
 * {@link decodeReply} for a reply already read as text (the file ledger's
 * answers): the same checks, without encoding it to bytes first.
 *
 * @throws TypeError naming what is wrong.
 */
export function decodeReplyText(
  text: string,
  pool: string,
  ops: readonly LedgerOp[],
): CombineReply {
  if (utf8Length(text) > MAX_COMBINE_MESSAGE_BYTES) throw new TypeError('reply too large');
  return parseReply(text, pool, ops);
}

// The checks of a reply whose size was checked (as bytes or as text).
function parseReply(text: string, pool: string, ops: readonly LedgerOp[]): CombineReply {
  const count = ops.length;
  const value: unknown = JSON.parse(text);
  if (!isObject(value) || value.v !== COMBINE_WIRE_VERSION) {
    throw new TypeError('reply is not a version 1 object');
  }
  const reason = typeof value.reason === 'string' ? value.reason.slice(0, 500) : '';
  if (value.kind === 'redirect') return { kind: 'redirect', reason };
  if (value.kind === 'direct') {
    const flags = value.maybeApplied;
    if (
      !Array.isArray(flags) ||
      flags.length !== count ||
      flags.some((f) => typeof f !== 'boolean')
    ) {
      throw new TypeError('direct reply maybeApplied is not one boolean per call');
    }
    return { kind: 'direct', maybeApplied: flags as boolean[], reason };
  }
  if (value.kind !== 'answers' || !Array.isArray(value.answers) || value.answers.length !== count) {
    throw new TypeError('reply is not one answer per call');
  }
  return {
    kind: 'answers',
    answers: value.answers.map((answer: unknown, i: number): OpAnswer => {
      if (!isObject(answer)) throw new TypeError('answer is not an object');
      if (answer.ok === true) {
        const problem = answerValueProblem(ops[i]!, answer.value, pool);
        if (problem !== undefined) throw new TypeError(`answer ${i}: ${problem}`);
        return { ok: true, ...tagged(ops[i]!, answer.value) };
      }
      const message = typeof answer.message === 'string' ? answer.message.slice(0, 1000) : '';
      if (answer.code === ErrorCode.DUPLICATE_RESERVATION && typeof answer.id === 'string') {
        return { ok: false, error: new DuplicateReservationError(answer.id, message) };
      }
      return {
        ok: false,
        error: new LedgerUnavailableError(pool, `The combiner of the pool failed: ${message}`),
      };
    }),
  };
}

// An answer `value` that `answerValueProblem` found well formed, tagged with
// the kind of its call.
function tagged(op: LedgerOp, value: unknown): LedgerAnswer {
  switch (op.kind) {
    case 'reserve':
      return { kind: 'reserve', value: value as ReserveResult };
    case 'adopt':
      return { kind: 'adopt', value: value as AdoptResult[] };
    case 'release':
      return { kind: 'release', value: value === true };
    case 'releaseInstance':
      return { kind: 'releaseInstance', value: undefined };
    default:
      return { kind: 'reap', value: Number(value) };
  }
}

/** True for a plain JSON object (not null, not an array). */
export function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function onlyKeys(value: Record<string, unknown>, keys: readonly string[], what: string): void {
  const problem = unknownKeyProblem(value, keys, what);
  if (problem !== undefined) throw new TypeError(problem);
}

function unknownKeyProblem(
  value: Record<string, unknown>,
  keys: readonly string[],
  what: string,
): string | undefined {
  const extra = Object.keys(value).find((key) => !keys.includes(key));
  return extra === undefined
    ? undefined
    : `${what} has an unknown key ${JSON.stringify(extra.slice(0, 64))}`;
}

function flag<K extends string>(
  value: Record<string, unknown>,
  key: K,
): Partial<Record<K, boolean>> {
  const v = value[key];
  if (v === undefined) return {};
  if (typeof v !== 'boolean') throw new TypeError(`${key} is not a boolean`);
  return { [key]: v } as Partial<Record<K, boolean>>;
}

const isCount = (value: unknown): boolean =>
  typeof value === 'number' && Number.isFinite(value) && value >= 0;

/**
 * What is wrong with `value` as the answer of `op` on `pool`, or `undefined`
 * when it is well formed. A reply comes from another process (over NATS, from
 * any client allowed to answer), and a grant's device ids go on to a
 * backend's command line (`--gpus device=1,3`): each answer must have the
 * shape its call answers, and a grant exactly as many well-formed ids as it
 * asked for.
 */
function answerValueProblem(op: LedgerOp, value: unknown, pool: string): string | undefined {
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
  value: Record<string, unknown>,
  keys: readonly string[],
  asked: Readonly<Record<string, number>> | undefined,
): string | undefined {
  const extra = unknownKeyProblem(value, keys, 'a grant');
  if (extra !== undefined) return extra;
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
  const extra = unknownKeyProblem(value, REFUSAL_KEYS, 'a refusal');
  if (extra !== undefined) return extra;
  if (value.pool !== pool) return 'a refusal names another pool';
  const dimension = value.dimension;
  if (
    typeof dimension !== 'string' ||
    (!SCALAR_DIMENSIONS.includes(dimension) && extendedNameProblem(dimension) !== undefined)
  ) {
    return 'a refusal names no known dimension';
  }
  if (!isCount(value.requested) || !isCount(value.used) || !isCount(value.max)) {
    return 'a refusal has an amount that is not a number >= 0';
  }
  return typeof value.neverFits === 'boolean' ? undefined : 'neverFits is not a boolean';
}

function heldByProblem(value: Record<string, unknown>): string | undefined {
  if (value.ok !== false || Object.keys(value).length !== 2)
    return 'a held-by answer has other keys';
  const by = value.heldBy;
  return typeof by === 'string' && by.length > 0 && by.length <= MAX_ID_LENGTH
    ? undefined
    : 'heldBy is not an instance id';
}

// The UTF-8 length of `text`, counted only when it may be over the message
// limit (a character takes at most 3 bytes per UTF-16 unit).
function utf8Length(text: string): number {
  return text.length * 3 <= MAX_COMBINE_MESSAGE_BYTES
    ? text.length
    : new TextEncoder().encode(text).length;
}
