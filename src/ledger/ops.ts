/**
 * One batch of queued calls applied to a pool document: the decisions both
 * ledger backends share, from the document each one read (under the file lock,
 * or for each compare-and-set attempt). No I/O; the only state carried between
 * attempts is on the ops themselves (`maybeApplied`, set by the caller, and
 * `removedBefore`, set here).
 */
import { DuplicateReservationError } from '../errors/index.js';
import { checkInstanceId, checkKnownKeys } from './checks.js';
import { assignDevices, checkHeldDevices } from './document/devices.js';
import { checkFit } from './document/fit.js';
import { addRow, keepRows, type RowMatch, removeRows } from './document/rows.js';
import type { RowPartition } from './document/verdict.js';
import type { Settled } from './group-commit.js';
import type {
  AdoptResult,
  LedgerDocument,
  ReleaseOptions,
  ReservationRow,
  ReserveResult,
} from './types.js';

/**
 * A queued call. `maybeApplied` is set when a write carrying it failed without
 * an answer; `removedBefore` records that an earlier attempt removed the row.
 * A release with `instanceId` removes the agent's row only when that instance made it;
 * without it, any instance's row (build it with {@link releaseOp}).
 * A `background` reap is the reaper's own round, not a caller's operation.
 */
export type LedgerOp =
  | {
      /** Add `row` if it fits (answers a {@link ReserveResult}). */
      kind: 'reserve';
      row: ReservationRow;
      /** A write carrying this op failed without an answer: it may have landed. */
      maybeApplied?: boolean;
    }
  | {
      /**
       * For each row: take over the row of `row.agentId` that `row.instanceId`
       * made (any process, live or stale), else add `row` if it fits (answers
       * one `AdoptResult` per row, in order).
       */
      kind: 'adopt';
      /** The rows as this process writes them. */
      rows: ReservationRow[];
      maybeApplied?: boolean;
    }
  | {
      /** Remove the agent's row (answers whether one was removed). */
      kind: 'release';
      agentId: string;
      /** Only this instance's row; any instance's when absent. */
      instanceId?: string;
      maybeApplied?: boolean;
      /** An earlier attempt removed the row. */
      removedBefore?: boolean;
    }
  | {
      /** Remove every row of an instance. */
      kind: 'releaseInstance';
      instanceId: string;
    }
  | {
      /** Drop stale rows (answers how many). */
      kind: 'reap';
      background?: boolean;
    };

/** What each kind of call answers. */
export interface LedgerAnswers {
  reserve: ReserveResult;
  adopt: AdoptResult[];
  release: boolean;
  releaseInstance: undefined;
  reap: number;
}

/**
 * A call's answer, tagged with the kind of the call (the tag stays in the
 * process: the combine wire carries the value alone, and the receiver tags it
 * with the kind of the call it sent). `placeholder` is the answer slot of a
 * call that carried a lost-rows report: its sender answers it with its own error.
 */
export type LedgerAnswer =
  | { [K in keyof LedgerAnswers]: { kind: K; value: LedgerAnswers[K] } }[keyof LedgerAnswers]
  | { kind: 'placeholder'; value: null };

/** One call's answer from a commit, or the error for that call alone. */
export type OpAnswer = Settled<LedgerAnswer>;

/**
 * The release op for `agentId` asked by instance `caller`: the release contract
 * every ledger shares. By default only `caller`'s row is removed; `anyInstance`
 * removes any instance's row, `instanceId` only that instance's.
 *
 * @throws TypeError when `options` is not an object, has a key other than
 *   `anyInstance` and `instanceId`, a field of the wrong type, or both fields.
 */
export function releaseOp(
  agentId: string,
  caller: string,
  options: ReleaseOptions | undefined,
): LedgerOp {
  if (options === undefined) return { kind: 'release', agentId, instanceId: caller };
  if (typeof options !== 'object' || options === null || Array.isArray(options)) {
    throw new TypeError(
      `Expected release \`options\` to be an object like { anyInstance: true } or { instanceId }, got \`${String(options)}\``,
    );
  }
  checkKnownKeys('release options', options, ['anyInstance', 'instanceId']);
  const { anyInstance, instanceId } = options;
  if (anyInstance !== undefined && typeof anyInstance !== 'boolean') {
    throw new TypeError(`Expected \`anyInstance\` to be a boolean, got \`${String(anyInstance)}\``);
  }
  if (instanceId !== undefined) checkInstanceId(instanceId);
  if (anyInstance === true && instanceId !== undefined) {
    throw new TypeError(
      "Expected either `anyInstance: true` or `instanceId`, not both: `anyInstance` removes any instance's row, `instanceId` only that instance's",
    );
  }
  if (anyInstance === true) return { kind: 'release', agentId };
  return { kind: 'release', agentId, instanceId: instanceId ?? caller };
}

/**
 * The document to write (when `dirty`) and every call's answer, in call order.
 */
export interface BatchOutcome {
  /** The document after the batch (stale rows dropped). */
  doc: LedgerDocument;
  /** True when the batch changed something and `doc` must be written. */
  dirty: boolean;
  /** One answer per op, in op order. */
  answers: OpAnswer[];
}

/**
 * Apply `ops` in order to `base` whose rows were split into live and stale.
 * Stale rows are dropped from any document written, and count as released;
 * only a change (a grant, a release, a reap) makes the batch `dirty`, so
 * refusals, no-op releases and reads never rewrite the document.
 */
