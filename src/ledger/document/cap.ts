/**
 * A pool's cap: validate the registered cap, compare caps as they are enforced,
 * fail on a stored cap that differs, describe a cap for messages.
 */

import { LedgerCapMismatchError } from '../../errors/index.js';
import type { ResourceCap } from '../../resources/types.js';
import type { LedgerDocument } from '../types.js';
import type { DocumentSource } from './codec.js';
import { describeExtendedCap, normalizeExtendedCap, sameExtendedCap } from './extended.js';
import { capBytes, capMillicores } from './fit.js';

// Every field of a cap, once: `satisfies` fails to compile when a field of
// `ResourceCap` is missing here, so a new field is never refused on the wire.
const CAP_FIELDS = {
  maxCpu: true,
  maxMemoryBytes: true,
  maxExtended: true,
  provides: true,
  maxAgents: true,
  devices: true,
} as const satisfies Record<keyof ResourceCap, true>;

/** The field names of a cap, as a forwarded request may carry them. */
export const CAP_KEYS: readonly string[] = Object.keys(CAP_FIELDS);

/**
 * Validate a cap given to `registerPool` and keep only its known fields:
 * `maxCpu`, `maxMemoryBytes`, `maxExtended`, `provides`, `maxAgents`, `devices`.
 *
 * @throws TypeError when a field is present and not a finite number >= 0 (whole
 *   for counts), or `maxExtended`/`provides` are not an object/array.
 * @throws InvalidInputError for an invalid extended resource name or bad device ids.
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
  if (
    cap.maxExtended !== undefined ||
    cap.provides !== undefined ||
    cap.maxAgents !== undefined ||
    cap.devices !== undefined
  ) {
    Object.assign(out, normalizeExtendedCap(cap));
  }
  return out;
}

/**
 * True when two caps limit the same dimensions to the same amounts, compared as
 * they are enforced: whole millicores and whole bytes, rounded down.
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
