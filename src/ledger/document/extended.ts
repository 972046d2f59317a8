/**
 * The additive ledger fields beyond the kici wire format: extended resources
 * on rows (`extended`) and, on the cap, `maxExtended`, `provides`, `maxAgents`.
 * Pure; shared by every ledger backend.
 *
 * What the kici ledger (`@kici-dev/orchestrator` 0.9.1, `MachineLedger`) does with
 * them, read from its published source: it parses the whole document, filters
 * and appends rows as objects, and writes the same object back, so unknown row
 * and cap fields survive its rewrites; it compares only `maxCpu` and
 * `maxMemoryBytes` of the cap; it never counts `extended` nor the number of
 * rows. Extended resources are therefore safe in a mixed pool (kici rows hold
 * none), but `maxAgents` is not: kici writers add rows without checking it.
 */
import { InvalidInputError } from '../../errors/index.js';
import { validateExtendedResourceName } from '../../resources/names.js';
import type { ResourceCap } from '../../resources/types.js';
import { normalizeDevices, sameDevices } from './devices.js';

/** The validated extended part of a cap. */
export function normalizeExtendedCap(cap: ResourceCap): ResourceCap {
  const out: ResourceCap = {};
  if (cap.maxExtended !== undefined) {
    if (typeof cap.maxExtended !== 'object' || cap.maxExtended === null) {
      throw new TypeError(
        `Expected \`cap.maxExtended\` to be an object of counts, got \`${String(cap.maxExtended)}\``,
      );
    }
    const max: Record<string, number> = {};
    for (const [name, n] of Object.entries(cap.maxExtended)) {
      max[validateExtendedResourceName(name, 'cap.maxExtended')] = checkCount(
        `cap.maxExtended["${name}"]`,
        n,
      );
    }
    out.maxExtended = max;
  }
  if (cap.provides !== undefined) {
    if (!Array.isArray(cap.provides)) {
      throw new TypeError(
        `Expected \`cap.provides\` to be an array of resource names, got \`${String(cap.provides)}\``,
      );
    }
    out.provides = cap.provides.map((name) => validateExtendedResourceName(name, 'cap.provides'));
  }
  if (cap.maxAgents !== undefined) out.maxAgents = checkCount('cap.maxAgents', cap.maxAgents);
  if (cap.devices !== undefined) {
    const max: Record<string, number> = { ...out.maxExtended };
    out.devices = normalizeDevices(cap.devices, max);
    out.maxExtended = max;
  }
  return out;
}

/** True when two caps have the same extended caps, provided resources, agent cap and device ids. */
export function sameExtendedCap(a: ResourceCap, b: ResourceCap): boolean {
  if (a.maxAgents !== b.maxAgents || !sameDevices(a, b)) return false;
  const ma = a.maxExtended ?? {};
  const mb = b.maxExtended ?? {};
  const ka = Object.keys(ma);
  if (ka.length !== Object.keys(mb).length) return false;
  for (const key of ka) if (ma[key] !== mb[key]) return false;
  const pa = new Set(a.provides ?? []);
  const pb = new Set(b.provides ?? []);
  if (pa.size !== pb.size) return false;
  for (const name of pa) if (!pb.has(name)) return false;
  return true;
}

/** The extended part of a cap, for messages. */
export function describeExtendedCap(cap: ResourceCap): string[] {
  const parts: string[] = [];
  if (cap.maxExtended !== undefined && Object.keys(cap.maxExtended).length > 0) {
    parts.push(`maxExtended: ${JSON.stringify(cap.maxExtended)}`);
  }
  if (cap.provides !== undefined && cap.provides.length > 0) {
    parts.push(`provides: ${JSON.stringify(cap.provides)}`);
  }
  if (cap.maxAgents !== undefined) parts.push(`maxAgents: ${cap.maxAgents}`);
  if (cap.devices !== undefined && Object.keys(cap.devices).length > 0) {
    parts.push(`devices: ${JSON.stringify(cap.devices)}`);
  }
  return parts;
}

/**
 * Refuse a cap that a pool shared with kici writers cannot enforce. kici
 * (0.9.1) adds rows without counting them, so `maxAgents` would be exceeded by
 * any kici writer; extended resources are fine (kici keeps the fields and its
 * rows hold none).
 *
 * @param pool - The pool, for the message.
 * @param cap - The cap being registered.
 * @throws InvalidInputError naming the pool, the field and why.
 */
export function assertKiciCompatibleCap(pool: string, cap: ResourceCap): void {
  if (cap.maxAgents !== undefined) {
    throw new InvalidInputError(
      'pool cap',
      cap,
      `Pool ${JSON.stringify(pool)} is kici-compatible, but its cap sets maxAgents: kici writers (@kici-dev/orchestrator <= 0.9.1) add rows without counting them, so the cap could be exceeded. Remove maxAgents, or stop marking the pool kici-compatible once no kici writer shares it.`,
    );
  }
}

function checkCount(name: string, value: unknown): number {
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 0) {
    throw new TypeError(`Expected \`${name}\` to be a whole number >= 0, got \`${String(value)}\``);
  }
  return value;
}
