import type { Clock } from '../clock.js';
import type { LedgerLeaseExpiredError } from '../errors/index.js';
import { AgentBook, type AgentRecord, whenGone } from './agents/agents.js';
import type { BackendEventInput } from './backend.js';
import { CapacityGate } from './capacity/capacity.js';
import type { PoolLedgers } from './capacity/pools.js';
import type { ScalerConfig } from './config/config.js';
import type {
  EventDataArg,
  EventRelay,
  ManagerEventKind,
  ScalerEvent,
  ScalerEventData,
} from './events.js';
import { type BackendEntry, ScalerRegistry } from './spawning/scalers.js';
import type { StateWriter } from './state/batching.js';
import type { ManagerTelemetry } from './telemetry/telemetry.js';
import type { ScalerCounters } from './types.js';

/** Timing and policy options every part reads. @internal */
export interface CoreOptions {
  registrationTimeoutMs: number;
  demandHoldMs: number;
  random: () => number;
}

/**
 * The state the parts share (config, clock, agents, scalers, capacity, events,
 * counters) and the one path by which an agent is destroyed and forgotten.
 * @internal
 */
export class FleetCore {
  config: ScalerConfig;
  readonly clock: Clock;
  readonly book = new AgentBook();
  readonly scalers: ScalerRegistry;
  readonly gate: CapacityGate;
  readonly options: CoreOptions;
  readonly counters: ScalerCounters = {
    coldStarts: 0,
    warmHits: 0,
    warmSpawns: 0,
    spawnFailures: 0,
    pruned: 0,
    idleDestroyed: 0,
    reconciled: 0,
    drained: 0,
  };
  /** Spawn attempts in flight (`requestScale` and warm-pool spawns). */
  readonly attempts = new Set<Promise<unknown>>();
  /** Set by `shutdownAll()`: nothing new starts. */
  shuttingDown = false;
  globalDemandAt = Number.NEGATIVE_INFINITY;
  /** The state store's group commit, when a `stateStore` was given. */
  state: StateWriter | undefined;
  /** Metrics and spans, when the host passed a provider. */
  telemetry: ManagerTelemetry | undefined;
  readonly #events: EventRelay;

  constructor(
    config: ScalerConfig,
    clock: Clock,
    events: EventRelay,
    backends: readonly BackendEntry[],
    ledgers: PoolLedgers,
    options: CoreOptions,
  ) {
    this.config = config;
    this.clock = clock;
    this.#events = events;
    this.options = options;
    this.scalers = new ScalerRegistry(backends, (state) => this.gate.dropScope(state.scope));
    this.gate = new CapacityGate(this.book, ledgers, (record, pool, error) =>
      this.emitFor(
        record,
        'release-failed',
        `Releasing ${record.agentId} in pool "${pool}" failed`,
        {
          error,
        },
      ),
    );
  }

  get events(): EventRelay {
    return this.#events;
  }

  now(): number {
    return this.clock.now();
  }

  /** Track a spawn attempt until it settles (shutdown waits for them). */
  track<T>(attempt: Promise<T>): Promise<T> {
    this.attempts.add(attempt);
    const done = () => {
      this.attempts.delete(attempt);
    };
    attempt.then(done, done);
    return attempt;
  }

  /**
   * Stop tracking an agent and release everything it holds: in-memory caps at
   * once, the pool row unless a failed shutdown destroy kept it. Idempotent;
   * never rejects. Call it only once the agent no longer runs (or never ran).
   * `pools` narrows the release to those pools (the others hold no row).
   */
  forget(record: AgentRecord, pools?: readonly string[]): Promise<void> {
    if (!this.book.untrack(record)) return Promise.resolve();
    this.gate.releaseInMemory(record.agentId);
    this.scalers.retireIfDone(record.scaler);
    if (record.keepPoolRow) return Promise.resolve();
    record.released = this.gate.releasePool(record, pools);
    return record.released;
  }

  /** Undo a reservation that was refused before anything was written or spawned (no events). */
  rollback(record: AgentRecord): void {
    if (!this.book.untrack(record, false)) return;
    this.gate.releaseInMemory(record.agentId);
    this.scalers.retireIfDone(record.scaler);
  }

  /**
   * Begin destroying an agent that is not busy (or, with `force`, one that is).
   * Once the spawn has settled the backend's `destroy` runs and, when it
   * resolves, the agent is forgotten; before that, the spawn attempt destroys it
   * when the backend answers. Returns when this destroy attempt settled (the
   * agent's `gone` promise says when it is gone). Never rejects.
   */
  destroy(record: AgentRecord, reason: string, force = false): Promise<void> {
    if (record.state === 'gone') return Promise.resolve();
    if (record.state === 'destroying') return record.destroyCall ?? Promise.resolve();
    if ((record.state === 'busy' || record.state === 'draining') && !force) {
      throw new Error(`Refusing to destroy busy agent ${record.agentId}`);
    }
    this.book.transition(record, 'destroying');
    record.destroyReason = reason;
    this.emitFor(record, 'destroying', `Destroying ${record.agentId} (${reason})`, { reason });
    if (!record.spawnSettled) return Promise.resolve();
    return this.runDestroy(record);
  }

