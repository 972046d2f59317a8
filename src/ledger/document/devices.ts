/**
 * Device ids of a pool: a cap may list the ids of an extended resource's
 * devices (`devices: { "nvidia.com/gpu": ["0", "1", "2", "3"] }`), and then a
 * grant of `n` of that resource also assigns `n` of those ids, in the same
 * write that adds the row. Pure; shared by every ledger backend.
 *
 * The rule every writer follows:
 * - the ids held are the union of the `devices` of the live rows;
 * - a grant takes the lowest free ids in the order the cap lists them;
 * - a row that counts a device resource but carries no ids (a writer that does
 *   not assign, such as kici 0.9.1, which never counts extended resources at
 *   all) still counts against `maxExtended`, but which ids it uses is unknown;
 * - a grant whose count fits but for which too few ids are free (a row holding
 *   more ids than its count, written by a faulty writer) is refused, never
 *   given an id another live row holds.
 */
import { InvalidInputError } from '../../errors/index.js';
import { deviceIdsProblem, validateExtendedResourceName } from '../../resources/names.js';
import type { ResourceCap } from '../../resources/types.js';
import type { ReservationRow, ReserveRefusal } from '../types.js';

/**
 * Validate the `devices` of a cap against its `maxExtended`, and fill in a
 * missing `maxExtended` count from the number of ids.
 *
 * @param devices - The cap's `devices` field (unchecked input).
 * @param maxExtended - The cap's validated `maxExtended`, completed in place.
 * @returns The validated ids by resource name.
 * @throws InvalidInputError naming the resource and the bad value: not an
 *   object of arrays, a bad or repeated id, more than {@link MAX_DEVICE_IDS}
 *   ids, or a `maxExtended` count that differs from the number of ids.
 */
export function normalizeDevices(
  devices: unknown,
  maxExtended: Record<string, number>,
): Record<string, readonly string[]> {
  if (typeof devices !== 'object' || devices === null || Array.isArray(devices)) {
    throw new InvalidInputError(
      'cap.devices',
      devices,
      `Expected \`cap.devices\` to be an object of device id arrays by extended resource name, e.g. { "nvidia.com/gpu": ["0", "1"] }, got \`${String(devices)}\``,
    );
  }
  const out: Record<string, readonly string[]> = {};
  for (const [name, ids] of Object.entries(devices)) {
    validateExtendedResourceName(name, 'cap.devices');
    const where = `cap.devices[${JSON.stringify(name)}]`;
    const problem = deviceIdsProblem(ids);
    if (problem !== undefined) {
      throw new InvalidInputError(where, ids, `Invalid \`${where}\`: ${problem}`);
    }
    const count = maxExtended[name];
    if (count === undefined) maxExtended[name] = ids.length;
    else if (count !== ids.length) {
      throw new InvalidInputError(
        `cap.maxExtended[${JSON.stringify(name)}]`,
        count,
        `\`cap.maxExtended[${JSON.stringify(name)}]\` is ${count} but \`${where}\` lists ${ids.length} device ids; give the same number, or leave maxExtended out for that resource (it is then the number of ids)`,
      );
    }
    out[name] = [...(ids as string[])];
  }
  return out;
}

/** True when two caps list the same device ids, in the same order, for the same resources. */
export function sameDevices(a: ResourceCap, b: ResourceCap): boolean {
  const da = a.devices ?? {};
  const db = b.devices ?? {};
  const names = Object.keys(da);
  if (names.length !== Object.keys(db).length) return false;
  for (const name of names) {
    const ia = da[name]!;
    const ib = db[name];
    if (ib === undefined || ia.length !== ib.length) return false;
    for (let i = 0; i < ia.length; i++) if (ia[i] !== ib[i]) return false;
  }
  return true;
}

/**
 * Choose the device ids of a grant: for each requested resource whose ids the
 * cap lists, the lowest ids (in the cap's order) that no live row holds.
 * Called after the counts were found to fit.
 *
 * @param pool - The pool, for a refusal.
 * @param rows - The pool's live rows.
 * @param cap - The pool's cap.
 * @param extended - The requested counts.
 * @returns `ok` with the ids by resource (`devices` absent when the cap lists
 *   no ids for any requested resource), or a refusal when too few ids are free.
 */
export function assignDevices(
  pool: string,
  rows: readonly ReservationRow[],
  cap: ResourceCap,
  extended: Readonly<Record<string, number>> | undefined,
): DeviceAssignment | ReserveRefusal {
  const listed = cap.devices;
  if (listed === undefined || extended === undefined) return NONE;
  let out: Record<string, string[]> | undefined;
  for (const [name, want] of Object.entries(extended)) {
    const ids = listed[name];
    if (ids === undefined || want === 0) continue;
    const held = heldIds(rows, name);
    const free = ids.filter((id) => !held.has(id));
    if (free.length < want) {
      return {
        ok: false,
        pool,
        dimension: name as `${string}/${string}`,
        requested: want,
        used: ids.length - free.length,
        max: ids.length,
        neverFits: want > ids.length,
      };
    }
    out ??= {};
    out[name] = free.slice(0, want);
  }
  return out === undefined ? NONE : { ok: true, devices: out };
}

/** The ids {@link assignDevices} chose; `devices` is absent when there are none. */
export interface DeviceAssignment {
  /** Always true. */
  ok: true;
  /** The ids by resource. */
  devices?: Record<string, string[]>;
}

const NONE: DeviceAssignment = Object.freeze({ ok: true as const });

/**
 * Check device ids a caller already uses (an agent being adopted after a
 * restart): each listed by the cap and held by no other live row.
 *
 * @returns undefined when they may be held, else a refusal naming the resource.
 */
export function checkHeldDevices(
  pool: string,
  rows: readonly ReservationRow[],
  cap: ResourceCap,
  devices: Readonly<Record<string, readonly string[]>>,
): ReserveRefusal | undefined {
  for (const [name, ids] of Object.entries(devices)) {
    const listed = cap.devices?.[name] ?? [];
    const held = heldIds(rows, name);
    if (ids.some((id) => !listed.includes(id) || held.has(id))) {
      return {
        ok: false,
        pool,
        dimension: name as `${string}/${string}`,
        requested: ids.length,
        used: held.size,
        max: listed.length,
        neverFits: ids.some((id) => !listed.includes(id)),
      };
    }
  }
  return undefined;
}

function heldIds(rows: readonly ReservationRow[], name: string): Set<string> {
  const held = new Set<string>();
  for (const row of rows) {
    const ids = row.devices?.[name];
    if (ids !== undefined) for (const id of ids) held.add(id);
  }
  return held;
}
