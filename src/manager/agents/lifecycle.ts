import type { Pacing } from '../capacity/pacing.js';
import { checkId, checkLabels } from '../checks.js';
import type { FleetCore } from '../core.js';
import type { AgentRecord } from './agents.js';
import { rebindOnRegistration, releaseSpawnBinding } from './binding.js';

/** The answer to `onAgentRegistered` for an agent the manager spawned. */
export interface AgentRegistration {
  /**
   * The job the agent is bound to: the one it was spawned for or, when another
   * agent took that job meanwhile, the oldest job waiting on a spawn that it can
   * run (`rebound` is then true). Absent for a warm-pool agent, or when no
   * waiting job fits: the agent is idle.
   */
  boundJobId?: string;
  /** True when `boundJobId` is not the job the agent was spawned for (see `boundJobId`). */
  rebound?: boolean;
  /** Labels every job given to this agent must name (apply them to queue-drain dispatch too). */
  mandatoryLabels: string[];
}

/**
 * What the host tells the manager about agents (registered, given a job, job
 * done, gone, configured, to be drained), as moves of the agent state machine.
 * @internal
 */
export class AgentLifecycle {
  readonly #core: FleetCore;
  readonly #pacing: Pacing;
  readonly #onConfigAck: ((agentId: string, scaler: string) => void) | undefined;

  constructor(
    core: FleetCore,
    pacing: Pacing,
    onConfigAck: ((agentId: string, scaler: string) => void) | undefined,
  ) {
    this.#core = core;
    this.#pacing = pacing;
    this.#onConfigAck = onConfigAck;
  }

  /** An agent registered: spawning → idle (warm) or busy (bound to its job). */
  registered(agentId: string, labels: readonly string[]): AgentRegistration | null {
    checkId('agentId', agentId);
    checkLabels('labels', labels);
    const core = this.#core;
    const record = core.book.get(agentId);
    if (record === undefined) return null;
    const answer: AgentRegistration = {
      mandatoryLabels: [...record.scaler.config.mandatoryLabels],
    };
    if (record.state === 'spawning') {
      // Spawned for a job another agent took: take the next waiting job that fits, or be idle.
      if (record.jobId === undefined && !record.warm) {
        const rebound = rebindOnRegistration(core, record);
        if (rebound !== undefined) answer.rebound = true;
      }
      core.book.unbindSpawn(record);
      record.registeredAt = core.now();
      if (record.jobId !== undefined) {
        core.book.transition(record, 'busy');
      } else {
        core.book.transition(record, 'idle');
        record.idleSince = record.registeredAt;
      }
      this.#pacing.succeeded(record.scaler);
      core.emitFor(record, 'registered', `${agentId} registered`, { labels: [...labels] });
    }
    if (record.jobId !== undefined && (record.state === 'busy' || record.state === 'idle')) {
      answer.boundJobId = record.jobId;
    }
    return answer;
  }

  /** Only agents that take jobs pass; then the label gates. */
  canRunJob(agentId: string, jobLabels: readonly string[]): boolean {
    checkId('agentId', agentId);
    checkLabels('jobLabels', jobLabels);
    const book = this.#core.book;
    const record = book.get(agentId);
    if (record === undefined) return !book.wasForgotten(agentId);
    if (record.state !== 'spawning' && record.state !== 'idle' && record.state !== 'busy') {
      return false;
    }
    if (!record.scaler.config.mandatoryLabels.every((label) => jobLabels.includes(label))) {
      return false;
    }
    return jobLabels.every((label) => record.labels.includes(label));
  }

  /** The dispatcher gave an agent a job. */
  correlate(agentId: string, runId: string, jobId: string): void {
    checkId('agentId', agentId);
    checkId('runId', runId);
    checkId('jobId', jobId);
    const core = this.#core;
    const record = core.book.get(agentId);
    if (record === undefined) return;
    if (record.state === 'destroying') {
      core.emitFor(record, 'job-refused', `${agentId} is being destroyed; job ${jobId} refused`, {
        runId,
        jobId,
      });
      return;
    }
    if (record.state === 'idle') {
      core.counters.warmHits++;
      core.book.transition(record, 'busy');
    }
    if (record.jobId !== jobId) core.book.unbindSpawn(record); // the original job waits again
    releaseSpawnBinding(core, jobId, record); // a job runs on one agent
    record.jobId = jobId;
    core.book.touch(record);
    core.events.correlate(record.mailbox, runId, jobId, (dropped) => ({
      source: 'manager',
      kind: 'events-dropped',
      agentId,
      scaler: record.scaler.name,
      at: core.now(),
      message: `${dropped} event(s) of ${agentId} were dropped before it was correlated with a job`,
      data: { dropped },
    }));
    core.emitFor(record, 'busy', `${agentId} runs job ${jobId}`, { runId, jobId });
  }

