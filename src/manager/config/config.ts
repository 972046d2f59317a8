import { z } from 'zod';
import { strictShape } from '../../internal/zod-strict.js';
import {
  type LimitRangePolicy,
  limitRangeDefaults,
  limitRangeSchema,
} from '../../resources/limit-range.js';
import { resolveResources } from '../../resources/resolve.js';
import type { ParsedResourceRequest, ResourceCapInput } from '../../resources/schema.js';
import { resourceCapSchema, resourceRequestSchema } from '../../resources/schema.js';
import type { ResourceCap, ResourceRequest, ResourceSpec } from '../../resources/types.js';
import { applyQuantityConvention, QUANTITY_CONVENTIONS } from './convention.js';
import { scheduleProblem } from './schedules.js';

/**
 * A LimitRange-like policy as written in configuration: per resource (`cpus`,
 * `memory` or an extended resource name) `{ min?, max?, maxLimitRequestRatio?,
 * defaultRequest?, default? }`, quantities as numbers or strings.
 * @internal
 */
export type LimitRangeInput = NonNullable<ScalerConfigInput['limits']>;

/** Default resources as written in configuration. @internal */
export type ResourceDefaultsInput = NonNullable<ScalerConfigInput['defaults']>;

/** Validated default resources. @internal */
export type ResourceDefaults = NonNullable<ScalerConfig['defaults']>;

/** A warm-pool period as written in configuration. @internal */
export type WarmPoolScheduleInput = NonNullable<WarmPoolInput['schedules']>[number];

/** A validated warm-pool period. @internal */
export type WarmPoolSchedule = WarmPoolConfig['schedules'][number];

/** A warm pool as written in configuration. @internal */
export type WarmPoolInput = NonNullable<ScalerEntryInput['warmPool']>;

/** A validated warm pool. @internal */
export type WarmPoolConfig = NonNullable<ScalerEntryConfig['warmPool']>;

/** Spawn-failure backoff as written in configuration. @internal */
export type SpawnBackoffInput = NonNullable<ScalerEntryInput['spawnBackoff']>;

/** A validated spawn-failure backoff. @internal */
export type SpawnBackoffConfig = NonNullable<ScalerEntryConfig['spawnBackoff']>;

/** A label set as written in configuration. @internal */
export type LabelSetInput = ScalerEntryInput['labelSets'][number];

/** A validated label set. @internal */
export type LabelSetConfig = ScalerEntryConfig['labelSets'][number];

