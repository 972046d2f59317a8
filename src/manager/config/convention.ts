/**
 * The config's `quantityConvention`: with `kubernetes`, every CPU and memory
 * quantity string of the config is read in that grammar (to cores and bytes)
 * before the schema, which reads numbers the same in either convention.
 */
import type { QuantityOptions } from '../../resources/convention.js';
import { parseCpu, parseMemory } from '../../resources/parse.js';

/** The conventions a config may name. @internal */
export const QUANTITY_CONVENTIONS = ['binary', 'kubernetes'] as const;

type Doc = Record<string, unknown>;

function isDoc(value: unknown): value is Doc {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/**
 * A copy of `value` with its quantity strings read in the convention it names
 * (`quantityConvention: 'kubernetes'`); `value` itself when it names none or
 * `binary`. A string that does not read is left for the schema to report.
 * @internal
 */
export function applyQuantityConvention(value: unknown): unknown {
  if (!isDoc(value) || value.quantityConvention !== 'kubernetes') return value;
  const opts: QuantityOptions = { convention: 'kubernetes' };
  const read = (parse: typeof parseCpu, v: unknown): unknown => {
    if (typeof v !== 'string') return v;
    try {
      return parse(v, opts);
    } catch {
      return v;
    }
  };
  // A cap: `maxCpu`, `maxMemory`.
  const cap = (c: unknown): unknown =>
    isDoc(c)
      ? {
          ...c,
          ...('maxCpu' in c ? { maxCpu: read(parseCpu, c.maxCpu) } : {}),
          ...('maxMemory' in c ? { maxMemory: read(parseMemory, c.maxMemory) } : {}),
        }
      : c;
  // A spec `{ cpus, memory }` (extended resources are counts in either convention).
  const spec = (s: unknown): unknown =>
    isDoc(s)
      ? {
          ...s,
          ...('cpus' in s ? { cpus: read(parseCpu, s.cpus) } : {}),
          ...('memory' in s ? { memory: read(parseMemory, s.memory) } : {}),
        }
      : s;
  // A request: nested `{ requests, limits }` or a flat spec.
  const request = (r: unknown): unknown => {
    if (!isDoc(r)) return r;
    if ('requests' in r || 'limits' in r) {
      return {
        ...r,
        ...('requests' in r ? { requests: spec(r.requests) } : {}),
        ...('limits' in r ? { limits: spec(r.limits) } : {}),
      };
    }
    return spec(r);
  };
  const defaults = (d: unknown): unknown =>
    isDoc(d) && 'resources' in d ? { ...d, resources: request(d.resources) } : d;
  // A LimitRange-like policy: quantities by resource, the ratio is a number.
  const limits = (l: unknown): unknown => {
    if (!isDoc(l)) return l;
    const out: Doc = { ...l };
    for (const [resource, parse] of [
      ['cpus', parseCpu],
      ['memory', parseMemory],
    ] as const) {
      const rules = l[resource];
      if (!isDoc(rules)) continue;
      const next: Doc = { ...rules };
      for (const key of ['min', 'max', 'defaultRequest', 'default']) {
        if (key in rules) next[key] = read(parse, rules[key]);
      }
      out[resource] = next;
    }
    return out;
  };
  const out: Doc = { ...value };
  if ('defaults' in value) out.defaults = defaults(value.defaults);
  if ('resourceCap' in value) out.resourceCap = cap(value.resourceCap);
  if ('limits' in value) out.limits = limits(value.limits);
  if (isDoc(value.machinePools)) {
    out.machinePools = Object.fromEntries(
      Object.entries(value.machinePools).map(([name, c]) => [name, cap(c)]),
    );
  }
  if (Array.isArray(value.scalers)) {
    out.scalers = value.scalers.map((scaler: unknown) => {
      if (!isDoc(scaler)) return scaler;
      const s: Doc = { ...scaler };
      if ('resourceCap' in scaler) s.resourceCap = cap(scaler.resourceCap);
      if ('limits' in scaler) s.limits = limits(scaler.limits);
      if ('defaults' in scaler) s.defaults = defaults(scaler.defaults);
      if (Array.isArray(scaler.labelSets)) {
        s.labelSets = scaler.labelSets.map((set: unknown) =>
          isDoc(set) && 'resources' in set ? { ...set, resources: request(set.resources) } : set,
        );
      }
      return s;
    });
  }
  return out;
}
