import { z } from 'zod';
import type { ConfigIssue } from '../errors/input.js';
import { ConfigError } from '../errors.js';
import {
  type LimitRangePolicy,
  limitRangeDefaults,
  limitRangeSchema,
} from '../resources/limit-range.js';
import { resolveResources } from '../resources/resolve.js';
import { resourceCapSchema, resourceRequestSchema } from '../resources/schema.js';
import type { ResourceRequest } from '../resources/types.js';
import type {
  LimitRangeInput,
  ScalerConfig,
  ScalerConfigInput,
  ScalerEntryConfig,
} from './config-types.js';
import { scheduleProblem } from './schedules.js';

export type {
  LabelSetConfig,
  LabelSetInput,
  LimitRangeInput,
  ResourceDefaults,
  ResourceDefaultsInput,
  ScalerConfig,
  ScalerConfigInput,
  ScalerEntryConfig,
  ScalerEntryInput,
  SpawnBackoffConfig,
  SpawnBackoffInput,
  WarmPoolConfig,
  WarmPoolInput,
  WarmPoolSchedule,
  WarmPoolScheduleInput,
} from './config-types.js';

/**
 * The automatic-label prefix used when the config does not set `autoLabelPrefix`: the
 * package's name, a namespace no user label is likely to use
 * (`scaler-primitives:scaler:<name>`). `scaler-primitives/kici`'s `toScalerConfig` sets
 * kici's `kici:` instead.
 *
 * @example
 * ```ts
 * import { DEFAULT_AUTO_LABEL_PREFIX, parseScalerConfig } from 'scaler-primitives/manager';
 * const config = parseScalerConfig({ globalMaxAgents: 4, scalers: [] });
 * config.autoLabelPrefix === DEFAULT_AUTO_LABEL_PREFIX; // true: 'scaler-primitives:'
 * ```
 */
export const DEFAULT_AUTO_LABEL_PREFIX = 'scaler-primitives:';

const NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$/;
const nameSchema = z
  .string()
  .regex(
    NAME,
    'Expected a name of 1-63 characters: letters, digits, ".", "_" and "-", starting with a letter or digit',
  );

const labelSchema = z
  .string()
  .min(1, 'Expected a non-empty label')
  .max(253, 'Expected a label of at most 253 characters')
  .regex(/^[^\s,]+$/, 'Expected a label without whitespace or commas');

// The policy parses to LimitRangePolicy; its input is the documented LimitRangeInput.
const limitsSchema = limitRangeSchema() as unknown as z.ZodType<LimitRangePolicy, LimitRangeInput>;

const labelSetSchema = z.strictObject({
  labels: z.array(labelSchema),
  resources: resourceRequestSchema.optional(),
});

const scheduleSchema = z.strictObject({
  cron: z.string().min(1).max(200),
  timezone: z.string().min(1).max(64).default('UTC'),
  size: z.int().min(0),
});

const warmPoolSchema = z.strictObject({
  size: z.int().min(0),
  schedules: z.array(scheduleSchema).max(32).default([]),
  idleTimeoutSeconds: z.number().positive().default(300),
  labelSet: z.int().min(0).default(0),
});

const spawnBackoffSchema = z.strictObject({
  failureThreshold: z.int().min(1).max(1000).default(3),
  initialMs: z.int().min(1).max(86_400_000).default(1000),
  maxMs: z.int().min(1).max(86_400_000).default(300_000),
});

const scalerSchema = z.strictObject({
  name: nameSchema,
  type: z.string().min(1, 'Expected the backend kind, e.g. "container"'),
  maxAgents: z.int().min(0),
  labelSets: z.array(labelSetSchema).min(1, 'Expected at least one label set'),
  mandatoryLabels: z.array(labelSchema).default([]),
  machinePool: nameSchema.optional(),
  resourceCap: resourceCapSchema.optional(),
  limits: limitsSchema.optional(),
  defaults: z.strictObject({ resources: resourceRequestSchema.optional() }).optional(),
  warmPool: warmPoolSchema.optional(),
  idleTimeoutSeconds: z.number().positive().optional(),
  maxJobsPerAgent: z.int().min(1).optional(),
  maxAgentLifetimeSeconds: z.number().positive().optional(),
  maxConcurrentSpawns: z.int().min(1).optional(),
  maxSpawnsPerMinute: z.int().min(1).optional(),
  spawnBackoff: spawnBackoffSchema.optional(),
  options: z.record(z.string(), z.unknown()).optional(),
});