/** One scaler as written in configuration. */
export interface ScalerEntryInput {
  /** Unique name; also the backend entry's name and the `<prefix>scaler:<name>` label. */
  name: string;
  /** The host's backend kind (free text, e.g. `container`, `firecracker`). */
  type: string;
  /** The most agents this scaler runs at once (spawning, idle and busy). 0 spawns nothing. */
  maxAgents: number;
  /** The kinds of agent this scaler can start; the first that fits a job is used. */
  labelSets: {
    /** The labels an agent of this set has (the manager adds the automatic ones). */
    labels: string[];
    /** Resources of agents of this set (nested `{ requests, limits }` or flat `{ cpus, memory }`). */
    resources?: ResourceRequest | ResourceSpec;
    /** The machine pool agents of this set reserve in, instead of the scaler's pool(s). */
    machinePool?: string;
    /**
     * The machine pools agents of this set reserve in (1 to 8 distinct keys of
     * `machinePools`), instead of the scaler's pool(s); not with `machinePool`.
     * See {@link ScalerEntryInput.machinePools}.
     */
    machinePools?: string[];
  }[];
  /** Labels a job must name to run here (a taint): keeps special agents for jobs that ask. @default [] */
  mandatoryLabels?: string[];
  /** A machine pool (a key of `machinePools`) shared with other processes through the ledger. */
  machinePool?: string;
  /**
   * Several machine pools (1 to 8 distinct keys of `machinePools`) every agent
   * of this scaler reserves in, all or nothing, in name order; not with
   * `machinePool`. With two or more, each pool's row holds the part of the
   * request that pool caps (CPU when it has `maxCpu`, memory when it has
   * `maxMemoryBytes`, each extended resource it caps or provides), and CPU,
   * memory and every extended resource the scaler's agents can request must be
   * capped by one of them (checked here). A label set may name its own.
   */
  machinePools?: string[];
  /** A cap on the summed requests of this scaler's agents. */
  resourceCap?: ResourceCapInput;
  /**
   * A LimitRange-like policy for this scaler's jobs: its defaults fill what no
   * job, label set or scaler default declares; a job outside it answers `never-fits`.
   */
  limits?: Record<
    string,
    {
      /** Request and limit must be at least this. */
      min?: number | string;
      /** Request and limit must be at most this. */
      max?: number | string;
      /** The limit may be at most this many times the request (>= 1). */
      maxLimitRequestRatio?: number;
      /** The request when no layer declares one. */
      defaultRequest?: number | string;
      /** The limit when no layer declares one. */
      default?: number | string;
    }
  >;
  /** Resources for label sets that declare none. */
  defaults?: {
    /** Resources (nested `{ requests, limits }` or flat `{ cpus, memory }`). */
    resources?: ResourceRequest | ResourceSpec;
  };
  /** Keep idle agents ready. */
  warmPool?: {
    /** How many idle agents to keep ready (busy agents do not count), outside every schedule. */
    size: number;
    /**
     * Periods with another size. When several are active, the one whose current
     * run started latest wins. @default []
     */
    schedules?: {
      /**
       * A five-field cron pattern; the period is active during every minute it
       * matches (`* 8-17 * * mon-fri`: working hours).
       */
      cron: string;
      /** The IANA time zone the pattern is read in. @default 'UTC' */
      timezone?: string;
      /** The warm pool size while this period is active. */
      size: number;
    }[];
    /** An idle agent older than this is destroyed. @default 300 */
    idleTimeoutSeconds?: number;
    /** Index of the label set warm agents are started with. @default 0 */
    labelSet?: number;
  };
  /** Agents idle longer than this are destroyed, except those the warm pool's target keeps. Without it, the warm pool's `idleTimeoutSeconds` applies (to scalers with a warm pool). */
  idleTimeoutSeconds?: number;
  /** An agent that completed this many jobs is destroyed (1 = ephemeral agents). */
  maxJobsPerAgent?: number;
  /** An agent older than this (since its spawn) is drained: destroyed now when idle, after its job when busy. */
  maxAgentLifetimeSeconds?: number;
  /** At most this many agents of this scaler spawning (not yet registered) at once. */
  maxConcurrentSpawns?: number;
  /** At most this many spawns of this scaler started in any 60 seconds. */
  maxSpawnsPerMinute?: number;
  /** Back off after consecutive spawn failures. @default `{ failureThreshold: 3, initialMs: 1000, maxMs: 300000 }` */
  spawnBackoff?: {
    /** Consecutive failures (spawn rejected, or the agent never registered) that open the backoff. @default 3 */
    failureThreshold?: number;
    /** The first backoff's upper bound; each further failure doubles it (full jitter). @default 1000 */
    initialMs?: number;
    /** The largest upper bound. @default 300000 */
    maxMs?: number;
  };
  /** Backend-specific settings, passed through untouched (see `getScalerContextForAgent`). */
  options?: Record<string, unknown>;
}

/** One validated scaler. @internal */
export type ScalerEntryConfig = ScalerConfig['scalers'][number];

/** A scaler configuration as written (quantities as strings or numbers). */
export interface ScalerConfigInput {
  /** The most agents the whole orchestrator runs at once. */
  globalMaxAgents: number;
  /**
   * How CPU and memory quantity strings in this config and in each job's
   * `resources` read: `binary` (`"1.5G"` and `"1.5Gi"` are 1.5 GiB; `"2g"` is
   * 2 GiB, as in Docker, systemd and kici) or `kubernetes` (exactly as
   * Kubernetes reads them: `"1.5G"` is 1,500,000,000 bytes, `"1.5Gi"` 1.5 GiB).
   * Numbers are cores and bytes in either.
   * @default 'binary'
   */
  quantityConvention?: 'binary' | 'kubernetes';
  /** The reserved prefix of automatic labels; user labels may not start with it. @default 'scaler-primitives:' (kici's is `kici:`) */
  autoLabelPrefix?: string;
  /** Resources for jobs, label sets and scalers that declare none. */
  defaults?: {
    /** Resources (nested `{ requests, limits }` or flat `{ cpus, memory }`). */
    resources?: ResourceRequest | ResourceSpec;
  };
  /** A cap on the summed requests of every agent of this orchestrator. */
  resourceCap?: ResourceCapInput;
  /** A LimitRange-like policy for every job, checked after the scaler's own. */
  limits?: Record<
    string,
    {
      /** Request and limit must be at least this. */
      min?: number | string;
      /** Request and limit must be at most this. */
      max?: number | string;
      /** The limit may be at most this many times the request (>= 1). */
      maxLimitRequestRatio?: number;
      /** The request when no layer declares one. */
      defaultRequest?: number | string;
      /** The limit when no layer declares one. */
      default?: number | string;
    }
  >;
  /** Machine pools by name, each with its cap, shared with other processes through the ledger. @default {} */
  machinePools?: Record<string, ResourceCapInput>;
  /** The scalers, in the order they are tried. */
  scalers: ScalerEntryInput[];
}

