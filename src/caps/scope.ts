/**
 * The cap tracker's internals: per-scope state, the fit check in every dimension,
 * and input validation. Internal to `scaler-primitives/caps`.
 */
import type { CapFieldName } from '../resources/cap-fields.js';
import { type ExtendedResourceName, validateExtendedResourceName } from '../resources/names.js';
import { capToMillicores, coresToMillicores, MAX_CPU_CORES } from '../resources/quantity.js';
import type { ResourceAmount, ResourceCap } from '../resources/types.js';
import type { CapRefusal, CapReservation, ScopeUsage } from './types.js';

export interface Scope {
  // Integer millicores and bytes: sums of integers never drift.
  milli: number;
  bytes: number;
  count: number;
  maxMilli: number | undefined;
  maxBytes: number | undefined;
  maxAgents: number | undefined;
  // Extended usage, created on first use; caps, for a capped scope.
  ext: Map<string, number> | undefined;
  maxExt: Map<string, number> | undefined;
  provides: Set<string> | undefined;
  cap: ResourceCap | undefined;
}

export type ExtEntries = ReadonlyArray<readonly [string, number]> | undefined;

export interface Held {
  scopes: Scope[];
  names: string[];
  milli: number;
  bytes: number;
  ext: ExtEntries;
}

// How the tracker reads each cap field (setCap parses them into a Scope,
// check() tests them): a field added to the table of cap fields fails to
// compile here until the tracker handles it.
const TRACKER_READS = {
  maxCpu: 'maxMilli',
  maxMemoryBytes: 'maxBytes',
  maxAgents: 'maxAgents',
  maxExtended: 'maxExt',
  provides: 'provides',
  devices: 'not read: the count is in maxExtended; only machine pool ledgers assign ids',
} as const satisfies Record<CapFieldName, string>;
void TRACKER_READS;

// What a scope can count exactly: an uncapped dimension is bounded by it, so a
// sum never passes 2^53 and starts to round (reachable only with requests near
// the 2^43-core CPU bound or 2^52-byte memory amounts).
const COUNTABLE = Number.MAX_SAFE_INTEGER;

export function check(
  name: string,
  state: Scope,
  milli: number,
  bytes: number,
  ext: ExtEntries,
): CapRefusal | undefined {
  const maxMilli = state.maxMilli ?? COUNTABLE;
  if (state.milli + milli > maxMilli) {
    return {
      ok: false,
      scope: name,
      dimension: 'cpu',
      requested: milli / 1000,
      used: state.milli / 1000,
      max: maxMilli / 1000,
      neverFits: milli > maxMilli,
    };
  }
  const maxBytes = state.maxBytes ?? COUNTABLE;
  if (state.bytes + bytes > maxBytes) {
    return {
      ok: false,
      scope: name,
      dimension: 'memory',
      requested: bytes,
      used: state.bytes,
      max: maxBytes,
      neverFits: bytes > maxBytes,
    };
  }
  if (state.maxAgents !== undefined && state.count + 1 > state.maxAgents) {
    return {
      ok: false,
      scope: name,
      dimension: 'agents',
      requested: 1,
      used: state.count,
      max: state.maxAgents,
      neverFits: state.maxAgents < 1,
    };
  }
  // Extended resources fail closed: a capped scope that does not name one has none.
  if (ext !== undefined) {
    for (const [resource, n] of ext) {
      const max = (state.cap === undefined ? undefined : extMax(state, resource)) ?? COUNTABLE;
      const used = state.ext?.get(resource) ?? 0;
      if (used + n > max) {
        return {
          ok: false,
          scope: name,
          dimension: resource as ExtendedResourceName,
          requested: n,
          used,
          max,
          neverFits: n > max,
        };
      }
    }
  }
  return undefined;
}

// The cap of a capped scope on an extended resource: its number, unbounded
// (undefined) when provided, else 0.
export function extMax(state: Scope, resource: string): number | undefined {
  const max = state.maxExt?.get(resource);
  if (max !== undefined) return max;
  return state.provides?.has(resource) ? undefined : 0;
}

export function usageOf(state: Scope): ScopeUsage {
  const usage: ScopeUsage = {
    cpus: state.milli / 1000,
    memBytes: state.bytes,
    reservations: state.count,
  };
  if (state.ext !== undefined) usage.extended = Object.fromEntries(state.ext);
  return usage;
}

