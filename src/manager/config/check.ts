/**
 * Checking a scaler configuration and reporting every problem of it in one
 * pass: the schema's issues and the cross-field rules, the rules run on the
 * parts that parsed (zod runs them only on a config that parsed whole).
 */
import type { z } from 'zod';
import { ConfigError } from '../../errors/index.js';
import type { ConfigIssue } from '../../errors/input.js';
import { resourceCapSchema } from '../../resources/schema.js';
import {
  baseSchema,
  labelSetSchema,
  nameSchema,
  type ScalerConfig,
  scalerConfigSchema,
  scalerSchema,
} from './config.js';
import { applyQuantityConvention } from './convention.js';

/**
 * The answer of {@link validateScalerConfig} and of `ScalerManager.reload`:
 * the parsed config, or every problem with its path (`reload` then changed nothing).
 */
export type ConfigValidation =
  | {
      /** Valid (and, for `reload`, applied). */
      ok: true;
      /** The parsed config. */
      config: ScalerConfig;
      /** No problem. */
      errors: [];
    }
  | {
      /** Invalid: nothing was applied. */
      ok: false;
      /** Every problem, each with its path. */
      errors: ConfigIssue[];
    };

/**
 * Validate a scaler configuration without throwing.
 *
 * @param value - The configuration, e.g. parsed from JSON.
 * @returns The parsed config, or every problem with its path.
 *
 * @example
 * ```ts
 * import { validateScalerConfig } from 'scaler-primitives/manager';
 * declare const text: string;
 * const result = validateScalerConfig(JSON.parse(text));
 * if (!result.ok) for (const e of result.errors) console.error(`${e.path.join('.')}: ${e.message}`);
 * ```
 */
export function validateScalerConfig(value: unknown): ConfigValidation {
  const result = scalerConfigSchema.safeParse(value);
  if (result.success) return { ok: true, config: result.data, errors: [] };
  const errors = result.error.issues.map(configIssue);
  // zod runs the cross-field rules only on a config that parsed: run them on the parts
  // that did, so that one pass reports every problem.
  const seen = new Set(errors.map((e) => JSON.stringify([e.path, e.message])));
  for (const issue of crossFieldIssues(applyQuantityConvention(value))) {
    if (!seen.has(JSON.stringify([issue.path, issue.message]))) errors.push(issue);
  }
  return { ok: false, errors };
}

function configIssue(issue: z.core.$ZodIssue): ConfigIssue {
  return {
    path: issue.path.filter((p): p is string | number => typeof p !== 'symbol'),
    message: issue.message,
  };
}

// A prefix no label can start with (labels have at most 253 characters).
const NO_LABEL_PREFIX = 'x'.repeat(254);

type Doc = Record<string, unknown>;

