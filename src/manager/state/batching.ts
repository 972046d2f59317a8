/**
 * Group commit for the manager's state: changes mark an agent dirty (a Map
 * insert, nothing more, so the in-memory capacity check never waits); one
 * commit at a time carries the latest state of every dirty agent, serialized
 * when the commit begins. Callers that need durability (a spawn, before it is
 * reported) await {@link StateWriter.durable}.
 */
import type { AgentRecord } from '../agents/agents.js';
import { toStateRecord } from './records.js';
import type { StateChange, StateStore } from './types.js';

interface Round {
  promise: Promise<void>;
  resolve(): void;
  reject(error: unknown): void;
}

function newRound(): Round {
  let resolve!: () => void;
  let reject!: (error: unknown) => void;
  const promise = new Promise<void>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  // A round nobody awaits must not be an unhandled rejection.
  promise.catch(() => undefined);
  return { promise, resolve, reject };
}

/** Batches agent changes into commits of a {@link StateStore}. @internal */
export class StateWriter {
  readonly store: StateStore;
  readonly #onError: (error: unknown, agentIds: string[]) => void;
  /** Agents changed since the running commit began. */
  #dirty = new Map<string, AgentRecord>();
  /** The round the dirty agents will be committed in. */
  #next: Round | undefined;
  /** The agents and round of the commit running now. */
  #inFlight: { ids: Set<string>; round: Round } | undefined;
  #scheduled = false;
  /** Something was marked while the running commit ran (someone may wait for it). */
  #markedInFlight = false;
  #commits = 0;
  #changes = 0;

  constructor(store: StateStore, onError: (error: unknown, agentIds: string[]) => void) {
    this.store = store;
    this.#onError = onError;
  }

  /** Commits made and changes they carried (for status and the bench). */
  get stats(): { commits: number; changes: number; pending: number } {
    return { commits: this.#commits, changes: this.#changes, pending: this.#dirty.size };
  }

  /** The agent changed: its latest state goes in the next commit. Synchronous and cheap. */
  mark(record: AgentRecord): void {
    if (this.#inFlight !== undefined) this.#markedInFlight = true;
    this.#dirty.set(record.agentId, record);
    this.#next ??= newRound();
    this.#schedule();
  }

  /** Resolves once the agent's latest change is durable (at once when nothing is pending). */
  durable(record: AgentRecord): Promise<void> {
    if (this.#dirty.get(record.agentId) === record) return this.#next!.promise;
    if (this.#inFlight?.ids.has(record.agentId)) return this.#inFlight.round.promise;
    return Promise.resolve();
  }

  /** Resolves once every change made before the call is durable (or its commit failed). */
  async flush(): Promise<void> {
    const waits: Promise<void>[] = [];
    if (this.#inFlight) waits.push(this.#inFlight.round.promise);
    if (this.#next) waits.push(this.#next.promise);
    await Promise.allSettled(waits);
    if (this.#dirty.size > 0 || this.#inFlight) await this.flush();
  }

  // Commits wait for the current tick to end, so every change made in one
  // synchronous stretch (many requestScale calls) shares a commit.
  #schedule(): void {
    if (this.#scheduled || this.#inFlight) return;
    this.#scheduled = true;
    queueMicrotask(() => {
      this.#scheduled = false;
      void this.#run();
    });
  }

  async #run(): Promise<void> {
    while (this.#dirty.size > 0 && this.#inFlight === undefined) {
      const batch = this.#dirty;
      const round = this.#next!;
      this.#dirty = new Map();
      this.#next = undefined;
      const changes: StateChange[] = [];
      for (const [agentId, record] of batch) {
        const stored = toStateRecord(record);
        changes.push(
          stored === undefined ? { op: 'delete', agentId } : { op: 'put', record: stored },
        );
      }
      this.#inFlight = { ids: new Set(batch.keys()), round };
      this.#markedInFlight = false;
      try {
        await this.store.commit(changes);
        this.#commits++;
        this.#changes += changes.length;
        round.resolve();
      } catch (error) {
        // Written again with the next commit, unless changed since (then the
        // newer state goes anyway).
        for (const [agentId, record] of batch) {
          if (!this.#dirty.has(agentId)) this.#dirty.set(agentId, record);
        }
        if (this.#dirty.size > 0) this.#next ??= newRound();
        round.reject(error);
        this.#inFlight = undefined;
        this.#onError(error, [...batch.keys()]);
        // No hot loop against a failing store: try again only for changes made
        // meanwhile (a spawn may wait for them); else the next mark or retry() does.
        if (!this.#markedInFlight) return;
        continue;
      }
      this.#inFlight = undefined;
    }
  }

  /** Commit what a failed commit left (maintenance calls it). */
  retry(): void {
    if (this.#dirty.size > 0) this.#schedule();
  }
}