/** What `held` reserves under `id`; `released`: the held entry is gone, its names array is handed over. */
export function reservationOf(id: string, held: Held, released = false): CapReservation {
  const out: CapReservation = {
    id,
    scopes: released ? held.names : [...held.names],
    cpus: held.milli / 1000,
    memBytes: held.bytes,
  };
  if (held.ext !== undefined) out.extended = Object.fromEntries(held.ext);
  return out;
}

export function copyCap(cap: ResourceCap): ResourceCap {
  const out: ResourceCap = { ...cap };
  if (cap.maxExtended !== undefined) out.maxExtended = { ...cap.maxExtended };
  if (cap.provides !== undefined) out.provides = [...cap.provides];
  return out;
}

export function capCount(name: string, value: unknown): number {
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 0) {
    throw new TypeError(`Expected \`${name}\` to be a whole number >= 0, got \`${String(value)}\``);
  }
  return value;
}

export function capExtended(cap: ResourceCap): Map<string, number> | undefined {
  if (cap.maxExtended === undefined) return undefined;
  if (typeof cap.maxExtended !== 'object' || cap.maxExtended === null) {
    throw new TypeError(
      `Expected \`maxExtended\` to be an object of counts, got \`${String(cap.maxExtended)}\``,
    );
  }
  const out = new Map<string, number>();
  for (const [name, max] of Object.entries(cap.maxExtended)) {
    validateExtendedResourceName(name, 'maxExtended');
    out.set(name, capCount(`maxExtended["${name}"]`, max));
  }
  return out;
}

export function capProvides(cap: ResourceCap): Set<string> | undefined {
  if (cap.provides === undefined) return undefined;
  if (!Array.isArray(cap.provides)) {
    throw new TypeError(
      `Expected \`provides\` to be an array of resource names, got \`${String(cap.provides)}\``,
    );
  }
  return new Set(cap.provides.map((name) => validateExtendedResourceName(name, 'provides')));
}

export function checkId(id: string): void {
  if (typeof id !== 'string' || id.length === 0) {
    throw new TypeError(`Expected \`id\` to be a non-empty string, got \`${String(id)}\``);
  }
}

export function checkScope(scope: string): void {
  if (typeof scope !== 'string' || scope.length === 0) {
    throw new TypeError(`Expected a scope to be a non-empty string, got \`${String(scope)}\``);
  }
}

export function checkAmount(requests: ResourceAmount): {
  milli: number;
  bytes: number;
  ext: ExtEntries;
} {
  if (typeof requests !== 'object' || requests === null) {
    throw new TypeError(
      `Expected \`requests\` to be { cpus, memBytes }, got \`${String(requests)}\``,
    );
  }
  const { cpus, memBytes } = requests;
  if (typeof cpus !== 'number' || !Number.isFinite(cpus) || cpus < 0 || cpus > MAX_CPU_CORES) {
    throw new TypeError(`Expected \`cpus\` to be a finite number >= 0, got \`${String(cpus)}\``);
  }
  if (typeof memBytes !== 'number' || !Number.isSafeInteger(memBytes) || memBytes < 0) {
    throw new TypeError(
      `Expected \`memBytes\` to be a safe integer >= 0, got \`${String(memBytes)}\``,
    );
  }
  const extended = requests.extended;
  if (extended === undefined)
    return { milli: coresToMillicores(cpus), bytes: memBytes, ext: undefined };
  if (typeof extended !== 'object' || extended === null) {
    throw new TypeError(
      `Expected \`extended\` to be an object of counts, got \`${String(extended)}\``,
    );
  }
  const ext: Array<[string, number]> = [];
  for (const [name, n] of Object.entries(extended)) {
    validateExtendedResourceName(name, 'requests.extended');
    if (capCount(`extended["${name}"]`, n) > 0) ext.push([name, n]);
  }
  return { milli: coresToMillicores(cpus), bytes: memBytes, ext: ext.length > 0 ? ext : undefined };
}

export function capCpu(maxCpu: number): number {
  if (typeof maxCpu !== 'number' || !Number.isFinite(maxCpu) || maxCpu < 0) {
    throw new TypeError(
      `Expected \`maxCpu\` to be a finite number >= 0, got \`${String(maxCpu)}\``,
    );
  }
  // A cap rounds down: it never admits more than written.
  return capToMillicores(maxCpu);
}

export function capBytes(maxMemoryBytes: number): number {
  if (
    typeof maxMemoryBytes !== 'number' ||
    !Number.isSafeInteger(maxMemoryBytes) ||
    maxMemoryBytes < 0
  ) {
    throw new TypeError(
      `Expected \`maxMemoryBytes\` to be a safe integer >= 0, got \`${String(maxMemoryBytes)}\``,
    );
  }
  return maxMemoryBytes;
}
