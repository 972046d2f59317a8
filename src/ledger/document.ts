/**
 * Pure decisions over one pool document, shared by every ledger backend: parse and
 * validate, compare caps, decide which rows are stale from injected facts, check a
 * request against the cap, add and remove rows, serialize. No I/O, no clock.
 */

import { z } from 'zod';
import { InvalidInputError, LedgerCapMismatchError, LedgerCorruptError } from '../errors.js';
import { extendedNameProblem } from '../resources/names.js';
import type { ResourceCap } from '../resources/types.js';
import { capBytes, capMillicores } from './fit.js';
import type { LedgerDocument, ReservationRow } from './types.js';

export { assertKiciCompatibleCap } from './extended.js';
export { checkFit, sumRows } from './fit.js';

import { describeExtendedCap, normalizeExtendedCap, sameExtendedCap } from './extended.js';

/**
 * The document version this library reads and writes.
 *
 * @example
 * ```ts
 * import { LEDGER_VERSION, type LedgerDocument } from 'scaler-primitives/ledger';
 * const doc: LedgerDocument = { version: LEDGER_VERSION, cap: { maxCpu: 16 }, reservations: [] };
 * ```
 */
export const LEDGER_VERSION = 1;

// No leading dot: `.<pool>.queue` and temp files are dot names, and a dot pool
// would be hidden from listings (and is not a valid NATS KV key).
const POOL_NAME = /^[A-Za-z0-9_-][A-Za-z0-9._-]{0,127}$/;

/**
 * Check a pool name before it becomes part of a path or a key.
 *
 * @returns The name, unchanged.
 * @throws InvalidInputError when the name is empty, longer than 128 characters,
 *   starts with `.`, or holds a character outside `[A-Za-z0-9._-]`.
 * @throws TypeError when the name is not a string.
 *
 * @example
 * ```ts
 * import { validatePoolName } from 'scaler-primitives/ledger';
 * validatePoolName('build-host'); // 'build-host'
 * validatePoolName('../etc'); // throws InvalidInputError: expected [A-Za-z0-9._-], not starting with '.'
 * ```
 */
export function validatePoolName(name: unknown): string {
  if (typeof name !== 'string') {
    throw new TypeError(`Expected \`pool\` to be a string, got \`${typeof name}\``);
  }
  if (!POOL_NAME.test(name) || name === '.' || name === '..') {
    throw new InvalidInputError(
      'pool name',
      name,
      `Invalid pool name ${JSON.stringify(name.length > 160 ? `${name.slice(0, 160)}...` : name)}: use 1-128 characters from A-Z, a-z, 0-9, '.', '_' and '-', not starting with '.'.`,
    );
  }
  return name;
}

const finiteNonNegative = z.number().finite().nonnegative();

const count = z.number().int().nonnegative().max(Number.MAX_SAFE_INTEGER);
const resourceName = z
  .string()
  .refine((name) => extendedNameProblem(name) === undefined, 'not an extended resource name');
const extendedCounts = z.record(resourceName, count);

const capSchema = z.looseObject({
  maxCpu: finiteNonNegative.optional(),
  maxMemoryBytes: finiteNonNegative.optional(),
  maxExtended: extendedCounts.optional(),
  provides: z.array(resourceName).optional(),
  maxAgents: count.optional(),
});

const rowSchema = z.looseObject({
  instanceId: z.string(),
  pid: z.number().int().nonnegative(),
  bootId: z.string(),
  agentId: z.string(),
  cpus: finiteNonNegative,
  memBytes: finiteNonNegative,
  reservedAt: z.number().finite(),
  pidStartTime: z.number().int().nonnegative().optional(),
  leaseId: z.string().optional(),
  extended: extendedCounts.optional(),
});

const documentSchema = z.looseObject({
  version: z.literal(LEDGER_VERSION),
  cap: capSchema,
  reservations: z.array(rowSchema),
});

/**
 * Where a document came from, for error messages: its pool and its file path or KV key.
 *
 * @example
 * ```ts
 * import { type DocumentSource, parseDocument } from 'scaler-primitives/ledger';
 * declare const text: string;
 * const source: DocumentSource = { pool: 'build-host', location: '/var/lib/scaler-primitives/ledger/build-host.json' };
 * const doc = parseDocument(text, source); // a LedgerCorruptError names source.location
 * ```
 */
