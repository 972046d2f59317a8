/**
 * A policy like Kubernetes `LimitRange` (type Container), as pure code: per
 * resource `{ min, max, maxLimitRequestRatio, defaultRequest, default }`.
 * Unlike Kubernetes (kubernetes#51430), defaults that violate the range are a
 * configuration error when the policy is read, not a surprise at admission.
 */
import { z } from 'zod';
import { InvalidInputError } from '../errors/index.js';
import { strictShape } from '../internal/zod-strict.js';
import type { QuantityOptions } from './convention.js';
import { ceilScaled, decimalOfNumber } from './decimal.js';
import { parseExtendedCount } from './extended.js';
import { extendedNameProblem } from './names.js';
import { parseCpu, parseMemory } from './parse.js';
import { coresToMillicores } from './quantity.js';
import type { ResolvedResources } from './resolve.js';
import type { ResourceRequest } from './types.js';

/** A parsed policy: rules by resource (`cpus`, `memory`, or an extended resource name). */
export type LimitRangePolicy = Readonly<
  Record<
    string,
    {
      /** Request and limit must be at least this. */
      min?: number;
      /** Request and limit must be at most this. */
      max?: number;
      /** The limit may be at most this many times the request (>= 1). */
      maxLimitRequestRatio?: number;
      /** The request when no layer declares one. */
      defaultRequest?: number;
      /** The limit when no layer declares one. */
      default?: number;
    }
  >
>;

// One resource's rules, parsed: cores for `cpus`, bytes for `memory`, counts otherwise.
type LimitRangeItem = LimitRangePolicy[string];

/** The rule that refused a job. */
export type LimitRangeRule = 'min' | 'max' | 'maxLimitRequestRatio';

// The outcome of checkLimitRange.
type LimitRangeResult = ReturnType<typeof checkLimitRange>;

const FIELDS = ['min', 'max', 'maxLimitRequestRatio', 'defaultRequest', 'default'] as const;

// Whole units a rule compares in: millicores, bytes, counts.
function units(resource: string, value: number): number {
  return resource === 'cpus' ? coresToMillicores(value) : value;
}

function amount(resource: string, opts: QuantityOptions) {
  return z.union([z.number(), z.string()]).transform((value, ctx) => {
    try {
      if (resource === 'cpus') return parseCpu(value, opts);
      if (resource === 'memory') return parseMemory(value, opts);
      return parseExtendedCount(resource, value);
    } catch (error) {
      ctx.addIssue({ code: 'custom', message: (error as Error).message });
      return z.NEVER;
    }
  });
}

/**
 * The consistency problems of a policy: defaults outside the range, `min` above
 * `max`, a ratio below 1, defaults whose ratio exceeds `maxLimitRequestRatio`.
 */
export function limitRangeProblems(policy: LimitRangePolicy): string[] {
  const problems: string[] = [];
  for (const [resource, item] of Object.entries(policy)) {
    const u = (v: number | undefined) => (v === undefined ? undefined : units(resource, v));
    const min = u(item.min);
    const max = u(item.max);
    const req = u(item.defaultRequest);
    const lim = u(item.default);
    const say = (text: string) => problems.push(`${resource}: ${text}`);
    if (min !== undefined && max !== undefined && min > max)
      say(`min ${item.min} > max ${item.max}`);
    for (const [name, v, raw] of [
      ['defaultRequest', req, item.defaultRequest],
      ['default', lim, item.default],
    ] as const) {
      if (v === undefined) continue;
      if (min !== undefined && v < min) say(`${name} ${raw} is below min ${item.min}`);
      if (max !== undefined && v > max) say(`${name} ${raw} is above max ${item.max}`);
    }
    if (req !== undefined && lim !== undefined && req > lim) {
      say(`defaultRequest ${item.defaultRequest} is above default ${item.default}`);
    }
    const ratio = item.maxLimitRequestRatio;
    if (ratio !== undefined) {
      if (ratio < 1) say(`maxLimitRequestRatio ${ratio} is below 1`);
      else if (req !== undefined && lim !== undefined && !withinRatio(lim, req, ratio)) {
        say(
          `default ${item.default} is more than ${ratio} times defaultRequest ${item.defaultRequest}`,
        );
      }
    }
  }
  return problems;
}