/** A validated scaler configuration: quantities as numbers, defaults filled in. */
export interface ScalerConfig {
  /** The most agents the whole orchestrator runs at once. */
  globalMaxAgents: number;
  /** How quantity strings read (absent: `binary`); jobs' `resources` read the same way. */
  quantityConvention?: 'binary' | 'kubernetes';
  /** The reserved prefix of automatic labels. */
  autoLabelPrefix: string;
  /** Default resources, parsed. */
  defaults?: {
    /** Resources, parsed to numbers (cores, bytes). */
    resources?: ParsedResourceRequest;
  };
  /** The orchestrator-wide cap. */
  resourceCap?: ResourceCap;
  /** The orchestrator-wide LimitRange-like policy, parsed. */
  limits?: LimitRangePolicy;
  /** Machine pools by name. */
  machinePools: Record<string, ResourceCap>;
  /** The scalers, in the order they are tried. */
  scalers: {
    /** Unique name. */
    name: string;
    /** The host's backend kind. */
    type: string;
    /** The most agents this scaler runs at once. */
    maxAgents: number;
    /** The label sets, in order. */
    labelSets: {
      /** The labels an agent of this set has (without automatic labels). */
      labels: string[];
      /** Resources, parsed to numbers (cores, bytes). */
      resources?: ParsedResourceRequest;
      /** The machine pool of this set's agents, when the set names one. */
      machinePool?: string;
      /** The machine pools of this set's agents, when the set names several. */
      machinePools?: string[];
    }[];
    /** Labels a job must name to run here. */
    mandatoryLabels: string[];
    /** The machine pool, if any. */
    machinePool?: string;
    /** The machine pools, when the scaler names several (as given). */
    machinePools?: string[];
    /** The scaler's cap, in cores and bytes. */
    resourceCap?: ResourceCap;
    /** The scaler's LimitRange-like policy, parsed. */
    limits?: LimitRangePolicy;
    /** Default resources, parsed. */
    defaults?: {
      /** Resources, parsed to numbers (cores, bytes). */
      resources?: ParsedResourceRequest;
    };
    /** The warm pool, with defaults filled in. */
    warmPool?: {
      /** How many idle agents to keep ready (busy agents do not count), outside every schedule. */
      size: number;
      /** Periods with another size. */
      schedules: {
        /** The cron pattern. */
        cron: string;
        /** The IANA time zone. */
        timezone: string;
        /** The size while active. */
        size: number;
      }[];
      /** An idle agent older than this is destroyed. */
      idleTimeoutSeconds: number;
      /** Index of the label set warm agents are started with. */
      labelSet: number;
    };
    /** Idle timeout for every agent of this scaler, in seconds. */
    idleTimeoutSeconds?: number;
    /** Jobs an agent runs before it is destroyed. */
    maxJobsPerAgent?: number;
    /** An agent's lifetime before it is drained, in seconds. */
    maxAgentLifetimeSeconds?: number;
    /** Spawns in flight (not yet registered) at once. */
    maxConcurrentSpawns?: number;
    /** Spawns started in any 60 seconds. */
    maxSpawnsPerMinute?: number;
    /** The spawn-failure backoff (defaults filled in when given). */
    spawnBackoff?: {
      /** Consecutive failures that open the backoff. */
      failureThreshold: number;
      /** The first backoff's upper bound. */
      initialMs: number;
      /** The largest upper bound. */
      maxMs: number;
    };
    /** Backend-specific settings. */
    options?: Record<string, unknown>;
  }[];
}

/**
 * The automatic-label prefix used when the config does not set `autoLabelPrefix`
 * (`scaler-primitives:scaler:<name>`). `scaler-primitives/kici` sets `kici:` instead.
 * @internal
 */
export const DEFAULT_AUTO_LABEL_PREFIX = 'scaler-primitives:';

/** The most machine pools one scaler or label set may name. */
const MAX_POOLS = 8;

const NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$/;
/** @internal */
export const nameSchema = z
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

// 1 to MAX_POOLS distinct pool names.
const poolListSchema = z
  .array(nameSchema)
  .min(1, 'Expected at least one machine pool')
  .max(MAX_POOLS, `Expected at most ${MAX_POOLS} machine pools`)
  .superRefine((names, ctx) => {
    const twice = names.find((name, i) => names.indexOf(name) !== i);
    if (twice !== undefined) {
      ctx.addIssue({
        code: 'custom',
        message: `Machine pool "${twice}" is listed twice; list each pool once`,
      });
    }
  });