export interface DocumentSource {
  /** The pool name. */
  pool: string;
  /** The file path or KV key the document was read from. */
  location: string;
}

/**
 * Parse and validate the text of a pool document. Unknown fields, in the
 * document and in rows, are kept.
 *
 * @throws LedgerCorruptError when the text is not JSON, the version is not 1,
 *   or a field has the wrong type; the message names the location and the field.
 *
 * @example
 * ```ts
 * import { parseDocument } from 'scaler-primitives/ledger';
 * const doc = parseDocument('{"version":1,"cap":{"maxCpu":16},"reservations":[]}', {
 *   pool: 'build-host',
 *   location: '/var/lib/scaler-primitives/ledger/build-host.json',
 * });
 * ```
 */
export function parseDocument(text: string, source: DocumentSource): LedgerDocument {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    // V8's message quotes the text; only the position is kept (never the contents).
    const at = /position (\d+)/.exec(messageOf(error))?.[1];
    const detail =
      text.trim() === ''
        ? 'it is empty'
        : `it is not valid JSON (${at === undefined ? 'a syntax error' : `a syntax error at byte offset ${at}`}, ${text.length} characters)`;
    throw corrupt(source, detail);
  }
  return validateDocument(value, source);
}

/**
 * Validate an already-parsed pool document (for stores that hand over values).
 *
 * @throws LedgerCorruptError as {@link parseDocument}.
 *
 * @example
 * ```ts
 * import { validateDocument } from 'scaler-primitives/ledger';
 * declare const text: string;
 * const doc = validateDocument(JSON.parse(text), { pool: 'build-host', location: 'pool.build-host' });
 * ```
 */
export function validateDocument(value: unknown, source: DocumentSource): LedgerDocument {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw corrupt(source, 'it is not a JSON object');
  }
  const version = (value as { version?: unknown }).version;
  if (version !== LEDGER_VERSION) {
    throw corrupt(
      source,
      `its version is ${describeVersion(version)}, and this library reads version ${LEDGER_VERSION} only`,
    );
  }
  const result = documentSchema.safeParse(value);
  if (!result.success) {
    const first = result.error.issues[0]!;
    const where = first.path.length === 0 ? 'the document' : `\`${formatPath(first.path)}\``;
    const more =
      result.error.issues.length > 1 ? ` (and ${result.error.issues.length - 1} more)` : '';
    throw corrupt(source, `${where}: ${first.message}${more}`, result.error);
  }
  return result.data as LedgerDocument;
}

/**
 * Render a document as the text written to the store (two-space JSON, trailing newline).
 *
 * @example
 * ```ts
 * import { emptyDocument, serializeDocument } from 'scaler-primitives/ledger';
 * const text = serializeDocument(emptyDocument({ maxCpu: 16 }));
 * // '{\n  "version": 1,\n  "cap": {\n    "maxCpu": 16\n  },\n  "reservations": []\n}\n'
 * ```
 */
export function serializeDocument(doc: LedgerDocument): string {
  return `${JSON.stringify(doc, null, 2)}\n`;
}

/**
 * A fresh, empty document for a pool with this cap.
 *
 * @example
 * ```ts
 * import { emptyDocument } from 'scaler-primitives/ledger';
 * const doc = emptyDocument({ maxCpu: 16, maxMemoryBytes: 64 * 2 ** 30 }); // no reservations yet
 * ```
 */
export function emptyDocument(cap: ResourceCap): LedgerDocument {
  return { version: LEDGER_VERSION, cap: normalizeCap(cap), reservations: [] };
}

/**
 * Validate a cap given to `registerPool` and keep only its known fields:
 * `maxCpu`, `maxMemoryBytes`, `maxExtended`, `provides`, `maxAgents`.
 *
 * @throws TypeError when a field is present and not a finite number >= 0 (whole
 *   for counts), or `maxExtended`/`provides` are not an object/array.
 * @throws InvalidInputError for an invalid extended resource name.
 *
 * @example
 * ```ts
 * import { normalizeCap } from 'scaler-primitives/ledger';
 * const cap = normalizeCap({ maxCpu: 16, maxMemoryBytes: 64 * 2 ** 30 }); // only the known fields, checked
 * ```
 */