const baseSchema = z.strictObject({
  globalMaxAgents: z.int().min(0),
  autoLabelPrefix: z
    .string()
    .min(1)
    .regex(/^[^\s,]+$/, 'Expected a prefix without whitespace or commas')
    .default(DEFAULT_AUTO_LABEL_PREFIX),
  defaults: z.strictObject({ resources: resourceRequestSchema.optional() }).optional(),
  resourceCap: resourceCapSchema.optional(),
  limits: limitsSchema.optional(),
  machinePools: z.record(nameSchema, resourceCapSchema).default({}),
  scalers: z.array(scalerSchema),
});

/**
 * The zod schema of a {@link ScalerConfig}. Quantities (`"500m"`, `"8Gi"`) parse to
 * numbers; unknown keys are refused (put backend-specific settings in a scaler's
 * `options`); cross-field rules (unique names, known pools, reserved label prefix,
 * mandatory labels present in every label set, warm pool within `maxAgents`, label-set
 * resources that resolve without a request above its limit) are reported with their paths.
 *
 * @example
 * ```ts
 * import { scalerConfigSchema } from 'scaler-primitives/manager';
 * declare const text: string;
 * const result = scalerConfigSchema.safeParse(JSON.parse(text));
 * if (!result.success) console.error(result.error.issues.map((i) => i.message));
 * ```
 */
export const scalerConfigSchema: z.ZodType<ScalerConfig, ScalerConfigInput> =
  baseSchema.superRefine((config, ctx) => {
    const prefix = config.autoLabelPrefix;
    const seen = new Map<string, number>();
    for (const [i, scaler] of config.scalers.entries()) {
      const first = seen.get(scaler.name);
      if (first !== undefined) {
        ctx.addIssue({
          code: 'custom',
          path: ['scalers', i, 'name'],
          message: `Scaler name "${scaler.name}" is already used by scalers[${first}]`,
        });
      } else {
        seen.set(scaler.name, i);
      }
      if (scaler.machinePool !== undefined && !(scaler.machinePool in config.machinePools)) {
        const known = Object.keys(config.machinePools);
        ctx.addIssue({
          code: 'custom',
          path: ['scalers', i, 'machinePool'],
          message: `Unknown machine pool "${scaler.machinePool}"; declare it under machinePools (known: ${known.length ? known.join(', ') : 'none'})`,
        });
      }
      for (const [j, label] of scaler.mandatoryLabels.entries()) {
        if (label.startsWith(prefix)) {
          ctx.addIssue({
            code: 'custom',
            path: ['scalers', i, 'mandatoryLabels', j],
            message: `Label "${label}" uses the reserved prefix "${prefix}" of automatic labels`,
          });
        }
      }
      for (const [j, set] of scaler.labelSets.entries()) {
        for (const [k, label] of set.labels.entries()) {
          if (label.startsWith(prefix)) {
            ctx.addIssue({
              code: 'custom',
              path: ['scalers', i, 'labelSets', j, 'labels', k],
              message: `Label "${label}" uses the reserved prefix "${prefix}" of automatic labels; the manager adds "${prefix}scaler:${scaler.name}" itself`,
            });
          }
        }
        try {
          // A label set whose layers disagree (a request above a limit) could never spawn.
          resolveResources(resourceLayers(config, scaler, set.resources, undefined), [
            'job',
            'labelSet',
            'scaler',
            'scaler limits',
            'global',
            'global limits',
          ]);
        } catch (error) {
          ctx.addIssue({
            code: 'custom',
            path: ['scalers', i, 'labelSets', j, 'resources'],
            message: (error as Error).message,
          });
        }
        const missing = scaler.mandatoryLabels.filter((m) => !set.labels.includes(m));
        if (missing.length > 0) {
          ctx.addIssue({
            code: 'custom',
            path: ['scalers', i, 'labelSets', j, 'labels'],
            message: `Label set lacks mandatory label(s) ${missing.map((m) => `"${m}"`).join(', ')}: a job must name them, so no job could ever match this set`,
          });
        }
      }
      if (scaler.warmPool !== undefined) {
        if (scaler.warmPool.size > scaler.maxAgents) {
          ctx.addIssue({
            code: 'custom',
            path: ['scalers', i, 'warmPool', 'size'],
            message: `Warm pool size ${scaler.warmPool.size} exceeds maxAgents ${scaler.maxAgents}`,
          });
        }
        for (const [j, schedule] of scaler.warmPool.schedules.entries()) {
          const problem = scheduleProblem(schedule);
          if (problem !== undefined) {
            ctx.addIssue({
              code: 'custom',
              path: ['scalers', i, 'warmPool', 'schedules', j],
              message: problem,
            });
          }
          if (schedule.size > scaler.maxAgents) {
            ctx.addIssue({
              code: 'custom',
              path: ['scalers', i, 'warmPool', 'schedules', j, 'size'],
              message: `Scheduled warm pool size ${schedule.size} exceeds maxAgents ${scaler.maxAgents}`,
            });
          }
        }
        if (scaler.warmPool.labelSet >= scaler.labelSets.length) {
          ctx.addIssue({
            code: 'custom',
            path: ['scalers', i, 'warmPool', 'labelSet'],
            message: `Warm pool label set index ${scaler.warmPool.labelSet} is out of range (the scaler has ${scaler.labelSets.length})`,
          });
        }
      }
    }
  });