/** @internal */
export const labelSetSchema = strictShape({
  labels: z.array(labelSchema),
  resources: resourceRequestSchema.optional(),
  machinePool: nameSchema.optional(),
  machinePools: poolListSchema.optional(),
});

const scheduleSchema = strictShape({
  cron: z.string().min(1).max(200),
  timezone: z.string().min(1).max(64).default('UTC'),
  size: z.int().min(0),
});

const warmPoolSchema = strictShape({
  size: z.int().min(0),
  schedules: z.array(scheduleSchema).max(32).default([]),
  idleTimeoutSeconds: z.number().positive().default(300),
  labelSet: z.int().min(0).default(0),
});

const spawnBackoffSchema = strictShape({
  failureThreshold: z.int().min(1).max(1000).default(3),
  initialMs: z.int().min(1).max(86_400_000).default(1000),
  maxMs: z.int().min(1).max(86_400_000).default(300_000),
});

/** @internal */
export const scalerSchema = strictShape({
  name: nameSchema,
  type: z.string().min(1, 'Expected the backend kind, e.g. "container"'),
  maxAgents: z.int().min(0),
  labelSets: z.array(labelSetSchema).min(1, 'Expected at least one label set'),
  mandatoryLabels: z.array(labelSchema).default([]),
  machinePool: nameSchema.optional(),
  machinePools: poolListSchema.optional(),
  resourceCap: resourceCapSchema.optional(),
  limits: limitsSchema.optional(),
  defaults: strictShape({ resources: resourceRequestSchema.optional() }).optional(),
  warmPool: warmPoolSchema.optional(),
  idleTimeoutSeconds: z.number().positive().optional(),
  maxJobsPerAgent: z.int().min(1).optional(),
  maxAgentLifetimeSeconds: z.number().positive().optional(),
  maxConcurrentSpawns: z.int().min(1).optional(),
  maxSpawnsPerMinute: z.int().min(1).optional(),
  spawnBackoff: spawnBackoffSchema.optional(),
  options: z.record(z.string(), z.unknown()).optional(),
});

/** @internal */
export const baseSchema = strictShape({
  globalMaxAgents: z.int().min(0),
  autoLabelPrefix: z
    .string()
    .min(1)
    .regex(/^[^\s,]+$/, 'Expected a prefix without whitespace or commas')
    .default(DEFAULT_AUTO_LABEL_PREFIX),
  defaults: strictShape({ resources: resourceRequestSchema.optional() }).optional(),
  resourceCap: resourceCapSchema.optional(),
  limits: limitsSchema.optional(),
  machinePools: z.record(nameSchema, resourceCapSchema).default({}),
  scalers: z.array(scalerSchema),
  quantityConvention: z.enum(QUANTITY_CONVENTIONS).optional(),
});

/**
 * The zod schema of a {@link ScalerConfig}. Quantities (`"500m"`, `"8Gi"`) parse to
 * numbers; unknown keys are refused (put backend-specific settings in a scaler's
 * `options`); cross-field rules (unique names, known pools, reserved label prefix,
 * mandatory labels present in every label set, warm pool within `maxAgents`, label-set
 * resources that resolve without a request above its limit) are reported with their paths.
 */
export const scalerConfigSchema: z.ZodType<ScalerConfig, ScalerConfigInput> = z.preprocess(
  applyQuantityConvention,
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
      checkPools(config, scaler, ['scalers', i], ctx);
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
        if (set.machinePool !== undefined || set.machinePools !== undefined) {
          checkPools(config, set, ['scalers', i, 'labelSets', j], ctx);
        }
        checkCoverage(config, scaler, set, ['scalers', i, 'labelSets', j], ctx);
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
  }),
) as unknown as z.ZodType<ScalerConfig, ScalerConfigInput>;

type PoolChoice = Pick<ScalerEntryConfig, 'machinePool' | 'machinePools'>;
type RefineContext = {
  addIssue(issue: { code: 'custom'; path: PropertyKey[]; message: string }): void;
};

/**
 * The machine pools an agent of this scaler and label set reserves in, sorted
 * by name (code-unit order): the label set's own, else the scaler's; empty when none.
 * @internal
 */
export function poolsOf(scaler: PoolChoice, labelSet: PoolChoice | undefined): string[] {
  const own =
    labelSet?.machinePools ??
    (labelSet?.machinePool === undefined ? undefined : [labelSet.machinePool]);
  const list =
    own ?? scaler.machinePools ?? (scaler.machinePool === undefined ? [] : [scaler.machinePool]);
  return [...list].sort(byCodeUnits);
}