export function normalizeCap(cap: ResourceCap): ResourceCap {
  if (typeof cap !== 'object' || cap === null) {
    throw new TypeError(`Expected \`cap\` to be an object, got \`${String(cap)}\``);
  }
  const out: ResourceCap = {};
  if (cap.maxCpu !== undefined) out.maxCpu = checkAmount('cap.maxCpu', cap.maxCpu);
  if (cap.maxMemoryBytes !== undefined) {
    out.maxMemoryBytes = checkAmount('cap.maxMemoryBytes', cap.maxMemoryBytes);
  }
  if (cap.maxExtended !== undefined || cap.provides !== undefined || cap.maxAgents !== undefined) {
    Object.assign(out, normalizeExtendedCap(cap));
  }
  return out;
}

/**
 * True when two caps limit the same dimensions to the same amounts, compared as
 * they are enforced: whole millicores and whole bytes, rounded down.
 *
 * @example
 * ```ts
 * import { capsEqual } from 'scaler-primitives/ledger';
 * capsEqual({ maxCpu: 4 }, { maxCpu: 4.0001 }); // true: both are 4000 millicores
 * capsEqual({ maxCpu: 4 }, { maxCpu: 8 }); // false
 * ```
 */
export function capsEqual(a: ResourceCap, b: ResourceCap): boolean {
  const sameCpu =
    a.maxCpu === undefined || b.maxCpu === undefined
      ? a.maxCpu === b.maxCpu
      : capMillicores(a.maxCpu) === capMillicores(b.maxCpu);
  const sameMemory =
    a.maxMemoryBytes === undefined || b.maxMemoryBytes === undefined
      ? a.maxMemoryBytes === b.maxMemoryBytes
      : capBytes(a.maxMemoryBytes) === capBytes(b.maxMemoryBytes);
  return sameCpu && sameMemory && sameExtendedCap(a, b);
}

/**
 * Fail unless the stored cap equals the registered one.
 *
 * @throws LedgerCapMismatchError naming the location and both caps.
 *
 * @example
 * ```ts
 * import { assertCap, parseDocument } from 'scaler-primitives/ledger';
 * declare const text: string;
 * const source = { pool: 'build-host', location: '/var/lib/scaler-primitives/ledger/build-host.json' };
 * assertCap(parseDocument(text, source), { maxCpu: 16 }, source); // throws LedgerCapMismatchError when they differ
 * ```
 */
export function assertCap(doc: LedgerDocument, registered: ResourceCap, source: DocumentSource) {
  if (capsEqual(doc.cap, registered)) return;
  throw new LedgerCapMismatchError(
    source.pool,
    doc.cap,
    registered,
    `Pool ${JSON.stringify(source.pool)} in ${source.location} has cap ${describeCap(doc.cap)}, but this process registered ${describeCap(registered)}. Every writer of a pool must register the same cap; fix the configuration, or clear the pool deliberately if the cap really changed.`,
  );
}

/**
 * Why a row is stale: a constant object and its union type.
 *
 * @example
 * ```ts
 * import { type LivenessFacts, partitionRows, type ReservationRow, StaleReason } from 'scaler-primitives/ledger';
 * declare const rows: ReservationRow[];
 * declare const facts: LivenessFacts;
 * for (const { row, reason } of partitionRows(rows, facts).stale) {
 *   if (reason === StaleReason.OTHER_BOOT) console.log(`${row.agentId}: reserved before the last reboot`);
 * }
 * ```
 */
export const StaleReason = {
  /** Written during an earlier boot of the host. */
  OTHER_BOOT: 'other-boot',
  /** Same instance; the writer's process no longer exists. */
  PROCESS_GONE: 'process-gone',
  /** Same instance; the pid now belongs to a newer process (start time differs). */
  PID_REUSED: 'pid-reused',
  /** Another instance whose lease has expired or ended. */
  LEASE_EXPIRED: 'lease-expired',
} as const;
/** One of the values of {@link StaleReason}. */
export type StaleReason = (typeof StaleReason)[keyof typeof StaleReason];

