import type { LimitRangePolicy } from '../resources/limit-range.js';
import type { ParsedResourceRequest, ResourceCapInput } from '../resources/schema.js';
import type { ResourceCap, ResourceRequest, ResourceSpec } from '../resources/types.js';

/**
 * A LimitRange-like policy as written in configuration: per resource (`cpus`,
 * `memory` or an extended resource name) `{ min?, max?, maxLimitRequestRatio?,
 * defaultRequest?, default? }`, quantities as numbers or strings.
 *
 * @example
 * ```ts
 * import type { LimitRangeInput } from 'scaler-primitives/manager';
 * const limits: LimitRangeInput = {
 *   cpus: { min: '100m', max: 8, defaultRequest: '500m', default: 2 },
 *   memory: { max: '32Gi', maxLimitRequestRatio: 2 },
 * };
 * ```
 */
export type LimitRangeInput = Record<
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

/**
 * Default resources as written in configuration.
 *
 * @example
 * ```ts
 * import type { ResourceDefaultsInput, ScalerConfigInput } from 'scaler-primitives/manager';
 * const defaults: ResourceDefaultsInput = { resources: { cpus: 1, memory: '2Gi' } };
 * const config: ScalerConfigInput = { globalMaxAgents: 20, defaults, scalers: [] };
 * ```
 */
export interface ResourceDefaultsInput {
  /** Resources (nested `{ requests, limits }` or flat `{ cpus, memory }`). */
  resources?: ResourceRequest | ResourceSpec;
}

/**
 * Validated default resources.
 *
 * @example
 * ```ts
 * import { parseScalerConfig, type ResourceDefaults, type ScalerConfigInput } from 'scaler-primitives/manager';
 * declare const input: ScalerConfigInput;
 * const defaults: ResourceDefaults | undefined = parseScalerConfig(input).defaults;
 * console.log(defaults?.resources?.requests); // { cpus: 1, memBytes: 2147483648 }
 * ```
 */
export interface ResourceDefaults {
  /** Resources, parsed to numbers (cores, bytes). */
  resources?: ParsedResourceRequest;
}

/**
 * A warm-pool period as written in configuration.
 *
 * @example
 * ```ts
 * import type { WarmPoolScheduleInput } from 'scaler-primitives/manager';
 * const workingHours: WarmPoolScheduleInput = { cron: '* 8-17 * * mon-fri', timezone: 'Europe/Berlin', size: 4 };
 * ```
 */
export interface WarmPoolScheduleInput {
  /**
   * A five-field cron pattern; the period is active during every minute it
   * matches (`* 8-17 * * mon-fri`: working hours).
   */
  cron: string;
  /** The IANA time zone the pattern is read in. @default 'UTC' */
  timezone?: string;
  /** The warm pool size while this period is active. */
  size: number;
}

/**
 * A validated warm-pool period.
 *
 * @example
 * ```ts
 * import { parseScalerConfig, type ScalerConfigInput, type WarmPoolSchedule } from 'scaler-primitives/manager';
 * declare const input: ScalerConfigInput;
 * const schedules: WarmPoolSchedule[] = parseScalerConfig(input).scalers[0]?.warmPool?.schedules ?? [];
 * for (const s of schedules) console.log(`${s.cron} (${s.timezone}): ${s.size} warm`);
 * ```
 */
export interface WarmPoolSchedule {
  /** The cron pattern. */
  cron: string;
  /** The IANA time zone. */
  timezone: string;
  /** The size while active. */
  size: number;
}

/**
 * A warm pool as written in configuration.
 *
 * @example
 * ```ts
 * import type { WarmPoolInput } from 'scaler-primitives/manager';
 * const warmPool: WarmPoolInput = {
 *   size: 1,
 *   schedules: [{ cron: '* 8-17 * * mon-fri', size: 4 }],
 *   idleTimeoutSeconds: 600,
 * };
 * ```
 */
export interface WarmPoolInput {
  /** How many idle agents to keep ready (busy agents do not count), outside every schedule. */
  size: number;
  /**
   * Periods with another size. When several are active, the one whose current
   * run started latest wins. @default []
   */
  schedules?: WarmPoolScheduleInput[];
  /** An idle agent older than this is destroyed. @default 300 */
  idleTimeoutSeconds?: number;
  /** Index of the label set warm agents are started with. @default 0 */
  labelSet?: number;
}

