import { checkChanges } from './check.js';
import { agentStateRecordSchema, parseStored } from './schema.js';
import type { AgentStateRecord, StateChange, StateStore } from './types.js';

/**
 * A {@link StateStore} in this process's memory: what `ScalerManager` does
 * without a `stateStore` (nothing survives the process). Useful to hand one
 * manager's books to the next in one process (a test, a hot reload) and as
 * the reference implementation of the contract. Records are stored as JSON
 * text, so a reader never shares objects with the writer.
 *
 * @example
 * ```ts
 * import { type BackendEntry, MemoryStateStore, type ScalerConfigInput, ScalerManager } from 'scaler-primitives/manager';
 * declare const config: ScalerConfigInput;
 * declare const backends: BackendEntry[];
 * const stateStore = new MemoryStateStore();
 * const first = new ScalerManager({ config, backends, stateStore });
 * // ... first is abandoned without shutdown ...
 * const second = new ScalerManager({ config, backends, stateStore });
 * second.start(); // recovers first's agents
 * ```
 */
export class MemoryStateStore implements StateStore {
  readonly #records = new Map<string, string>();
  #commits = 0;

  /** Commits applied so far (each may carry many changes). */
  get commits(): number {
    return this.#commits;
  }

  /** Every stored record, as fresh copies. */
  async load(): Promise<AgentStateRecord[]> {
    return [...this.#records.values()].map((text) =>
      parseStored(agentStateRecordSchema, text, 'memory state store'),
    );
  }

  /**
   * Apply `changes` at once (all or none: they are validated first).
   *
   * @throws TypeError or InvalidInputError for a malformed change (nothing is applied).
   */
  async commit(changes: readonly StateChange[]): Promise<void> {
    checkChanges(changes);
    for (const change of changes) {
      if (change.op === 'put')
        this.#records.set(change.record.agentId, JSON.stringify(change.record));
      else this.#records.delete(change.agentId);
    }
    this.#commits++;
  }

  /** Nothing to release. */
  async close(): Promise<void> {}
}