/** Code-unit order (what `Array.prototype.sort` does without a comparator), as a comparator. @internal */
export function byCodeUnits(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

// One entry's pool choice: not both forms, known pools, no resource's device ids in two pools.
function checkPools(
  config: Pick<ScalerConfig, 'machinePools'>,
  entry: PoolChoice,
  at: Array<string | number>,
  ctx: RefineContext,
): void {
  if (entry.machinePool !== undefined && entry.machinePools !== undefined) {
    ctx.addIssue({
      code: 'custom',
      path: [...at, 'machinePools'],
      message:
        'Give either machinePool (one pool) or machinePools (a list), not both; machinePools: ["a"] is the same as machinePool: "a"',
    });
  }
  const known = Object.keys(config.machinePools);
  const named =
    entry.machinePools !== undefined
      ? entry.machinePools.map((pool, k) => ({ pool, path: [...at, 'machinePools', k] }))
      : entry.machinePool !== undefined
        ? [{ pool: entry.machinePool, path: [...at, 'machinePool'] }]
        : [];
  for (const { pool, path } of named) {
    if (!(pool in config.machinePools)) {
      ctx.addIssue({
        code: 'custom',
        path,
        message: `Unknown machine pool "${pool}"; declare it under machinePools (known: ${known.length ? known.join(', ') : 'none'})`,
      });
    }
  }
  const listing = new Map<string, string>();
  for (const pool of entry.machinePools ?? []) {
    for (const resource of Object.keys(config.machinePools[pool]?.devices ?? {})) {
      const first = listing.get(resource);
      if (first !== undefined) {
        ctx.addIssue({
          code: 'custom',
          path: [...at, 'machinePools'],
          message: `Machine pools "${first}" and "${pool}" both list device ids for ${resource}; an agent's devices of one resource must come from one pool`,
        });
      } else listing.set(resource, pool);
    }
  }
}

// With several pools, CPU, memory and every extended resource the label set's
// agents can request must be capped by one of them (a resource none caps could
// never be counted anywhere).
function checkCoverage(
  config: ScalerConfig,
  scaler: ScalerEntryConfig,
  set: LabelSetConfig,
  at: Array<string | number>,
  ctx: RefineContext,
): void {
  const pools = poolsOf(scaler, set);
  if (pools.length < 2 || new Set(pools).size !== pools.length) return;
  if (pools.some((pool) => !(pool in config.machinePools))) return;
  const own = set.machinePool !== undefined || set.machinePools !== undefined;
  const path = own ? [...at, 'machinePools'] : [at[0]!, at[1]!, 'machinePools'];
  const whose = own ? 'this label set' : `label set ${String(at[3])}`;
  const caps = pools.map((pool) => config.machinePools[pool]!);
  const list = pools.map((pool) => `"${pool}"`).join(', ');
  // The scaler's own pools are checked for CPU and memory once, with its first label set.
  const basic = own || at[3] === 0;
  const holder = own ? 'this label set' : 'this scaler';
  if (basic && !caps.some((cap) => cap.maxCpu !== undefined)) {
    ctx.addIssue({
      code: 'custom',
      path,
      message: `None of the machine pools ${list} of ${holder} caps CPU (maxCpu); with several pools, one of them must`,
    });
  }
  if (basic && !caps.some((cap) => cap.maxMemoryBytes !== undefined)) {
    ctx.addIssue({
      code: 'custom',
      path,
      message: `None of the machine pools ${list} of ${holder} caps memory (maxMemory); with several pools, one of them must`,
    });
  }
  const names = new Set<string>();
  for (const name of Object.keys(scaler.resourceCap?.maxExtended ?? {})) names.add(name);
  for (const name of scaler.resourceCap?.provides ?? []) names.add(name);
  try {
    const resolved = resolveResources(resourceLayers(config, scaler, set.resources, undefined), [
      'job',
      'labelSet',
      'scaler',
      'scaler limits',
      'global',
      'global limits',
    ]);
    for (const [name, count] of Object.entries(resolved.requests.extended ?? {})) {
      if (count > 0) names.add(name);
    }
  } catch {
    // Reported with the label set's resources.
  }
  for (const name of [...names].sort(byCodeUnits)) {
    const covered = caps.some(
      (cap) => cap.maxExtended?.[name] !== undefined || (cap.provides ?? []).includes(name),
    );
    if (!covered) {
      ctx.addIssue({
        code: 'custom',
        path,
        message: `Agents of ${whose} can request ${name}, but none of its machine pools ${list} caps or provides it; add it to one pool's maxExtended or provides`,
      });
    }
  }
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