/**
 * A validated warm pool.
 *
 * @example
 * ```ts
 * import { parseScalerConfig, type ScalerConfigInput, type WarmPoolConfig } from 'scaler-primitives/manager';
 * declare const input: ScalerConfigInput;
 * const warm: WarmPoolConfig | undefined = parseScalerConfig(input).scalers[0]?.warmPool;
 * console.log(warm?.idleTimeoutSeconds); // 300 when the input left it out
 * ```
 */
export interface WarmPoolConfig {
  /** How many idle agents to keep ready (busy agents do not count), outside every schedule. */
  size: number;
  /** Periods with another size. */
  schedules: WarmPoolSchedule[];
  /** An idle agent older than this is destroyed. */
  idleTimeoutSeconds: number;
  /** Index of the label set warm agents are started with. */
  labelSet: number;
}

/**
 * Spawn-failure backoff as written in configuration.
 *
 * @example
 * ```ts
 * import type { SpawnBackoffInput } from 'scaler-primitives/manager';
 * const spawnBackoff: SpawnBackoffInput = { failureThreshold: 5, initialMs: 2000, maxMs: 60_000 };
 * ```
 */
export interface SpawnBackoffInput {
  /** Consecutive failures (spawn rejected, or the agent never registered) that open the backoff. @default 3 */
  failureThreshold?: number;
  /** The first backoff's upper bound; each further failure doubles it (full jitter). @default 1000 */
  initialMs?: number;
  /** The largest upper bound. @default 300000 */
  maxMs?: number;
}

/**
 * A validated spawn-failure backoff.
 *
 * @example
 * ```ts
 * import { parseScalerConfig, type ScalerConfigInput, type SpawnBackoffConfig } from 'scaler-primitives/manager';
 * declare const input: ScalerConfigInput;
 * const backoff: SpawnBackoffConfig | undefined = parseScalerConfig(input).scalers[0]?.spawnBackoff;
 * ```
 */
export interface SpawnBackoffConfig {
  /** Consecutive failures that open the backoff. */
  failureThreshold: number;
  /** The first backoff's upper bound. */
  initialMs: number;
  /** The largest upper bound. */
  maxMs: number;
}

/**
 * A label set as written in configuration.
 *
 * @example
 * ```ts
 * import type { LabelSetInput } from 'scaler-primitives/manager';
 * const gpu: LabelSetInput = {
 *   labels: ['linux', 'gpu'],
 *   resources: { requests: { cpus: 4, memory: '16Gi' }, limits: { cpus: 8, memory: '16Gi' } },
 * };
 * ```
 */
export interface LabelSetInput {
  /** The labels an agent of this set has (the manager adds the automatic ones). */
  labels: string[];
  /** Resources of agents of this set (nested `{ requests, limits }` or flat `{ cpus, memory }`). */
  resources?: ResourceRequest | ResourceSpec;
}

/**
 * A validated label set.
 *
 * @example
 * ```ts
 * import { type LabelSetConfig, parseScalerConfig, type ScalerConfigInput } from 'scaler-primitives/manager';
 * declare const input: ScalerConfigInput;
 * const sets: LabelSetConfig[] = parseScalerConfig(input).scalers[0]?.labelSets ?? [];
 * console.log(sets.map((s) => s.labels.join(',')));
 * ```
 */
export interface LabelSetConfig {
  /** The labels an agent of this set has (without automatic labels). */
  labels: string[];
  /** Resources, parsed to numbers (cores, bytes). */
  resources?: ParsedResourceRequest;
}

/**
 * One scaler as written in configuration.
 *
 * @example
 * ```ts
 * import type { ScalerEntryInput } from 'scaler-primitives/manager';
 * const linux: ScalerEntryInput = {
 *   name: 'linux',
 *   type: 'container',
 *   maxAgents: 8,
 *   labelSets: [{ labels: ['linux', 'x64'], resources: { cpus: 2, memory: '4Gi' } }],
 *   machinePool: 'build-host',
 * };
 * ```
 */
export interface ScalerEntryInput {
  /** Unique name; also the backend entry's name and the `<prefix>scaler:<name>` label. */
  name: string;
  /** The host's backend kind (free text, e.g. `container`, `firecracker`). */
  type: string;
  /** The most agents this scaler runs at once (spawning, idle and busy). 0 spawns nothing. */
  maxAgents: number;
  /** The kinds of agent this scaler can start; the first that fits a job is used. */
  labelSets: LabelSetInput[];
  /** Labels a job must name to run here (a taint): keeps special agents for jobs that ask. @default [] */
  mandatoryLabels?: string[];
  /** A machine pool (a key of `machinePools`) shared with other processes through the ledger. */
  machinePool?: string;
  /** A cap on the summed requests of this scaler's agents. */
  resourceCap?: ResourceCapInput;
  /**
   * A LimitRange-like policy for this scaler's jobs: its defaults fill what no
   * job, label set or scaler default declares; a job outside it answers `never-fits`.
   */
  limits?: LimitRangeInput;
  /** Resources for label sets that declare none. */
  defaults?: ResourceDefaultsInput;
  /** Keep idle agents ready. */
  warmPool?: WarmPoolInput;
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
  spawnBackoff?: SpawnBackoffInput;
  /** Backend-specific settings, passed through untouched (see `getScalerContextForAgent`). */
  options?: Record<string, unknown>;
}

