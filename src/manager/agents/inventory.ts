import type { ResourceAmount, ResourceLimits } from '../../resources/types.js';
import type { AgentResources } from '../backend.js';
import { checkId, checkLabels } from '../checks.js';
import type { AgentState } from '../types.js';
import type { AgentBook, AgentRecord } from './agents.js';

/**
 * A read-only, frozen picture of one agent the manager tracks, taken when it was
 * asked for (it does not change afterwards: ask again for news).
 */
export interface AgentSnapshot {
  /** The agent id (what the backend was asked to start, and what the agent registers as). */
  readonly agentId: string;
  /** The scaler that spawned it. */
  readonly scaler: string;
  /** Its state in the manager's state machine (`gone` agents are not listed). */
  readonly state: Exclude<AgentState, 'gone'>;
  /** The labels of its label set, automatic labels included. */
  readonly labels: readonly string[];
  /**
   * The job it is bound to: the job it was spawned for (while spawning, or once
   * registered for it) or the job it runs (busy, draining). Absent when idle or
   * when it was a warm-pool spawn that has no job yet.
   */
  readonly jobId?: string;
  /** True for a warm-pool spawn (started with no job). */
  readonly warm: boolean;
  /** Its resolved requests and limits. */
  readonly resources: Readonly<AgentResources>;
  /** The machine pool it holds a row in, if its scaler names one (the first of `pools` when several). */
  readonly pool?: string;
  /** Every machine pool it holds a row in, sorted by name; empty when none. */
  readonly pools: readonly string[];
  /**
   * The device ids its pools assigned, by extended resource name (what
   * `SpawnRequest.devices` passed to the backend); absent when none.
   */
  readonly devices?: Readonly<Record<string, readonly string[]>>;
  /** When its spawn was asked for (epoch milliseconds, on the manager's clock). */
  readonly spawnedAt: number;
  /** When it registered, once it did. */
  readonly registeredAt?: number;
  /** Since when it is idle, while `state` is `idle`. */
  readonly idleSince?: number;
  /** Jobs it ran to the end (`onJobComplete` calls). */
  readonly jobsRun: number;
  /**
   * True when it will not take another job after the one it runs: its job
   * count reached `maxJobsPerAgent` once that job completes (a one-shot agent
   * with `maxJobsPerAgent: 1`), or it is draining or being destroyed. Such an
   * agent is never warm capacity.
   */
  readonly lastJob: boolean;
  /**
   * What a host may add to a job's context for this agent (what kici's
   * `getScalerContextForAgent` answered): the scaler's `options`, what the
   * backend's `spawn` returned as `context`, then `scaler`, `type`, `labels`
   * and `resources`.
   */
  readonly context: Readonly<Record<string, unknown>>;
}

/**
 * Which agents {@link ScalerManager.listAgents} answers. Every field narrows;
 * an absent field does not filter.
 */
export interface AgentFilter {
  /** Only agents of this scaler (or of one of these). */
  scaler?: string | readonly string[];
  /** Only agents in this state (or in one of these). */
  state?: Exclude<AgentState, 'gone'> | readonly Exclude<AgentState, 'gone'>[];
  /** Only agents whose label set holds every one of these labels. */
  labels?: readonly string[];
}

const FILTER_KEYS = ['scaler', 'state', 'labels'];
const STATES: readonly string[] = ['spawning', 'idle', 'busy', 'draining', 'destroying'];

/** True when the agent takes no job after its current one (see {@link AgentSnapshot.lastJob}). @internal */
export function isLastJob(record: AgentRecord): boolean {
  if (record.state === 'draining' || record.state === 'destroying' || record.state === 'gone') {
    return true;
  }
  const max = record.scaler.config.maxJobsPerAgent;
  if (max === undefined) return false;
  const running = record.state === 'busy' || record.jobId !== undefined ? 1 : 0;
  return record.jobsCompleted + running >= max;
}

/**
 * True when the agent is warm capacity: idle and able to take another job, or
 * spawning with no job bound (a warm spawn nobody took yet). An agent on its
 * last job, or spawning for a job, never is.
 * @internal
 */
export function isWarmCapacity(record: AgentRecord): boolean {
  if (record.state === 'idle') return !isLastJob(record);
  return record.state === 'spawning' && record.jobId === undefined;
}

/** A frozen snapshot of one record. @internal */
export function snapshotOf(record: AgentRecord): AgentSnapshot {
  const snapshot: {
    -readonly [K in keyof AgentSnapshot]: AgentSnapshot[K];
  } = {
    agentId: record.agentId,
    scaler: record.scaler.name,
    state: record.state as Exclude<AgentState, 'gone'>,
    labels: Object.freeze([...record.labels]),
    warm: record.warm,
    resources: freezeResources(record.resources),
    spawnedAt: record.spawnedAt,
    jobsRun: record.jobsCompleted,
    lastJob: isLastJob(record),
    pools: Object.freeze(record.shares.map((share) => share.pool)),
    context: Object.freeze(scalerContextOf(record)),
  };
  if (record.jobId !== undefined) snapshot.jobId = record.jobId;
  if (record.shares.length > 0) snapshot.pool = record.shares[0]!.pool;
  if (record.devices !== undefined) {
    const devices: Record<string, readonly string[]> = {};
    for (const [name, ids] of Object.entries(record.devices))
      devices[name] = Object.freeze([...ids]);
    snapshot.devices = Object.freeze(devices);
  }
  if (record.state !== 'spawning' && record.registeredAt > 0) {
    snapshot.registeredAt = record.registeredAt;
  }
  if (record.state === 'idle') snapshot.idleSince = record.idleSince;
  return Object.freeze(snapshot);
}