/**
 * What a same-instance row's process probe found.
 *
 * @example
 * ```ts
 * import type { LivenessFacts, ProcessState } from 'scaler-primitives/ledger';
 * declare function isRunning(pid: number): boolean;
 * const facts: LivenessFacts = {
 *   bootId: '0b7e1d5c-9d1f-4c55-9a0e-2f5b8e3c1a77',
 *   instanceId: 'orchestrator-a',
 *   processState: (row): ProcessState => (isRunning(row.pid) ? 'alive' : 'gone'),
 *   leaseState: () => 'unknown',
 * };
 * ```
 */
export type ProcessState = 'alive' | 'gone' | 'reused';
/**
 * What a peer row's lease check found; `unknown` keeps the row (fail safe).
 *
 * @example
 * ```ts
 * import type { LeaseState } from 'scaler-primitives/ledger';
 * declare const freshLeases: Set<string>;
 * declare const expiredLeases: Set<string>;
 * const leaseState = (leaseId: string): LeaseState =>
 *   freshLeases.has(leaseId) ? 'fresh' : expiredLeases.has(leaseId) ? 'expired' : 'unknown';
 * ```
 */
export type LeaseState = 'fresh' | 'expired' | 'unknown';

/**
 * Facts the stale-row rule needs, gathered by the backend before it decides.
 * The backend decides how to answer (pid probe, lease file mtime, KV key age).
 *
 * @example
 * ```ts
 * import { type LivenessFacts, partitionRows, type ReservationRow } from 'scaler-primitives/ledger';
 * declare const rows: ReservationRow[];
 * const facts: LivenessFacts = {
 *   bootId: '0b7e1d5c-9d1f-4c55-9a0e-2f5b8e3c1a77',
 *   instanceId: 'orchestrator-a',
 *   processState: () => 'alive',
 *   leaseState: () => 'fresh',
 * };
 * const { live, stale } = partitionRows(rows, facts);
 * ```
 */
export interface LivenessFacts {
  /** The host's current boot id. */
  bootId: string;
  /** This ledger's instance id. */
  instanceId: string;
  /** Probe a same-instance row's process (pid, and start time when the row has one). */
  processState(row: ReservationRow): ProcessState;
  /** Check the lease of a peer row that carries `leaseId`. */
  leaseState(leaseId: string, row: ReservationRow): LeaseState;
}

/**
 * A row's verdict: live, or stale with the reason.
 *
 * @example
 * ```ts
 * import { type LivenessFacts, type ReservationRow, type RowVerdict, rowVerdict } from 'scaler-primitives/ledger';
 * declare const row: ReservationRow;
 * declare const facts: LivenessFacts;
 * const verdict: RowVerdict = rowVerdict(row, facts);
 * if (verdict.stale) console.log(`${row.agentId} is stale: ${verdict.reason}`);
 * ```
 */
export type RowVerdict =
  | {
      /** The row is live. */
      stale: false;
    }
  | {
      /** The row is stale. */
      stale: true;
      /** Why. */
      reason: StaleReason;
    };

/**
 * A stale row and why it is stale.
 *
 * @example
 * ```ts
 * import { type LivenessFacts, partitionRows, type ReservationRow, type StaleRow } from 'scaler-primitives/ledger';
 * declare const rows: ReservationRow[];
 * declare const facts: LivenessFacts;
 * const stale: StaleRow[] = partitionRows(rows, facts).stale;
 * for (const { row, reason } of stale) console.log(row.agentId, reason); // 'agent-1' 'process-gone'
 * ```
 */
export interface StaleRow {
  /** The row. */
  row: ReservationRow;
  /** Why it is stale. */
  reason: StaleReason;
}

/**
 * Decide whether one row is stale. In order:
 * 1. another boot id: stale;
 * 2. same instance: the process probe decides (gone or reused: stale);
 * 3. another instance with a lease: an expired lease is stale, fresh or unknown is live;
 * 4. another instance without a lease (an older writer): live, as in the seed,
 *    until the host reboots or the owner releases it.
 *
 * @example
 * ```ts
 * import { type LivenessFacts, type ReservationRow, rowVerdict } from 'scaler-primitives/ledger';
 * declare const row: ReservationRow;
 * declare const facts: LivenessFacts;
 * const verdict = rowVerdict(row, facts); // { stale: false } or { stale: true, reason: 'lease-expired' }
 * ```
 */