  /** A job finished: idle again, or destroyed when a drain, job or lifetime limit says so. */
  jobComplete(agentId: string): void {
    checkId('agentId', agentId);
    const core = this.#core;
    const record = core.book.get(agentId);
    if (record === undefined) return;
    if (record.state !== 'busy' && record.state !== 'draining') return;
    record.jobsCompleted++;
    // The job still hears that its agent is done; later events wait for the next job.
    core.emitFor(record, 'idle', `${agentId} finished job ${record.jobId ?? ''}`);
    record.jobId = undefined;
    core.events.uncorrelate(record.mailbox);
    const config = record.scaler.config;
    const now = core.now();
    let reason = record.state === 'draining' ? (record.destroyReason ?? 'drain') : undefined;
    if (config.maxJobsPerAgent !== undefined && record.jobsCompleted >= config.maxJobsPerAgent) {
      reason ??= 'max-jobs';
    }
    const lifetime = config.maxAgentLifetimeSeconds;
    if (lifetime !== undefined && now - record.spawnedAt >= lifetime * 1000) reason ??= 'lifetime';
    if (record.scaler.retiring) reason ??= 'retired';
    if (reason !== undefined) {
      if (record.state === 'busy') core.book.transition(record, 'draining');
      void core.destroy(record, reason, true);
      return;
    }
    core.book.transition(record, 'idle');
    record.idleSince = now;
  }

  /** An agent went away: everything it held is released. Idempotent. */
  disconnected(agentId: string): Promise<void> {
    checkId('agentId', agentId);
    const core = this.#core;
    const record = core.book.get(agentId);
    if (record === undefined) return Promise.resolve();
    record.disconnected = true;
    core.emitFor(record, 'disconnected', `${agentId} disconnected`);
    return core.forget(record);
  }

  /**
   * An agent confirmed its configuration: its backend's `onConfigAck` runs,
   * then the host's option; a throw or rejection of either becomes an event and
   * never skips the other.
   */
  configAcked(agentId: string): void {
    checkId('agentId', agentId);
    const record = this.#core.book.get(agentId);
    if (record === undefined) return;
    const backend = record.scaler.backend;
    if (typeof backend.onConfigAck === 'function') {
      this.#runAckHook(record, 'backend', () => backend.onConfigAck!(agentId));
    }
    const option = this.#onConfigAck;
    if (option !== undefined) {
      this.#runAckHook(record, 'option', () => option(agentId, record.scaler.name));
    }
  }

  #runAckHook(record: AgentRecord, hook: 'backend' | 'option', run: () => unknown): void {
    const failed = (error: unknown) => {
      const who = hook === 'backend' ? "the backend's onConfigAck" : 'the onConfigAck option';
      this.#core.emitFor(record, 'config-ack-failed', `${who}(${record.agentId}) failed`, {
        error,
        hook,
      });
    };
    try {
      // An async hook (or a JavaScript option returning a promise): its rejection too.
      const result = run();
      if (typeof (result as PromiseLike<unknown> | undefined)?.then === 'function') {
        Promise.resolve(result).catch(failed);
      }
    } catch (error) {
      failed(error);
    }
  }

  /** Drain one agent (at once for an agent not tracked). */
  drain(agentId: string): Promise<void> {
    checkId('agentId', agentId);
    const record = this.#core.book.get(agentId);
    if (record === undefined) return Promise.resolve();
    return this.#core.drain(record, 'drain');
  }

  /** Drain every agent a scaler runs now. */
  drainScaler(name: string): Promise<void> {
    checkId('name', name);
    const scaler = this.#core.scalers.get(name);
    if (scaler === undefined) {
      throw new TypeError(`Expected \`name\` to be a scaler, got \`${name.slice(0, 64)}\``);
    }
    const gone = [...scaler.agents].map((id) =>
      this.#core.drain(this.#core.book.get(id)!, 'drain'),
    );
    return Promise.all(gone).then(() => undefined);
  }
}
