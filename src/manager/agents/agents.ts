import type { AgentResources } from '../backend.js';
import type { PoolShare } from '../capacity/pools.js';
import type { AgentMailbox } from '../events.js';
import type { ScalerState } from '../spawning/scalers.js';
import type { AgentState } from '../types.js';

/**
 * The agent state machine, in one place. Every change of `AgentRecord.state`
 * goes through {@link AgentBook.transition}, which refuses any move this table
 * does not list:
 *
 * - `spawning`: capacity reserved, the backend is starting it, not registered yet;
 * - `idle` ⇄ `busy`: registered; busy while it runs a job;
 * - `draining`: busy, takes no new job, destroyed when its job completes;
 * - `destroying`: the backend's `destroy` has begun (or will, once the spawn
 *   settles); it never takes a job again;
 * - `gone`: forgotten; every reservation released.
 *
 * A busy agent reaches `destroying` only through `draining`, except by a forced
 * `shutdownAll()` (no drain, or its drain timeout passed).
 * @internal
 */
export const AGENT_TRANSITIONS: Readonly<Record<AgentState, readonly AgentState[]>> = {
  spawning: ['idle', 'busy', 'destroying', 'gone'],
  idle: ['busy', 'destroying', 'gone'],
  busy: ['idle', 'draining', 'destroying', 'gone'],
  draining: ['destroying', 'gone'],
  destroying: ['gone'],
  gone: [],
};

/** One tracked agent. @internal */
export interface AgentRecord {
  readonly agentId: string;
  readonly scaler: ScalerState;
  jobId: string | undefined;
  readonly warm: boolean;
  state: AgentState;
  readonly labels: string[];
  readonly resources: AgentResources;
  /** Its machine pools (sorted) and the part of its request each pool's row holds; empty when none. */
  readonly shares: readonly PoolShare[];
  /** True once the pool ledger(s) granted its row(s), in every pool. */
  poolHeld: boolean;
  /** The device ids its pools assigned, by resource, once granted. */
  devices: Record<string, string[]> | undefined;
  readonly spawnedAt: number;
  spawnSettled: boolean;
  registeredAt: number;
  idleSince: number;
  jobsCompleted: number;
  context: Record<string, unknown> | undefined;
  readonly mailbox: AgentMailbox;
  /** Set when the agent itself went away (it registered, maybe ran, and disconnected). */
  disconnected: boolean;
  /** Why it is being destroyed (`idle`, `drain`, `pruned`, `shutdown`...). */
  destroyReason: string | undefined;
  /** A backend `destroy` call in flight. */
  destroyCall: Promise<void> | undefined;
  /** True when the last `destroy` failed: maintenance tries again. */
  destroyFailed: boolean;
  /** Set when a destroy failed at shutdown: its pool row is kept (the agent may run). */
  keepPoolRow: boolean;
  /** Who waits for it to be gone (made on demand: most agents nobody waits for). */
  goneWaiters: Array<() => void> | undefined;
  /** The release of its pool rows, started when it was forgotten (settles, never rejects). */
  released: Promise<void> | undefined;
  /** Aborts its backend `spawn` (the request's `signal`), while that call is unanswered. */
  abort?: AbortController | undefined;
}

const TOMBSTONE_LIMIT = 16_384;

/** Tracked agents by id, with the job index and the ids of agents that went away. @internal */
export class AgentBook {
  readonly #agents = new Map<string, AgentRecord>();
  readonly #spawningByJob = new Map<string, string>();
  /** Agents this manager destroyed or forgot: `canRunJob` stays false for them. */
  readonly #tombstones = new Set<string>();
  readonly #ring: Array<string | undefined> = [];
  #next = 0;
  /** Told of every agent added, moved or untracked, and of every {@link AgentBook.touch} (the state store's write points). */
  onChange: ((record: AgentRecord) => void) | undefined;

  get size(): number {
    return this.#agents.size;
  }

  get(agentId: string): AgentRecord | undefined {
    return this.#agents.get(agentId);
  }

  has(agentId: string): boolean {
    return this.#agents.has(agentId);
  }

  /** True for an agent this manager tracked once and no longer does. */
  wasForgotten(agentId: string): boolean {
    return this.#tombstones.has(agentId);
  }

  values(): IterableIterator<AgentRecord> {
    return this.#agents.values();
  }

  /** A snapshot, safe to iterate while records change. */
  list(): AgentRecord[] {
    return [...this.#agents.values()];
  }

  /** The agent spawning for `jobId`, if any. */
  spawningFor(jobId: string): AgentRecord | undefined {
    const id = this.#spawningByJob.get(jobId);
    return id === undefined ? undefined : this.#agents.get(id);
  }

  add(record: AgentRecord): void {
    this.#agents.set(record.agentId, record);
    record.scaler.agents.add(record.agentId);
    if (record.jobId !== undefined) this.#spawningByJob.set(record.jobId, record.agentId);
    this.onChange?.(record);
  }

  /** A stored field of a tracked agent changed without a state move (job, context, pool row). */
  touch(record: AgentRecord): void {
    if (this.#agents.get(record.agentId) === record) this.onChange?.(record);
  }

  /** The job no longer waits on this agent's spawn (it registered, was taken, or is going away). */
  unbindSpawn(record: AgentRecord): void {
    if (record.jobId !== undefined && this.#spawningByJob.get(record.jobId) === record.agentId) {
      this.#spawningByJob.delete(record.jobId);
    }
  }

  /**
   * Move `record` to `to`. A move the table does not list is a bug in the
   * manager: it throws rather than corrupt the books.
   */
  transition(record: AgentRecord, to: AgentState): void {
    const from = record.state;
    if (from === to) return;
    if (!AGENT_TRANSITIONS[from].includes(to)) {
      throw new Error(`Illegal agent transition ${from} -> ${to} for ${record.agentId}`);
    }
    record.state = to;
    if (to === 'destroying' || to === 'draining') this.unbindSpawn(record);
    this.onChange?.(record);
  }

  /** Stop tracking. Returns false when it was not tracked (idempotent). */
  untrack(record: AgentRecord, tombstone = true): boolean {
    if (this.#agents.get(record.agentId) !== record) return false;
    record.state = 'gone';
    this.#agents.delete(record.agentId);
    record.scaler.agents.delete(record.agentId);
    this.unbindSpawn(record);
    if (tombstone) this.#bury(record.agentId);
    this.onChange?.(record);
    if (record.goneWaiters !== undefined) for (const wake of record.goneWaiters.splice(0)) wake();
    return true;
  }

  // A ring, not Set iteration order: deleting from the front of a big Set leaves
  // holes that make finding the oldest entry slow.
  #bury(agentId: string): void {
    const oldest = this.#ring[this.#next];
    if (oldest !== undefined) this.#tombstones.delete(oldest);
    this.#ring[this.#next] = agentId;
    this.#next = (this.#next + 1) % TOMBSTONE_LIMIT;
    this.#tombstones.add(agentId);
  }

  /** Forget every job index entry (shutdown). */
  clearJobs(): void {
    this.#spawningByJob.clear();
  }
}

/** True when the agent may be given a job (by state alone). */
export function takesJobs(record: AgentRecord): boolean {
  return record.state === 'spawning' || record.state === 'idle' || record.state === 'busy';
}

/** Resolves when the agent is gone (at once when it already is). */
export function whenGone(record: AgentRecord): Promise<void> {
  if (record.state === 'gone') return Promise.resolve();
  return new Promise<void>((resolve) => {
    record.goneWaiters ??= [];
    record.goneWaiters.push(resolve);
  });
}