/**
 * One validated scaler.
 *
 * @example
 * ```ts
 * import { parseScalerConfig, type ScalerConfigInput, type ScalerEntryConfig } from 'scaler-primitives/manager';
 * declare const input: ScalerConfigInput;
 * for (const scaler of parseScalerConfig(input).scalers) {
 *   const entry: ScalerEntryConfig = scaler;
 *   console.log(`${entry.name}: up to ${entry.maxAgents} agents, pool ${entry.machinePool ?? 'none'}`);
 * }
 * ```
 */
export interface ScalerEntryConfig {
  /** Unique name. */
  name: string;
  /** The host's backend kind. */
  type: string;
  /** The most agents this scaler runs at once. */
  maxAgents: number;
  /** The label sets, in order. */
  labelSets: LabelSetConfig[];
  /** Labels a job must name to run here. */
  mandatoryLabels: string[];
  /** The machine pool, if any. */
  machinePool?: string;
  /** The scaler's cap, in cores and bytes. */
  resourceCap?: ResourceCap;
  /** The scaler's LimitRange-like policy, parsed. */
  limits?: LimitRangePolicy;
  /** Default resources, parsed. */
  defaults?: ResourceDefaults;
  /** The warm pool, with defaults filled in. */
  warmPool?: WarmPoolConfig;
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
  spawnBackoff?: SpawnBackoffConfig;
  /** Backend-specific settings. */
  options?: Record<string, unknown>;
}

/**
 * A scaler configuration as written (quantities as strings or numbers).
 *
 * @example
 * ```ts
 * import { parseScalerConfig, type ScalerConfigInput } from 'scaler-primitives/manager';
 * const config: ScalerConfigInput = {
 *   globalMaxAgents: 20,
 *   machinePools: { 'build-host': { maxCpu: 16, maxMemory: '64Gi' } },
 *   scalers: [{ name: 'linux', type: 'container', maxAgents: 8, labelSets: [{ labels: ['linux'] }], machinePool: 'build-host' }],
 * };
 * const parsed = parseScalerConfig(config);
 * ```
 */
export interface ScalerConfigInput {
  /** The most agents the whole orchestrator runs at once. */
  globalMaxAgents: number;
  /** The reserved prefix of automatic labels; user labels may not start with it. @default 'scaler-primitives:' (kici's is `kici:`) */
  autoLabelPrefix?: string;
  /** Resources for jobs, label sets and scalers that declare none. */
  defaults?: ResourceDefaultsInput;
  /** A cap on the summed requests of every agent of this orchestrator. */
  resourceCap?: ResourceCapInput;
  /** A LimitRange-like policy for every job, checked after the scaler's own. */
  limits?: LimitRangeInput;
  /** Machine pools by name, each with its cap, shared with other processes through the ledger. @default {} */
  machinePools?: Record<string, ResourceCapInput>;
  /** The scalers, in the order they are tried. */
  scalers: ScalerEntryInput[];
}

/**
 * A validated scaler configuration: quantities as numbers, defaults filled in.
 *
 * @example
 * ```ts
 * import { parseScalerConfig, type ScalerConfig } from 'scaler-primitives/manager';
 * declare const text: string;
 * const config: ScalerConfig = parseScalerConfig(JSON.parse(text));
 * console.log(config.machinePools['build-host']); // { maxCpu: 16, maxMemoryBytes: 68719476736 }
 * ```
 */
export interface ScalerConfig {
  /** The most agents the whole orchestrator runs at once. */
  globalMaxAgents: number;
  /** The reserved prefix of automatic labels. */
  autoLabelPrefix: string;
  /** Default resources, parsed. */
  defaults?: ResourceDefaults;
  /** The orchestrator-wide cap. */
  resourceCap?: ResourceCap;
  /** The orchestrator-wide LimitRange-like policy, parsed. */
  limits?: LimitRangePolicy;
  /** Machine pools by name. */
  machinePools: Record<string, ResourceCap>;
  /** The scalers, in the order they are tried. */
  scalers: ScalerEntryConfig[];
}
