import type { AgentResources } from '../backend.js';

/** The format version of every {@link AgentStateRecord} (and of the stores' documents). */
export const STATE_RECORD_VERSION = 1;

/**
 * The states a stored agent can be in: the manager's state machine without
 * `gone` (a gone agent has no record).
 * @internal
 */
export type StoredAgentState = 'spawning' | 'idle' | 'busy' | 'draining' | 'destroying';

/**
 * What a {@link StateStore} keeps about one agent the manager tracks: enough
 * to re-attach it after the host restarts (its scaler, state, bound job,
 * labels, resources and pool row), and nothing a backend can tell again.
 *
 * A spawning agent with a `jobId` is a pending job binding: after a restart,
 * `requestScale` for that job answers `already-spawning` and the agent, when
 * it registers, is bound to the job as before.
 */
export interface AgentStateRecord {
  /** The record format version: always 1. */
  v: 1;
  /** The agent (at most 253 characters). */
  agentId: string;
  /** The scaler that spawned it. */
  scaler: string;
  /** Its state in the manager's state machine. */
  state: 'spawning' | 'idle' | 'busy' | 'draining' | 'destroying';
  /** True when spawned by the warm pool (no job at spawn). */
  warm: boolean;
  /** The job it is bound to (spawned for, or running); absent when none. */
  jobId?: string;
  /** The run of the job it runs, once correlated (events go to `onScalerEvent` again after a restart). */
  runId?: string;
  /** The matched label set, automatic labels included. */
  labels: string[];
  /** The resolved requests and limits. */
  resources: AgentResources;
  /** The machine pool it reserves in; absent when its scaler names none (the first of `pools` when several). */
  pool?: string;
  /** Every machine pool it reserves in, sorted, when there are two or more. */
  pools?: string[];
  /** The device ids its pools assigned, by extended resource name, when any. */
  devices?: Record<string, string[]>;
  /** True once the pool ledger granted its row. */
  poolHeld: boolean;
  /** True once the backend's `spawn` resolved. */
  spawnSettled: boolean;
  /** When the spawn began (epoch ms, the manager's clock). */
  spawnedAt: number;
  /** When it registered; 0 before. */
  registeredAt: number;
  /** When it last became idle; 0 before. */
  idleSince: number;
  /** Jobs it completed. */
  jobsCompleted: number;
  /** Why it drains or is destroyed (`drain`, `idle`, `shutdown`...), when it does. */
  destroyReason?: string;
  /** What the backend's `spawn` returned as `context` (JSON values only). */
  context?: Record<string, unknown>;
}

/** One change a {@link StateStore} applies: a record written whole, or removed. */
export type StateChange =
  | {
      /** Write the record (create or replace). */
      op: 'put';
      /** The record. */
      record: AgentStateRecord;
    }
  | {
      /** Remove the agent's record (idempotent). */
      op: 'delete';
      /** The agent. */
      agentId: string;
    };

/**
 * Where `ScalerManager` keeps its books so that a restarted host can recover
 * them (`stateStore` option). The manager batches its changes (group commit):
 * at most one {@link StateStore.commit} runs at a time, carrying every agent
 * that changed since the last one (the latest state of each), and a spawn is
 * reported only after a commit carrying its record resolved.
 *
 * Write points (each marks the agent changed; see docs/manager.md): an agent
 * is tracked (state `spawning`, before its pool row and backend spawn), its
 * pool row is granted, its spawn settles (with `context`), it registers,
 * takes a job, completes a job, starts draining or being destroyed, and is
 * forgotten (`delete`).
 *
 * Implementations: {@link MemoryStateStore}, {@link FileStateStore}, and
 * `NatsStateStore` from `scaler-primitives/manager/nats`.
 */
export interface StateStore {
  /**
   * Every stored record (validated), for recovery. A store whose contents are
   * corrupt rejects (`StateStoreError`, `problem: 'corrupt'`) and leaves them as they are.
   */
  load(): Promise<AgentStateRecord[]>;
  /**
   * Apply `changes` (at most one per agent), durably, before resolving. When it
   * rejects, any subset may have been applied; the manager writes the same
   * agents again with its next commit.
   */
  commit(changes: readonly StateChange[]): Promise<void>;
  /** Release what the store holds open (files, subscriptions). Idempotent. */
  close?(): Promise<void>;
}