/**
 * zod schema of a policy as written in configuration:
 * `{ cpus?: { min?, max?, maxLimitRequestRatio?, defaultRequest?, default? }, memory?, "<domain>/<name>"? }`.
 * Quantities follow `opts.convention`; unknown keys are refused; an inconsistent
 * policy (a default outside the range, `min` above `max`, a ratio below 1, defaults
 * beyond the ratio) is an issue, so a bad default is a
 * config error at load time.
 *
 * @example
 * ```ts
 * import { limitRangeSchema } from 'scaler-primitives/resources';
 *
 * const policy = limitRangeSchema({ convention: 'kubernetes' }).parse({
 *   cpus: { min: '100m', max: '8', maxLimitRequestRatio: 4 },
 *   memory: { defaultRequest: '512Mi', default: '1Gi' },
 * });
 * ```
 */
export function limitRangeSchema(opts: QuantityOptions = {}): z.ZodType<LimitRangePolicy, unknown> {
  return z.record(z.string(), z.unknown()).transform((raw, ctx) => {
    const out: Record<string, LimitRangeItem> = {};
    for (const [resource, value] of Object.entries(raw)) {
      if (resource !== 'cpus' && resource !== 'memory') {
        const problem = extendedNameProblem(resource);
        if (problem !== undefined) {
          ctx.addIssue({
            code: 'custom',
            path: [resource],
            message: `Unknown resource ${JSON.stringify(resource.slice(0, 80))} in a limit range: use cpus, memory or an extended resource name (${problem})`,
          });
          continue;
        }
      }
      const item = strictShape({
        min: amount(resource, opts).optional(),
        max: amount(resource, opts).optional(),
        maxLimitRequestRatio: z.number().finite().optional(),
        defaultRequest: amount(resource, opts).optional(),
        default: amount(resource, opts).optional(),
      }).safeParse(value);
      if (!item.success) {
        for (const issue of item.error.issues) {
          ctx.addIssue({
            code: 'custom',
            path: [resource, ...issue.path.map(String)],
            message: issue.message,
          });
        }
        continue;
      }
      const parsed: LimitRangeItem = {};
      for (const f of FIELDS) if (item.data[f] !== undefined) parsed[f] = item.data[f];
      out[resource] = parsed;
    }
    for (const problem of limitRangeProblems(out)) {
      ctx.addIssue({ code: 'custom', message: `Inconsistent limit range: ${problem}` });
    }
    return out;
  }) as unknown as z.ZodType<LimitRangePolicy, unknown>;
}

/**
 * The policy's defaults as a layer for {@link resolveResources}: put it after the
 * job's and label set's layers (where a `LimitRange` applies in Kubernetes).
 *
 * @example
 * ```ts
 * import { limitRangeDefaults, type LimitRangePolicy, resolveResources, type ResourceRequest } from 'scaler-primitives/resources';
 *
 * declare const policy: LimitRangePolicy;
 * declare const job: ResourceRequest;
 * const defaults: ResourceRequest = limitRangeDefaults(policy); // a layer for resolveResources
 * const resolved = resolveResources([job, defaults]);
 * ```
 */
export function limitRangeDefaults(policy: LimitRangePolicy): ResourceRequest {
  const requests: Record<string, number> = {};
  const limits: Record<string, number> = {};
  for (const [resource, item] of Object.entries(policy)) {
    if (item.defaultRequest !== undefined) requests[resource] = item.defaultRequest;
    if (item.default !== undefined) limits[resource] = item.default;
  }
  const out: ResourceRequest = {};
  if (Object.keys(requests).length > 0) out.requests = requests;
  if (Object.keys(limits).length > 0) out.limits = limits;
  return out;
}

/**
 * Check resolved resources against a policy. The first rule broken refuses, in
 * resource order, then `min`, `max` (requests, then limits), then the ratio.
 *
 * An unset limit (no layer declared one) is unbounded: it passes `min`, and `max`
 * and `maxLimitRequestRatio` refuse it (`value` is `Infinity`), as Kubernetes'
 * LimitRanger refuses a container without a limit under a `max`. A policy's
 * `default` fills the limit in before the check (see {@link limitRangeDefaults}).
 *
 * @param policy - A parsed policy ({@link limitRangeSchema}).
 * @param resolved - The output of {@link resolveResources}.
 * @throws `InvalidInputError` when the policy is inconsistent.
 *
 * @example
 * ```ts
 * import { checkLimitRange, limitRangeSchema, resolveResources } from 'scaler-primitives/resources';
 *
 * const policy = limitRangeSchema().parse({ cpus: { max: '4' } });
 * checkLimitRange(policy, resolveResources([{ requests: { cpus: 8 } }]));
 * // { ok: false, resource: 'cpus', rule: 'max', side: 'requests', value: 8, bound: 4, message: ... }
 * checkLimitRange(policy, resolveResources([{ requests: { memory: '1Gi' } }]));
 * // { ok: false, resource: 'cpus', rule: 'max', side: 'limits', value: Infinity, ... }: no CPU limit
 * ```
 */