export function rowVerdict(row: ReservationRow, facts: LivenessFacts): RowVerdict {
  if (row.bootId !== facts.bootId) return { stale: true, reason: StaleReason.OTHER_BOOT };
  if (row.instanceId === facts.instanceId) {
    const state = facts.processState(row);
    if (state === 'gone') return { stale: true, reason: StaleReason.PROCESS_GONE };
    if (state === 'reused') return { stale: true, reason: StaleReason.PID_REUSED };
    return { stale: false };
  }
  if (typeof row.leaseId === 'string') {
    if (facts.leaseState(row.leaseId, row) === 'expired') {
      return { stale: true, reason: StaleReason.LEASE_EXPIRED };
    }
  }
  return { stale: false };
}

/**
 * A document's rows split into live ones and stale ones (with reasons), in document order.
 *
 * @example
 * ```ts
 * import { type LedgerDocument, type LivenessFacts, partitionRows, type RowPartition } from 'scaler-primitives/ledger';
 * declare const doc: LedgerDocument;
 * declare const facts: LivenessFacts;
 * const { live, stale }: RowPartition = partitionRows(doc.reservations, facts);
 * console.log(`${live.length} live, ${stale.length} to reap`);
 * ```
 */
export interface RowPartition {
  /** Rows to keep. */
  live: ReservationRow[];
  /** Rows to reap, each with why. */
  stale: StaleRow[];
}

/** Split rows into live and stale, in document order, by a per-row verdict. */
export function partitionBy(
  rows: readonly ReservationRow[],
  verdictOf: (row: ReservationRow) => RowVerdict,
): RowPartition {
  const live: ReservationRow[] = [];
  const stale: RowPartition['stale'] = [];
  for (const row of rows) {
    const verdict = verdictOf(row);
    if (verdict.stale) stale.push({ row, reason: verdict.reason });
    else live.push(row);
  }
  return { live, stale };
}

/**
 * Split rows into live and stale with {@link rowVerdict}.
 *
 * @example
 * ```ts
 * import { type LedgerDocument, type LivenessFacts, partitionRows, sumRows } from 'scaler-primitives/ledger';
 * declare const doc: LedgerDocument;
 * declare const facts: LivenessFacts;
 * const { live, stale } = partitionRows(doc.reservations, facts);
 * const usage = sumRows(live);
 * ```
 */
export function partitionRows(rows: readonly ReservationRow[], facts: LivenessFacts): RowPartition {
  return partitionBy(rows, (row) => rowVerdict(row, facts));
}

/**
 * The document with `row` appended (the input is not changed).
 *
 * @example
 * ```ts
 * import type { Clock } from 'scaler-primitives';
 * import { addRow, type LedgerDocument } from 'scaler-primitives/ledger';
 * declare const doc: LedgerDocument;
 * declare const bootId: string;
 * declare const clock: Clock;
 * const next = addRow(doc, {
 *   instanceId: 'orchestrator-a', pid: process.pid, bootId, agentId: 'agent-1',
 *   cpus: 2, memBytes: 4 * 2 ** 30, reservedAt: clock.now(),
 * });
 * ```
 */
export function addRow(doc: LedgerDocument, row: ReservationRow): LedgerDocument {
  return { ...doc, reservations: [...doc.reservations, row] };
}

/**
 * Which rows {@link removeRows} removes: an agent, optionally only one instance's row.
 *
 * @example
 * ```ts
 * import { type LedgerDocument, removeRows, type RowMatch } from 'scaler-primitives/ledger';
 * declare const doc: LedgerDocument;
 * const match: RowMatch = { agentId: 'agent-1', instanceId: 'orchestrator-a' }; // only this instance's row
 * const { doc: next, removed } = removeRows(doc, match);
 * ```
 */
export interface RowMatch {
  /** The agent id. */
  agentId: string;
  /** When set, only rows of this instance. */
  instanceId?: string;
}