export function applyBatch(
  pool: string,
  base: LedgerDocument,
  partition: RowPartition,
  ops: readonly LedgerOp[],
): BatchOutcome {
  let current = keepRows(base, partition.live);
  let dirty = false;
  const adoptRow = (row: ReservationRow): AdoptResult => {
    const own = (r: ReservationRow) => r.agentId === row.agentId && r.instanceId === row.instanceId;
    // Live or stale, a row of this instance still in the document is counted
    // by every writer that kept it: replacing it in place never counts it twice.
    const old = base.reservations.find(own);
    if (old !== undefined) {
      const others = current.reservations.filter((r) => !own(r));
      const taken = row.devices ?? old.devices;
      if (row.devices !== undefined) {
        const clash = checkHeldDevices(pool, others, current.cap, row.devices);
        if (clash !== undefined) return clash;
      }
      const next = taken === undefined ? row : { ...row, devices: taken };
      current = addRow(keepRows(current, others), next);
      dirty = true;
      return granted({ ok: true, adopted: true }, taken);
    }
    const foreign = current.reservations.find((r) => r.agentId === row.agentId);
    if (foreign) return { ok: false, heldBy: foreign.instanceId };
    const fit = checkFit(pool, current.reservations, current.cap, amountOf(row));
    if (!fit.ok) return fit;
    let devices: Record<string, string[]> | undefined;
    if (row.devices !== undefined) {
      const clash = checkHeldDevices(pool, current.reservations, current.cap, row.devices);
      if (clash !== undefined) return clash;
      devices = row.devices;
    } else {
      const assigned = assignDevices(pool, current.reservations, current.cap, row.extended);
      if (!assigned.ok) return assigned;
      devices = assigned.devices;
    }
    current = addRow(current, devices === undefined ? row : { ...row, devices });
    dirty = true;
    return granted({ ok: true, adopted: false }, devices);
  };
  const answers = ops.map((op): OpAnswer => {
    try {
      switch (op.kind) {
        case 'reserve': {
          const held = current.reservations.find((row) => row.agentId === op.row.agentId);
          if (held) {
            // A write that failed without an answer may have landed: our own row
            // (same lease, same timestamp) means it did, and the grant stands.
            if (op.maybeApplied && sameReservation(held, op.row))
              return { ok: true, kind: 'reserve', value: granted({ ok: true }, held.devices) };
            throw new DuplicateReservationError(
              op.row.agentId,
              `Agent ${JSON.stringify(op.row.agentId)} already holds a reservation in pool ${JSON.stringify(pool)}; release it before reserving again.`,
            );
          }
          const fit: ReserveResult = checkFit(
            pool,
            current.reservations,
            current.cap,
            amountOf(op.row),
          );
          if (!fit.ok) return { ok: true, kind: 'reserve', value: fit };
          const assigned = assignDevices(pool, current.reservations, current.cap, op.row.extended);
          if (!assigned.ok) return { ok: true, kind: 'reserve', value: assigned };
          const devices = assigned.devices;
          current = addRow(current, devices === undefined ? op.row : { ...op.row, devices });
          dirty = true;
          return { ok: true, kind: 'reserve', value: granted({ ok: true }, devices) };
        }
        case 'adopt':
          return { ok: true, kind: 'adopt', value: op.rows.map((row) => adoptRow(row)) };
        case 'release': {
          const match = { agentId: op.agentId, instanceId: op.instanceId };
          const wasStale = partition.stale.some((s) => matches(s.row, match));
          const next = removeRows(current, match);
          current = next.doc;
          const removed = next.removed.length > 0 || wasStale;
          if (removed) dirty = true;
          op.removedBefore ||= removed;
          return {
            ok: true,
            kind: 'release',
            value: removed || (op.maybeApplied === true && op.removedBefore === true),
          };
        }
        case 'releaseInstance': {
          const kept = current.reservations.filter((row) => row.instanceId !== op.instanceId);
          if (kept.length !== current.reservations.length) {
            current = keepRows(current, kept);
            dirty = true;
          }
          return { ok: true, kind: 'releaseInstance', value: undefined };
        }
        default:
          if (partition.stale.length > 0) dirty = true;
          return { ok: true, kind: 'reap', value: partition.stale.length };
      }
    } catch (error) {
      return { ok: false, error };
    }
  });
  return { doc: current, dirty, answers };
}

// The amount a row holds, as `checkFit` takes it.
function amountOf(row: ReservationRow) {
  return {
    cpus: row.cpus,
    memBytes: row.memBytes,
    ...(row.extended === undefined ? {} : { extended: row.extended }),
  };
}

/** A grant, with copies of the device ids when there are any (never the document's arrays). */
export function granted<T extends object>(
  answer: T,
  devices: Record<string, string[]> | undefined,
): T & { devices?: Record<string, string[]> } {
  return devices === undefined ? answer : { ...answer, devices: copyDevices(devices) };
}

function copyDevices(devices: Record<string, string[]>): Record<string, string[]> {
  const out: Record<string, string[]> = {};
  for (const [name, ids] of Object.entries(devices)) out[name] = [...ids];
  return out;
}

function matches(row: ReservationRow, match: RowMatch): boolean {
  return (
    row.agentId === match.agentId &&
    (match.instanceId === undefined || row.instanceId === match.instanceId)
  );
}

function sameReservation(a: ReservationRow, b: ReservationRow): boolean {
  return a.leaseId === b.leaseId && a.reservedAt === b.reservedAt && a.instanceId === b.instanceId;
}