function freezeAmount(amount: ResourceAmount): ResourceAmount {
  const copy: ResourceAmount = { cpus: amount.cpus, memBytes: amount.memBytes };
  if (amount.extended !== undefined) copy.extended = Object.freeze({ ...amount.extended });
  return Object.freeze(copy);
}

function freezeLimits(limits: ResourceLimits): ResourceLimits {
  const copy: { -readonly [K in keyof ResourceLimits]: ResourceLimits[K] } = {};
  if (limits.cpus !== undefined) copy.cpus = limits.cpus;
  if (limits.memBytes !== undefined) copy.memBytes = limits.memBytes;
  if (limits.extended !== undefined) copy.extended = Object.freeze({ ...limits.extended });
  return Object.freeze(copy);
}

function freezeResources(resources: AgentResources): AgentSnapshot['resources'] {
  return Object.freeze({
    requests: freezeAmount(resources.requests),
    limits: freezeLimits(resources.limits),
  });
}

interface CheckedFilter {
  scalers: Set<string> | undefined;
  states: Set<string> | undefined;
  labels: readonly string[];
}

function oneOrMany(name: string, value: unknown): string[] {
  const list = typeof value === 'string' ? [value] : value;
  if (!Array.isArray(list) || list.some((v) => typeof v !== 'string')) {
    throw new TypeError(
      `Expected \`filter.${name}\` to be a string or an array of strings, got \`${String(value).slice(0, 80)}\``,
    );
  }
  if (list.length > 64) {
    throw new TypeError(
      `Expected \`filter.${name}\` to hold at most 64 values, got ${list.length}`,
    );
  }
  return list as string[];
}

/**
 * What a host may add to a job's context for an agent: the scaler's `options`,
 * what the backend's `spawn` returned, the scaler, labels and resources.
 * @internal
 */
export function scalerContextOf(record: AgentRecord): Record<string, unknown> {
  return {
    ...record.scaler.config.options,
    ...record.context,
    scaler: record.scaler.name,
    type: record.scaler.config.type,
    labels: [...record.labels],
    resources: {
      requests: { ...record.resources.requests },
      limits: { ...record.resources.limits },
    },
  };
}

/** Validate a filter (unknown keys and bad values are errors). @internal */
export function checkFilter(filter: AgentFilter | undefined): CheckedFilter {
  if (filter === undefined) return { scalers: undefined, states: undefined, labels: [] };
  if (typeof filter !== 'object' || filter === null || Array.isArray(filter)) {
    throw new TypeError(
      `Expected \`filter\` to be an object { scaler?, state?, labels? }, got \`${String(filter)}\``,
    );
  }
  for (const key of Object.keys(filter)) {
    if (!FILTER_KEYS.includes(key)) {
      throw new TypeError(
        `Unknown agent filter \`${key.slice(0, 64)}\`; expected ${FILTER_KEYS.join(', ')}`,
      );
    }
  }
  let scalers: Set<string> | undefined;
  if (filter.scaler !== undefined) {
    const names = oneOrMany('scaler', filter.scaler);
    for (const name of names) checkId('filter.scaler', name);
    scalers = new Set(names);
  }
  let states: Set<string> | undefined;
  if (filter.state !== undefined) {
    const wanted = oneOrMany('state', filter.state);
    for (const state of wanted) {
      if (!STATES.includes(state)) {
        throw new TypeError(
          `Expected \`filter.state\` to be one of ${STATES.join(', ')}, got \`${state.slice(0, 64)}\``,
        );
      }
    }
    states = new Set(wanted);
  }
  const labels = filter.labels ?? [];
  checkLabels('filter.labels', labels);
  return { scalers, states, labels };
}

/**
 * The agent inventory: snapshots of what the book tracks, filtered. Spawning,
 * idle, busy, draining and destroying agents are listed; forgotten ones are not.
 * @internal
 */
export function listSnapshots(book: AgentBook, filter: AgentFilter | undefined): AgentSnapshot[] {
  const { scalers, states, labels } = checkFilter(filter);
  const out: AgentSnapshot[] = [];
  for (const record of book.values()) {
    if (record.state === 'gone') continue;
    if (scalers !== undefined && !scalers.has(record.scaler.name)) continue;
    if (states !== undefined && !states.has(record.state)) continue;
    if (labels.length > 0 && !labels.every((label) => record.labels.includes(label))) continue;
    out.push(snapshotOf(record));
  }
  return out;
}
