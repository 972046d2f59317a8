/**
 * Whether a request fits a pool: sums of rows and the cap, in whole millicores
 * and whole bytes. Requests and rows round **up** (a fraction of a byte or of a
 * millicore is a whole one), caps round **down**, so no rounding can admit more
 * than the cap. Pure; shared by every ledger backend.
 */

import { type CapFieldName, capBytes } from '../../resources/cap-fields.js';
import {
  capToMillicores,
  coresToMillicores,
  MAX_CPU_CORES,
  MAX_MILLICORES,
} from '../../resources/quantity.js';
import type { ResourceAmount, ResourceCap } from '../../resources/types.js';
import type { ReservationRow, ReserveResult } from '../types.js';

// A row written by another writer beyond what the library counts holds "more
// than any cap": it saturates here instead of throwing, so the pool reads full.
const SATURATED_MILLI = MAX_MILLICORES + 1;
// Caps saturate one below, so a saturated row never fits any cap.
const SATURATED_BYTES = Number.MAX_SAFE_INTEGER + 1;

/** Whole millicores of a row or request, rounded up (saturating past {@link MAX_CPU_CORES}). */
export function rowMillicores(cpus: number): number {
  return cpus > MAX_CPU_CORES ? SATURATED_MILLI : coresToMillicores(cpus);
}

/** Whole bytes of a row or request, rounded up (past `Number.MAX_SAFE_INTEGER`, more than any cap). */
export function rowBytes(memBytes: number): number {
  const bytes = Math.ceil(memBytes);
  return Math.min(bytes, SATURATED_BYTES);
}

/** A CPU cap in whole millicores, rounded down. */
export function capMillicores(maxCpu: number): number {
  return capToMillicores(maxCpu);
}

/**
 * The summed CPU (cores, at millicore precision) and memory (whole bytes) of
 * rows, each rounded up to whole millicores and bytes before it is added.
 */
export function sumRows(rows: readonly ReservationRow[]): ResourceAmount {
  let milli = 0;
  let bytes = 0;
  let extended: Record<string, number> | undefined;
  for (const row of rows) {
    milli += rowMillicores(row.cpus);
    bytes += rowBytes(row.memBytes);
    if (row.extended !== undefined) extended = addExtended(extended, row.extended);
  }
  const out: ResourceAmount = { cpus: milli / 1000, memBytes: bytes };
  if (extended !== undefined) out.extended = extended;
  return out;
}

function addExtended(
  into: Record<string, number> | undefined,
  row: Readonly<Record<string, number>>,
): Record<string, number> {
  const out = into ?? {};
  for (const [name, n] of Object.entries(row)) out[name] = (out[name] ?? 0) + n;
  return out;
}

// How checkFit reads each cap field: a field added to the table of cap fields
// fails to compile here until checkFit handles it.
const FIT_READS = {
  maxCpu: 'cpu, in millicores rounded down',
  maxMemoryBytes: 'memory, in bytes rounded down',
  maxAgents: 'agents: the number of live rows',
  maxExtended: 'each extended resource asked for',
  provides: 'an extended resource without a limit',
  devices: 'not here: its count is in maxExtended; ids are chosen by devices.ts',
} as const satisfies Record<CapFieldName, string>;
void FIT_READS;

const NO_NAMES: readonly string[] = [];
const NO_SUMS: number[] = [];

/**
 * Would `request` fit next to `rows` under `cap`? Sums in whole millicores and
 * bytes (requests and rows rounded up, the cap rounded down). An absent cap
 * field means no limit in that dimension, except for extended resources: a
 * cap that neither caps one (`maxExtended`) nor `provides` it allows none.
 * `maxAgents` counts rows. Order: CPU, memory, agents, extended resources.
 */
export function checkFit(
  pool: string,
  rows: readonly ReservationRow[],
  cap: ResourceCap,
  request: ResourceAmount,
): ReserveResult {
  let haveMilli = 0;
  let haveBytes = 0;
  const wanted = request.extended;
  // Only the resources this request asks for are summed, one slot each, so a row's
  // extended map is never walked nor copied (the hot path of every reserve).
  const names = wanted === undefined ? NO_NAMES : Object.keys(wanted);
  const haveExtended = names.length === 0 ? NO_SUMS : new Array<number>(names.length).fill(0);
  for (const row of rows) {
    haveMilli += rowMillicores(row.cpus);
    haveBytes += rowBytes(row.memBytes);
    const extended = row.extended;
    if (extended === undefined) continue;
    for (let i = 0; i < names.length; i++) {
      const n = extended[names[i]!];
      if (n !== undefined) haveExtended[i]! += n;
    }
  }
  if (cap.maxCpu !== undefined) {
    const max = capMillicores(cap.maxCpu);
    const want = rowMillicores(request.cpus);
    if (haveMilli + want > max) {
      return {
        ok: false,
        pool,
        dimension: 'cpu',
        requested: want / 1000,
        used: haveMilli / 1000,
        max: max / 1000,
        neverFits: want > max,
      };
    }
  }
  if (cap.maxMemoryBytes !== undefined) {
    const max = capBytes(cap.maxMemoryBytes);
    const want = rowBytes(request.memBytes);
    if (haveBytes + want > max) {
      return {
        ok: false,
        pool,
        dimension: 'memory',
        requested: want,
        used: haveBytes,
        max,
        neverFits: want > max,
      };
    }
  }
  if (cap.maxAgents !== undefined && rows.length + 1 > cap.maxAgents) {
    return {
      ok: false,
      pool,
      dimension: 'agents',
      requested: 1,
      used: rows.length,
      max: cap.maxAgents,
      neverFits: cap.maxAgents < 1,
    };
  }
  for (let i = 0; i < names.length; i++) {
    const name = names[i]!;
    const want = wanted![name]!;
    if (want === 0) continue;
    // Fail closed: a pool whose cap does not name a resource has none of it.
    const max = cap.maxExtended?.[name] ?? (cap.provides?.includes(name) ? undefined : 0);
    if (max === undefined) continue;
    const used = haveExtended[i]!;
    if (used + want > max) {
      return {
        ok: false,
        pool,
        dimension: name as `${string}/${string}`,
        requested: want,
        used,
        max,
        neverFits: want > max,
      };
    }
  }
  return { ok: true };
}