  /**
   * Drain an agent: a busy one takes no new job and is destroyed when its job
   * completes; any other is destroyed now. Resolves once the agent is gone and
   * the release of its pool rows has settled, so a caller that awaited it finds
   * the capacity free in the ledger (or the failed release reported).
   */
  drain(record: AgentRecord, reason: string): Promise<void> {
    if (record.state === 'busy') {
      this.book.transition(record, 'draining');
      record.destroyReason = reason;
      this.emitFor(record, 'draining', `${record.agentId} is draining (${reason})`, { reason });
    } else if (record.state !== 'draining') {
      void this.destroy(record, reason);
    }
    return whenGone(record).then(() => record.released);
  }

  /**
   * Call the backend's `destroy` (once at a time), then forget (or, for an
   * agent `shutdownAll()` already forgot, release its kept rows). Never rejects.
   */
  runDestroy(record: AgentRecord): Promise<void> {
    if (record.destroyCall !== undefined) return record.destroyCall;
    record.destroyFailed = false;
    const call = (async () => {
      try {
        await record.scaler.backend.destroy(record.agentId);
      } catch (error) {
        record.destroyFailed = true;
        this.emitFor(record, 'destroy-failed', `Destroying ${record.agentId} failed`, { error });
        return;
      } finally {
        record.destroyCall = undefined;
      }
      if (record.destroyReason === 'idle') this.counters.idleDestroyed++;
      else if (record.destroyReason !== 'pruned') this.counters.drained++;
      this.emitFor(record, 'destroyed', `${record.agentId} destroyed (${record.destroyReason})`, {
        reason: record.destroyReason,
      });
      if (this.book.get(record.agentId) === record) {
        await this.forget(record);
      } else if (!record.disconnected) {
        // shutdownAll() forgot it unconfirmed, keeping its rows: stopped now, so they go.
        record.released = this.gate.releasePool(record);
        await record.released;
      }
    })();
    record.destroyCall = call;
    return call;
  }

  /** A manager event about one agent. */
  emitFor<K extends ManagerEventKind>(
    record: AgentRecord,
    kind: K,
    message: string,
    ...data: EventDataArg<K>
  ): void {
    const event = {
      source: 'manager',
      kind,
      agentId: record.agentId,
      scaler: record.scaler.name,
      at: this.now(),
      message: withReason(message, data[0]),
    } as ScalerEvent;
    if (data.length > 0) event.data = data[0];
    this.#events.dispatch(record.mailbox, event);
  }

  /** An event about no single agent (`agentId` is empty). */
  emitGeneral<K extends ManagerEventKind>(
    scaler: string,
    kind: K,
    message: string,
    data: ScalerEventData[K],
  ): void {
    this.#events.general({
      source: 'manager',
      kind,
      agentId: '',
      scaler,
      at: this.now(),
      message: withReason(message, data),
      data,
    } as ScalerEvent);
  }

  /** A backend's own event about an agent it runs. */
  backendEvent(agentId: string, scaler: string, input: BackendEventInput): void {
    const event: ScalerEvent = {
      source: 'backend',
      kind: String(input?.kind ?? 'event'),
      agentId,
      scaler,
      at: this.now(),
    };
    if (input?.message !== undefined) event.message = input.message;
    if (input?.data !== undefined) event.data = input.data;
    this.#events.dispatch(this.book.get(agentId)?.mailbox, event);
  }

  // The ledger says rows of ours in `pool` were removed while this instance
  // stalled (or by an operator): those agents run without a pool reservation
  // now. The host decides (destroy, or let them finish); we say which ones.
  reservationsLost(pool: string, except: string, error: LedgerLeaseExpiredError): AgentRecord[] {
    const named = new Set(error.agentIds);
    const lost: AgentRecord[] = [];
    for (const record of this.book.values()) {
      if (record.agentId === except || !record.shares.some((share) => share.pool === pool))
        continue;
      // A ledger that cannot name the rows (NATS) means all of ours may be gone.
      if (named.size > 0 && !named.has(record.agentId)) continue;
      lost.push(record);
      this.emitFor(
        record,
        'reservation-lost',
        `The pool reservation of ${record.agentId} in "${pool}" is gone (${named.size > 0 ? 'removed' : 'possibly removed'} while this instance's lease had lapsed); its capacity may now be given to others`,
        { pool, certain: named.size > 0, error },
      );
    }
    return lost;
  }
}

/**
 * An event's message with the reason its `data.error` carries (the error's
 * message), so a log of messages alone says why: "Releasing a-1 in pool
 * "gpu-box" failed: connection refused".
 */
function withReason(message: string, data: unknown): string {
  if (typeof data !== 'object' || data === null || !('error' in data)) return message;
  const error = (data as { error?: unknown }).error;
  if (error === undefined || error === null) return message;
  let reason: string;
  if (error instanceof Error) reason = error.message;
  else if (
    typeof error === 'object' &&
    typeof (error as { message?: unknown }).message === 'string'
  )
    reason = (error as { message: string }).message;
  else reason = String(error);
  reason = reason.trim();
  if (reason === '' || message.includes(reason)) return message;
  return `${message}: ${reason}`;
}