/**
 * The answer to {@link validateScalerConfig}.
 *
 * @example
 * ```ts
 * import { type ConfigValidation, formatConfigPath, validateScalerConfig } from 'scaler-primitives/manager';
 * declare const text: string;
 * const result: ConfigValidation = validateScalerConfig(JSON.parse(text));
 * if (result.ok) console.log(`${result.config.scalers.length} scalers`);
 * else for (const e of result.errors) console.error(`${formatConfigPath(e.path)}: ${e.message}`);
 * ```
 */
export type ConfigValidation =
  | {
      /** Valid. */
      ok: true;
      /** The parsed config. */
      config: ScalerConfig;
    }
  | {
      /** Invalid. */
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
  if (result.success) return { ok: true, config: result.data };
  return {
    ok: false,
    errors: result.error.issues.map((issue) => ({
      path: issue.path.filter((p): p is string | number => typeof p !== 'symbol'),
      message: issue.message,
    })),
  };
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
 * Render a path as `scalers[0].labelSets[1].labels`.
 *
 * @example
 * ```ts
 * import { formatConfigPath } from 'scaler-primitives/manager';
 * formatConfigPath(['scalers', 0, 'labelSets', 1, 'labels']); // 'scalers[0].labelSets[1].labels'
 * formatConfigPath([]); // '(root)'
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

/**
 * The layers a job's resources resolve through, most specific first: the job,
 * the label set, the scaler's defaults, the scaler's limit-range defaults, the
 * global defaults, the global limit-range defaults.
 * @internal
 */
export function resourceLayers(
  config: Pick<ScalerConfig, 'defaults' | 'limits'>,
  scaler: Pick<ScalerEntryConfig, 'defaults' | 'limits'>,
  labelSet: ResourceRequest | undefined,
  job: ResourceRequest | undefined,
): Array<ResourceRequest | undefined> {
  return [
    job,
    labelSet,
    scaler.defaults?.resources,
    scaler.limits === undefined ? undefined : limitRangeDefaults(scaler.limits),
    config.defaults?.resources,
    config.limits === undefined ? undefined : limitRangeDefaults(config.limits),
  ];
}