/**
 * What {@link removeRows} returns.
 *
 * @example
 * ```ts
 * import { type LedgerDocument, type RemoveResult, removeRows } from 'scaler-primitives/ledger';
 * declare const doc: LedgerDocument;
 * declare function writeDocument(doc: LedgerDocument): void;
 * const result: RemoveResult = removeRows(doc, { agentId: 'agent-1' });
 * if (result.removed.length > 0) writeDocument(result.doc);
 * ```
 */
export interface RemoveResult {
  /** The document without the matching rows (the same object when nothing matched). */
  doc: LedgerDocument;
  /** The rows removed. */
  removed: ReservationRow[];
}

/**
 * The document without the matching rows, and the rows removed (the input is not changed).
 *
 * @example
 * ```ts
 * import { type LedgerDocument, removeRows } from 'scaler-primitives/ledger';
 * declare const doc: LedgerDocument;
 * const { doc: next, removed } = removeRows(doc, { agentId: 'agent-1' }); // any instance's row
 * ```
 */
export function removeRows(doc: LedgerDocument, match: RowMatch): RemoveResult {
  const removed: ReservationRow[] = [];
  const kept: ReservationRow[] = [];
  for (const row of doc.reservations) {
    const hit =
      row.agentId === match.agentId &&
      (match.instanceId === undefined || row.instanceId === match.instanceId);
    (hit ? removed : kept).push(row);
  }
  return { doc: removed.length ? { ...doc, reservations: kept } : doc, removed };
}

/**
 * The document keeping only `rows` (by identity), the input unchanged.
 *
 * @example
 * ```ts
 * import { keepRows, type LedgerDocument, type LivenessFacts, partitionRows } from 'scaler-primitives/ledger';
 * declare const doc: LedgerDocument;
 * declare const facts: LivenessFacts;
 * const { live } = partitionRows(doc.reservations, facts);
 * const reaped = keepRows(doc, live); // the stale rows dropped, cap and unknown fields kept
 * ```
 */
export function keepRows(doc: LedgerDocument, rows: readonly ReservationRow[]): LedgerDocument {
  if (rows.length === doc.reservations.length) return doc;
  return { ...doc, reservations: [...rows] };
}

/** Human form of a cap for messages: `{ maxCpu: 4, maxMemoryBytes: 8589934592 }` or `no cap`. */
export function describeCap(cap: ResourceCap): string {
  const parts: string[] = [];
  if (cap.maxCpu !== undefined) parts.push(`maxCpu: ${cap.maxCpu}`);
  if (cap.maxMemoryBytes !== undefined) parts.push(`maxMemoryBytes: ${cap.maxMemoryBytes}`);
  parts.push(...describeExtendedCap(cap));
  return parts.length ? `{ ${parts.join(', ')} }` : '{} (no limit)';
}

function checkAmount(name: string, value: unknown): number {
  if (typeof value !== 'number' || !Number.isFinite(value) || value < 0) {
    throw new TypeError(
      `Expected \`${name}\` to be a finite number >= 0, got \`${String(value)}\``,
    );
  }
  return value;
}

function corrupt(source: DocumentSource, detail: string, cause?: unknown): LedgerCorruptError {
  return new LedgerCorruptError(
    source.pool,
    source.location,
    `Ledger for pool ${JSON.stringify(source.pool)} at ${source.location} is corrupt: ${detail}. Nothing was written; inspect the file and clear it deliberately (see docs/ledger.md, "Clearing a corrupt pool").`,
    cause === undefined ? undefined : { cause },
  );
}

// A version for messages: a number as is, anything else by its type (never file text).
function describeVersion(version: unknown): string {
  if (version === undefined) return 'missing';
  if (typeof version === 'number') return String(version);
  return `not a number (${version === null ? 'null' : Array.isArray(version) ? 'an array' : `a ${typeof version}`})`;
}

function formatPath(path: ReadonlyArray<PropertyKey>): string {
  return path
    .map((key, i) =>
      typeof key === 'number' ? `[${key}]` : i === 0 ? String(key) : `.${String(key)}`,
    )
    .join('');
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