function isDoc(value: unknown): value is Doc {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/**
 * The cross-field issues of the parts of `value` that parse. A part that fails is left
 * out when optional, or replaced by a value no rule objects to when required (a unique
 * name, `maxAgents` without bound, no mandatory labels where a label list failed), and
 * the resource rule is skipped when any resource layer failed: only issues the parts
 * that parsed really have are reported.
 */
function crossFieldIssues(value: unknown): ConfigIssue[] {
  if (!isDoc(value)) return [];
  let resourcesFailed = false;
  const parses = (schema: z.ZodType, part: unknown) => schema.safeParse(part).success;
  const out: Doc = { globalMaxAgents: 0 };
  for (const [key, schema] of Object.entries(baseSchema.shape)) {
    if (key === 'scalers' || value[key] === undefined) continue;
    if (parses(schema, value[key])) out[key] = value[key];
    else if (key === 'autoLabelPrefix') out[key] = NO_LABEL_PREFIX;
    else if (key === 'defaults' || key === 'limits') resourcesFailed = true;
  }
  const pools = value.machinePools;
  // Pools whose cap failed still exist for the rule on scalers' pools.
  const poolsKnown = pools === undefined || isDoc(pools);
  if (isDoc(pools) && out.machinePools === undefined) {
    out.machinePools = Object.fromEntries(
      Object.keys(pools)
        .filter((name) => parses(nameSchema, name))
        .map((name) => [name, parses(resourceCapSchema, pools[name]) ? pools[name] : {}]),
    );
  }
  const scalers = Array.isArray(value.scalers) ? value.scalers : [];
  const names = new Set(scalers.map((s) => (isDoc(s) ? s.name : undefined)));
  out.scalers = scalers.map((raw, i) => {
    const scaler = isDoc(raw) ? raw : {};
    const part: Doc = {};
    let labelsFailed = false;
    for (const [key, schema] of Object.entries(scalerSchema.shape)) {
      if (key === 'labelSets' || scaler[key] === undefined) continue;
      if (parses(schema, scaler[key])) part[key] = scaler[key];
      else if (key === 'mandatoryLabels') labelsFailed = true;
      else if (key === 'defaults' || key === 'limits') resourcesFailed = true;
    }
    const sets = Array.isArray(scaler.labelSets) ? scaler.labelSets : [];
    part.labelSets = sets.map((rawSet) => {
      const set = isDoc(rawSet) ? rawSet : {};
      const kept: Doc = { labels: [] };
      for (const [key, schema] of Object.entries(labelSetSchema.shape)) {
        if (set[key] === undefined) continue;
        if (parses(schema, set[key])) kept[key] = set[key];
        else if (key === 'labels') labelsFailed = true;
        else if (key === 'resources') resourcesFailed = true;
      }
      return kept;
    });
    if (sets.length === 0) part.labelSets = [{ labels: [] }];
    if (labelsFailed) part.mandatoryLabels = [];
    if (part.name === undefined) {
      let name = `unnamed-${i}`;
      while (names.has(name)) name = `${name}-${i}`;
      part.name = name;
    }
    part.type ??= 'unknown';
    part.maxAgents ??= Number.MAX_SAFE_INTEGER;
    if (!poolsKnown) delete part.machinePool;
    return part;
  });
  if (resourcesFailed) {
    delete out.defaults;
    delete out.limits;
    for (const scaler of out.scalers as Doc[]) {
      delete scaler.defaults;
      delete scaler.limits;
      for (const set of scaler.labelSets as Doc[]) delete set.resources;
    }
  }
  const result = scalerConfigSchema.safeParse(out);
  return result.success
    ? []
    : result.error.issues.filter((issue) => issue.code === 'custom').map(configIssue);
}

/**
 * Parse a scaler configuration.
 *
 * @param value - The configuration, e.g. parsed from JSON.
 * @returns The validated config (quantities as numbers, defaults filled in).
 * @throws {@link ConfigError} listing every problem with its path.
 *
 * @example
 * ```ts
 * import { parseScalerConfig } from 'scaler-primitives/manager';
 * const config = parseScalerConfig({
 *   globalMaxAgents: 10,
 *   scalers: [{ name: 'linux', type: 'container', maxAgents: 4, labelSets: [{ labels: ['linux'] }] }],
 * }); // throws ConfigError listing every problem
 * ```
 */
export function parseScalerConfig(value: unknown): ScalerConfig {
  const result = validateScalerConfig(value);
  if (result.ok) return result.config;
  throw configError(result.errors);
}

/**
 * Render a config path (a `ConfigIssue.path`) as `scalers[0].labelSets[1].labels`,
 * as `ConfigError` messages do; `(root)` for the empty path.
 *
 * @param path - The path, e.g. from `validateScalerConfig(...).errors`.
 *
 * @example
 * ```ts
 * import { formatConfigPath, validateScalerConfig } from 'scaler-primitives/manager';
 * declare const text: string;
 * const result = validateScalerConfig(JSON.parse(text));
 * if (!result.ok) for (const e of result.errors) console.error(`${formatConfigPath(e.path)}: ${e.message}`);
 * ```
 */
export function formatConfigPath(path: ReadonlyArray<string | number>): string {
  let out = '';
  for (const part of path) {
    out += typeof part === 'number' ? `[${part}]` : out === '' ? part : `.${part}`;
  }
  return out === '' ? '(root)' : out;
}

/** @internal */
export function configError(errors: ConfigIssue[]): ConfigError {
  const lines = errors.map((e) => `  ${formatConfigPath(e.path)}: ${e.message}`);
  return new ConfigError(
    errors,
    `Invalid scaler config (${errors.length} problem${errors.length === 1 ? '' : 's'}):\n${lines.join('\n')}`,
  );
}