export function checkLimitRange(
  policy: LimitRangePolicy,
  resolved: Pick<ResolvedResources, 'requests' | 'limits'>,
):
  | {
      /** Inside the range. */
      ok: true;
    }
  | {
      /** Outside the range. */
      ok: false;
      /** The resource (`cpus`, `memory` or an extended name). */
      resource: string;
      /** The rule that refused. */
      rule: 'min' | 'max' | 'maxLimitRequestRatio';
      /** The side checked (`limits` for the ratio). */
      side: 'requests' | 'limits';
      /**
       * The job's value (cores, bytes or a count; the ratio for `maxLimitRequestRatio`);
       * `Infinity` for an unset limit, which is unbounded.
       */
      value: number;
      /** The rule's bound. */
      bound: number;
      /** A sentence naming all of it. */
      message: string;
    } {
  const problems = limitRangeProblems(policy);
  if (problems.length > 0) {
    throw new InvalidInputError(
      'limit range',
      policy,
      `Inconsistent limit range: ${problems.join('; ')}.`,
    );
  }
  for (const [resource, item] of Object.entries(policy)) {
    // undefined: an unset limit (requests are 0 when undeclared, extended counts too).
    const value = (side: 'requests' | 'limits'): number | undefined =>
      resource === 'cpus'
        ? resolved[side].cpus
        : resource === 'memory'
          ? resolved[side].memBytes
          : (resolved[side].extended?.[resource] ?? 0);
    for (const side of ['requests', 'limits'] as const) {
      const v = value(side);
      if (v === undefined) {
        // Unset is unbounded: never below a min, always above a max (as Kubernetes'
        // LimitRanger refuses a container with no limit under a max).
        if (item.max !== undefined) return refuseUnset(resource, 'max', item.max);
        continue;
      }
      if (item.min !== undefined && units(resource, v) < units(resource, item.min)) {
        return refuse(resource, 'min', side, v, item.min, 'below');
      }
      if (item.max !== undefined && units(resource, v) > units(resource, item.max)) {
        return refuse(resource, 'max', side, v, item.max, 'above');
      }
    }
    const ratio = item.maxLimitRequestRatio;
    if (ratio !== undefined) {
      const limitValue = value('limits');
      if (limitValue === undefined) return refuseUnset(resource, 'maxLimitRequestRatio', ratio);
      const request = units(resource, value('requests') ?? 0);
      const limit = units(resource, limitValue);
      if (!withinRatio(limit, request, ratio)) {
        const actual = request === 0 ? Number.POSITIVE_INFINITY : limit / request;
        return refuse(resource, 'maxLimitRequestRatio', 'limits', actual, ratio, 'above');
      }
    }
  }
  return { ok: true };
}

// An unset limit under a rule that needs one: `value` is Infinity (unbounded).
function refuseUnset(resource: string, rule: LimitRangeRule, bound: number): LimitRangeResult {
  const why =
    rule === 'max'
      ? `the limit range's max ${bound} needs a limit of at most ${bound}`
      : `so the limit/request ratio is unbounded, above the limit range's maxLimitRequestRatio ${bound}`;
  return {
    ok: false,
    resource,
    rule,
    side: 'limits',
    value: Number.POSITIVE_INFINITY,
    bound,
    message: `The ${resource} limit is unset (no limit), ${why}: declare a limit, or give the limit range a \`default\`.`,
  };
}

// limit <= ratio * request, exactly (ratio read as the decimal it prints as).
function withinRatio(limit: number, request: number, ratio: number): boolean {
  if (request === 0) return limit === 0;
  const r = decimalOfNumber(ratio);
  // limit * 10^k <= coefficient * request, with k = -exponent when negative.
  const k = r.exponent < 0 ? -r.exponent : 0;
  const right =
    r.coefficient *
    BigInt(request) *
    (r.exponent > 0 ? ceilScaled({ coefficient: 1n, exponent: r.exponent }, 0) : 1n);
  return BigInt(limit) * 10n ** BigInt(k) <= right;
}

function refuse(
  resource: string,
  rule: LimitRangeRule,
  side: 'requests' | 'limits',
  value: number,
  bound: number,
  relation: string,
): LimitRangeResult {
  const what = rule === 'maxLimitRequestRatio' ? 'limit/request ratio' : side.slice(0, -1);
  return {
    ok: false,
    resource,
    rule,
    side,
    value,
    bound,
    message: `The ${resource} ${what} ${value} is ${relation} the limit range's ${rule} ${bound}.`,
  };
}
