import type { ResourceRequest } from '../../resources/types.js';
import { checkId, checkJobResources, checkLabels } from '../checks.js';
import type { FleetCore } from '../core.js';
import type { LabelSetState, ScalerState } from '../spawning/scalers.js';
import type { Spawner } from '../spawning/spawner.js';
import type { AgentRecord } from './agents.js';
import { fitsWithin } from './binding.js';
import { type AgentSnapshot, snapshotOf } from './inventory.js';
import type { AgentLifecycle } from './lifecycle.js';

/** A job looking for an idle agent: what {@link ScalerManager.claimIdleAgent} takes. */
export interface ClaimRequest {
  /** The job. At most 253 characters. */
  jobId: string;
  /** The labels the job asks for (the same as for `requestScale`). */
  labels: readonly string[];
  /** The run, passed on to `onScalerEvent`. @default the `jobId` */
  runId?: string;
  /** Agents whose label set holds any of these are not used. */
  excludeLabels?: readonly string[];
  /**
   * The job's own resource declaration, resolved with the agent's layered
   * defaults: an agent is used only when its requests (and its declared
   * limits) are at least the job's. Without it, the job takes what the
   * agent's label set gives (as `requestScale` would).
   */
  resources?: ResourceRequest;
}

/** Why the idle agents of a scaler could not take a job, in a `no-fit` {@link ClaimResult}. @internal */
export type ClaimMismatch = Extract<ClaimResult, { kind: 'no-fit' }>['reasons'][number];

/**
 * The answer to {@link ScalerManager.claimIdleAgent}, discriminated by `kind`:
 *
 * - `claimed`: `agent` was idle, can run the job, and is now busy with it
 *   (the manager did `correlateAgentToJob` for you): send the job to it;
 * - `already-bound`: a registered agent is already bound to this job (it
 *   registered for it, or an earlier claim took it): do not send it twice;
 * - `no-idle-agent`: no agent is idle now; `spawning` names an agent being
 *   started for this job, if one is (else call `requestScale`);
 * - `no-fit`: agents are idle, none can run this job (`reasons`, per scaler);
 * - `shutting-down`: `shutdownAll()` was called.
 */
export type ClaimResult =
  | {
      /** The agent took the job. */
      kind: 'claimed';
      /** The agent, as it is now (busy, bound to the job). */
      agent: AgentSnapshot;
      /** An agent that was spawning for this job and lost it (it will take the next waiting job that fits, or be idle). */
      replaced?: string;
    }
  | {
      /** A registered agent is already bound to this job. */
      kind: 'already-bound';
      /** That agent. */
      agent: AgentSnapshot;
    }
  | {
      /** No agent is idle now. */
      kind: 'no-idle-agent';
      /** The agent being spawned for this job, if one is. */
      spawning?: string;
    }
  | {
      /** Agents are idle, but none can run this job. */
      kind: 'no-fit';
      /** Why not, one entry per scaler with idle agents (config order). */
      reasons: {
        /** The scaler. */
        scaler: string;
        /** Its idle agents. */
        idle: number;
        /**
         * - `labels`: the agents' label set lacks labels the job asks for (`missing`);
         * - `mandatory`: the job does not name every mandatory label of the scaler (`missing`);
         * - `exclude`: the agents' label set holds an excluded label (`excluded`);
         * - `resources`: an idle agent has the labels, but less than the job's resources;
         * - `retired`: the scaler was removed by `reload` and takes no new work.
         */
        reason: 'labels' | 'mandatory' | 'exclude' | 'resources' | 'retired';
        /** Labels the job needs that the agents lack, or mandatory labels the job does not name. */
        missing?: string[];
        /** Excluded labels found in the agents' label set. */
        excluded?: string[];
      }[];
      /** The agent being spawned for this job, if one is. */
      spawning?: string;
    }
  | {
      /** `shutdownAll()` was called. */
      kind: 'shutting-down';
    };

const CLAIM_KEYS = ['jobId', 'labels', 'runId', 'excludeLabels', 'resources'];

/**
 * The dispatch helper: pick an idle agent that can run a job and bind it, in
 * one synchronous step (no other call can run between the pick and the bind,
 * so two claims never get the same agent).
 * @internal
 */
export class Dispatch {
  readonly #core: FleetCore;
  readonly #spawner: Spawner;
  readonly #lifecycle: AgentLifecycle;

  constructor(core: FleetCore, spawner: Spawner, lifecycle: AgentLifecycle) {
    this.#core = core;
    this.#spawner = spawner;
    this.#lifecycle = lifecycle;
  }

  claim(request: ClaimRequest): ClaimResult {
    const { jobId, labels, runId, exclude, resources } = checkClaim(request);
    const core = this.#core;
    if (core.shuttingDown) return { kind: 'shutting-down' };
    for (const record of core.book.values()) {
      if (record.jobId !== jobId) continue;
      if (record.state === 'idle' || record.state === 'busy' || record.state === 'draining') {
        return { kind: 'already-bound', agent: snapshotOf(record) };
      }
    }
    const spawning = core.book.spawningFor(jobId);
    const reasons: ClaimMismatch[] = [];
    const jobSet = new Set(labels);
    let chosen: AgentRecord | undefined;
    for (const scaler of core.scalers.order) {
      const idle = this.#idle(scaler);
      if (idle.length === 0) continue;
      if (scaler.retiring) {
        reasons.push({ scaler: scaler.name, idle: idle.length, reason: 'retired' });
        continue;
      }
      // Idle agents of one scaler may differ (several label sets, a reload):
      // check each, longest idle first.
      let first: Omit<ClaimMismatch, 'idle'> | undefined;
      let fitsLabels = false;
      for (const record of idle) {
        const mismatch = this.#mismatch(scaler, record, labels, jobSet, exclude);
        if (mismatch !== undefined) {
          first ??= mismatch;
          continue;
        }
        fitsLabels = true;
        if (resources !== undefined && !this.#hasRoom(scaler, record, resources)) continue;
        chosen = record;
        break;
      }
      if (chosen !== undefined) break;
      reasons.push(
        fitsLabels || first === undefined
          ? { scaler: scaler.name, idle: idle.length, reason: 'resources' }
          : { ...first, idle: idle.length },
      );
    }
    if (chosen === undefined) {
      const answer: ClaimResult =
        reasons.length === 0 ? { kind: 'no-idle-agent' } : { kind: 'no-fit', reasons };
      if (spawning !== undefined && spawning.jobId === jobId) answer.spawning = spawning.agentId;
      return answer;
    }
    this.#lifecycle.correlate(chosen.agentId, runId, jobId);
    const answer: ClaimResult = { kind: 'claimed', agent: snapshotOf(chosen) };
    if (spawning !== undefined && spawning !== chosen) answer.replaced = spawning.agentId;
    return answer;
  }

  /** Idle agents of a scaler, longest idle first. */
  #idle(scaler: ScalerState): AgentRecord[] {
    const idle: AgentRecord[] = [];
    for (const id of scaler.agents) {
      const record = this.#core.book.get(id);
      if (record?.state === 'idle') idle.push(record);
    }
    return idle.sort((a, b) => a.idleSince - b.idleSince);
  }

  #mismatch(
    scaler: ScalerState,
    record: AgentRecord,
    labels: readonly string[],
    jobSet: ReadonlySet<string>,
    exclude: readonly string[],
  ): Omit<ClaimMismatch, 'idle'> | undefined {
    const mandatory = scaler.config.mandatoryLabels.filter((label) => !jobSet.has(label));
    if (mandatory.length > 0)
      return { scaler: scaler.name, reason: 'mandatory', missing: mandatory };
    const missing = labels.filter((label) => !record.labels.includes(label));
    if (missing.length > 0) return { scaler: scaler.name, reason: 'labels', missing };
    const excluded = exclude.filter((label) => record.labels.includes(label));
    if (excluded.length > 0) return { scaler: scaler.name, reason: 'exclude', excluded };
    return undefined;
  }

  /** True when the job's resources, resolved with the agent's defaults, fit the agent. */
  #hasRoom(scaler: ScalerState, record: AgentRecord, job: ResourceRequest): boolean {
    const labelSet: LabelSetState = scaler.labelSets.find(
      (set) =>
        set.labels.length === record.labels.length && record.labels.every((l) => set.set.has(l)),
    ) ?? {
      index: -1,
      labels: record.labels,
      set: new Set(record.labels),
      resources: undefined,
      pools: record.shares.map((share) => share.pool),
    };
    return fitsWithin(this.#spawner.resolve(scaler, labelSet, job), record.resources);
  }
}

function checkClaim(request: ClaimRequest): {
  jobId: string;
  labels: readonly string[];
  runId: string;
  exclude: readonly string[];
  resources: ResourceRequest | undefined;
} {
  if (typeof request !== 'object' || request === null || Array.isArray(request)) {
    throw new TypeError(
      `Expected \`job\` to be an object { jobId, labels, runId?, excludeLabels?, resources? }, got \`${String(request)}\``,
    );
  }
  for (const key of Object.keys(request)) {
    if (!CLAIM_KEYS.includes(key)) {
      throw new TypeError(
        `Unknown claim field \`${key.slice(0, 64)}\`; expected ${CLAIM_KEYS.join(', ')}`,
      );
    }
  }
  checkId('jobId', request.jobId);
  checkLabels('labels', request.labels);
  const exclude = request.excludeLabels ?? [];
  checkLabels('excludeLabels', exclude);
  const runId = request.runId ?? request.jobId;
  checkId('runId', runId);
  checkJobResources(request.resources);
  return {
    jobId: request.jobId,
    labels: request.labels,
    runId,
    exclude,
    resources: request.resources,
  };
}
