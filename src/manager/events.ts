import type { LeaseInfo } from '../ledger/types.js';
import type { AgentState, UnconfirmedAgent, WarmPoolHold } from './types.js';

/**
 * The data of each kind of manager event, by kind: the one list of the kinds
 * the manager emits (a `ScalerEvent` with `source: 'manager'` has one of these
 * kinds, and its `data` is the type given here; `undefined` means no `data`).
 * Events about one agent have its `agentId`; the others (marked "general")
 * have an empty `agentId`, and `scaler` empty when they concern no one scaler.
 */
export interface ScalerEventData {
  /** The spawn was decided and its capacity reserved; the backend is asked next. */
  spawning: {
    /** The job it is spawned for (absent for a warm-pool spawn). */
    jobId?: string;
    /** True for a warm-pool spawn. */
    warm: boolean;
  };
  /** The backend's `spawn` resolved. */
  spawned: undefined;
  /** The reservation, the state store or the backend's `spawn` failed; everything was rolled back. */
  'spawn-failed': {
    /** `reserve` (the ledger), `state` (the state store) or `spawn` (the backend). */
    stage: 'reserve' | 'spawn' | 'state';
    /** What was thrown. */
    error: unknown;
    /** The pool whose reservation failed, when the agent spans several. */
    pool?: string;
  };
  /** The agent registered (`onAgentRegistered`). */
  registered: {
    /** The labels it registered with. */
    labels: string[];
  };
  /** The agent took a job. */
  busy: {
    /** The job's run. */
    runId: string;
    /** The job. */
    jobId: string;
  };
  /** The agent finished its job and is idle. */
  idle: undefined;
  /** The agent takes no new job and is destroyed when its job completes. */
  draining: {
    /** Why (`drain`, `lifetime`, `excess`, `reservation-lost`, ...). */
    reason: string;
  };
  /** The manager began destroying the agent. */
  destroying: {
    /** Why (`idle`, `pruned`, `drain`, `max-jobs`, `shutdown`, `lease-at-risk`, ...). */
    reason: string;
  };
  /** The backend's `destroy` resolved. */
  destroyed: {
    /** Why it was destroyed (the `destroying` reason). */
    reason?: string;
  };
  /** The backend's `destroy` rejected (retried); general for an unrecorded agent recovery destroys. */
  'destroy-failed': {
    /** What `destroy` threw. */
    error: unknown;
    /** The agent, in the general event about an unrecorded agent. */
    agentId?: string;
  };
  /** Releasing the agent's pool row failed (retried). */
  'release-failed': {
    /** What the ledger threw. */
    error: unknown;
  };
  /** `onAgentDisconnected` was called. */
  disconnected: undefined;
  /** The agent did not register within `registrationTimeoutMs`. */
  pruned: undefined;
  /** `reconcile()` or recovery found the agent no longer listed by its backend. */
  gone: undefined;
  /** `correlateAgentToJob` on an agent being destroyed: the job was refused. */
  'job-refused': {
    /** The job's run. */
    runId: string;
    /** The refused job. */
    jobId: string;
  };
  /** Another agent took the job this one was spawning for. */
  'job-taken': {
    /** The job. */
    jobId: string;
    /** The agent that took it. */
    by: string;
  };
  /** The events buffered before correlation overflowed. */
  'events-dropped': {
    /** How many were dropped. */
    dropped: number;
  };
  /** The agent's pool row is gone. */
  'reservation-lost': {
    /** The pool. */
    pool: string;
    /** False when the ledger could not name the rows it removed (all of ours may be gone). */
    certain: boolean;
    /** What the ledger reported. */
    error?: unknown;
  };
  /** A lost pool row was written back. */
  'reservation-restored': {
    /** The pool. */
    pool: string;
  };
  /** A lost pool row could not be written back (see `policies.reservationLost`). */
  'reservation-restore-failed': {
    /** The pool. */
    pool: string;
    /** Why (a refusal or what the ledger threw). */
    error: unknown;
  };
  /** A hook called by `onConfigAck` threw or rejected. */
  'config-ack-failed': {
    /** What it threw. */
    error: unknown;
    /** The backend's `onConfigAck` or the `onConfigAck` option. */
    hook: 'backend' | 'option';
  };
  /** Recovery tracks the stored agent again, in its stored state. */
  recovered: {
    /** Its stored state. */
    state: Exclude<AgentState, 'gone'>;
    /** Its stored job. */
    jobId?: string;
  };
  /** General: a maintenance pass failed. */
  'maintenance-failed': {
    /** What it threw. */
    error: unknown;
  };
  /** General: the scaler's spawns failed in a row; new spawns wait. */
  'backoff-opened': {
    /** Consecutive failures. */
    failures: number;
    /** How long new spawns wait, in ms. */
    retryAfterMs: number;
    /** The last failure. */
    error: unknown;
  };
  /** General: an agent of the scaler registered; its backoff ended. */
  'backoff-closed': Record<string, never>;
  /** General: a state store write failed (retried with the next commit). */
  'state-write-failed': {
    /** What the store threw. */
    error: unknown;
    /** The agents whose records were in the failed commit. */
    agentIds: string[];
  };
  /** General: the recovery `start()` ran failed. */
  'recovery-failed': {
    /** What it threw. */
    error: unknown;
  };
  /** General: a sweep removed what agents no longer alive left behind. */
  swept: {
    /** The sweep's name. */
    sweep: string;
    /** The agents whose leftovers it removed. */
    removedAgents: readonly string[];
  };
  /** General: a sweep failed. */
  'sweep-failed': {
    /** The sweep's name. */
    sweep: string;
    /** What it threw. */
    error: unknown;
  };
  /** General: sweeps skipped because the live agents are unknown. */
  'sweeps-skipped': {
    /** The sweeps that did not run. */
    sweeps: string[];
  };
  /** General: a backend's `shutdown()` failed. */
  'shutdown-failed': {
    /** What it threw. */
    error: unknown;
  };
  /** General: `shutdownAll()` could not confirm that these agents stopped; their pool rows are kept. */
  'shutdown-incomplete': {
    /** The agents, with what was not confirmed. */
    unconfirmed: UnconfirmedAgent[];
  };
  /** General: the warm pool of the scaler cannot resolve its label set's resources. */
  'warm-pool-failed': {
    /** What resolving threw. */
    error: unknown;
  };
  /** General: the warm pool of the scaler is held below its target: why and until when. */
  'warm-pool-held': WarmPoolHold;
  /** General: the hold ended. */
  'warm-pool-resumed': {
    /** The reason of the hold that ended. */
    reason: WarmPoolHold['reason'];
  };
  /** General: the ledger lease is at risk. */
  'lease-at-risk': {
    /** The lease as the ledger last saw it (`deadline`, `confirmedAt`, ...), when it has one. */
    lease: LeaseInfo | undefined;
    /** The manager's `policies.leaseLost`. */
    policy: 'stop-agents' | 'stop-spawning' | 'report';
    /** The agents `stop-agents` destroys now (empty under the other policies and at renewal). */
    agents: string[];
    /** The pools this ledger serves, when the manager has several ledgers. */
    pools?: string[];
    /** What the ledger reported as the cause, when it did. */
    error?: unknown;
  };
  /** General: the ledger lease is lost. */
  'lease-lost': {
    /** The lease as the ledger last saw it (`deadline`, `confirmedAt`, ...), when it has one. */
    lease: LeaseInfo | undefined;
    /** The manager's `policies.leaseLost`. */
    policy: 'stop-agents' | 'stop-spawning' | 'report';
    /** The agents `stop-agents` destroys now (empty under the other policies and at renewal). */
    agents: string[];
    /** The pools this ledger serves, when the manager has several ledgers. */
    pools?: string[];
    /** What the ledger reported as the cause, when it did. */
    error?: unknown;
  };
  /** General: the ledger lease was renewed again. */
  'lease-renewed': {
    /** The lease as the ledger last saw it (`deadline`, `confirmedAt`, ...), when it has one. */
    lease: LeaseInfo | undefined;
    /** The manager's `policies.leaseLost`. */
    policy: 'stop-agents' | 'stop-spawning' | 'report';
    /** The agents `stop-agents` destroys now (empty under the other policies and at renewal). */
    agents: string[];
    /** The pools this ledger serves, when the manager has several ledgers. */
    pools?: string[];
    /** What the ledger reported as the cause, when it did. */
    error?: unknown;
  };
}

/** Every kind of manager event, in the order {@link ScalerEventData} declares them. */
export const SCALER_EVENT_KINDS = Object.freeze([
  'spawning',
  'spawned',
  'spawn-failed',
  'registered',
  'busy',
  'idle',
  'draining',
  'destroying',
  'destroyed',
  'destroy-failed',
  'release-failed',
  'disconnected',
  'pruned',
  'gone',
  'job-refused',
  'job-taken',
  'events-dropped',
  'reservation-lost',
  'reservation-restored',
  'reservation-restore-failed',
  'config-ack-failed',
  'recovered',
  'maintenance-failed',
  'backoff-opened',
  'backoff-closed',
  'state-write-failed',
  'recovery-failed',
  'swept',
  'sweep-failed',
  'sweeps-skipped',
  'shutdown-failed',
  'shutdown-incomplete',
  'warm-pool-failed',
  'warm-pool-held',
  'warm-pool-resumed',
  'lease-at-risk',
  'lease-lost',
  'lease-renewed',
] as const satisfies readonly (keyof ScalerEventData)[]);

// Compile-time check that the list above names every key of ScalerEventData.
type MissingKind = Exclude<keyof ScalerEventData, (typeof SCALER_EVENT_KINDS)[number]>;
const _everyKindListed: [MissingKind] extends [never] ? true : MissingKind = true;
void _everyKindListed;

/**
 * A lifecycle or backend event about one agent, discriminated by `source` and
 * then `kind`. Manager events (`source: 'manager'`) have a kind of
 * {@link ScalerEventData} and its `data`; events a backend reports through
 * `SpawnRequest.emit` have `source: 'backend'`, the backend's own `kind` and
 * `data`.
 *
 * @example
 * ```ts
 * import type { ScalerEvent } from 'scaler-primitives/manager';
 *
 * function log(event: ScalerEvent): void {
 *   if (event.source === 'backend') return;
 *   switch (event.kind) {
 *     case 'spawn-failed':
 *       console.error(event.agentId, event.data.stage, event.data.error);
 *       break;
 *     case 'destroyed':
 *       console.log(event.agentId, 'destroyed', event.data.reason);
 *       break;
 *   }
 * }
 * ```
 */
export type ScalerEvent =
  | {
      [K in keyof ScalerEventData]: {
        /** Produced by the manager. */
        source: 'manager';
        /** What happened. */
        kind: K;
        /** The agent; empty for a general event. */
        agentId: string;
        /** The scaler; empty when the event concerns no one scaler. */
        scaler: string;
        /** When, in epoch milliseconds (from the manager's clock). */
        at: number;
        /** A human-readable sentence. */
        message?: string;
      } & (ScalerEventData[K] extends undefined
        ? {
            /** No facts for this kind. */
            data?: undefined;
          }
        : {
            /** The facts of this kind. */
            data: ScalerEventData[K];
          });
    }[keyof ScalerEventData]
  | {
      /** Reported by the agent's backend through `SpawnRequest.emit`. */
      source: 'backend';
      /** The backend's own kind. */
      kind: string;
      /** The agent. */
      agentId: string;
      /** Its scaler. */
      scaler: string;
      /** When, in epoch milliseconds (from the manager's clock). */
      at: number;
      /** A human-readable sentence. */
      message?: string;
      /** The backend's facts. */
      data?: Record<string, unknown>;
    };

/** The kind of a manager event. @internal */
export type ManagerEventKind = keyof ScalerEventData;

/** The data argument of an emit of kind `K`: required when the kind has data. @internal */
export type EventDataArg<K extends ManagerEventKind> = ScalerEventData[K] extends undefined
  ? []
  : [data: ScalerEventData[K]];

/** Where one agent's events go: relayed once it is correlated with a job, buffered before. */
export interface AgentMailbox {
  runId: string | undefined;
  correlatedJobId: string | undefined;
  buffer: ScalerEvent[];
  dropped: number;
}

/** A fresh, uncorrelated mailbox. */
export function newMailbox(): AgentMailbox {
  return { runId: undefined, correlatedJobId: undefined, buffer: [], dropped: 0 };
}

/**
 * Routes events to the host's callbacks: every event to `onEvent` as it happens, an
 * agent's events to `onScalerEvent` once the agent is correlated with a job, and until
 * then into its bounded buffer (oldest dropped first, and counted).
 *
 * A host callback that throws is ignored: it must not break the manager's books.
 * @internal
 */
export class EventRelay {
  readonly #onEvent: ((event: ScalerEvent) => void) | undefined;
  readonly #onScalerEvent: ((runId: string, jobId: string, event: ScalerEvent) => void) | undefined;
  readonly #max: number;

  constructor(
    onEvent: ((event: ScalerEvent) => void) | undefined,
    onScalerEvent: ((runId: string, jobId: string, event: ScalerEvent) => void) | undefined,
    maxBuffered: number,
  ) {
    this.#onEvent = onEvent;
    this.#onScalerEvent = onScalerEvent;
    this.#max = maxBuffered;
  }

  /** Deliver an event, into `mailbox` when it concerns a tracked agent. */
  dispatch(mailbox: AgentMailbox | undefined, event: ScalerEvent): void {
    safeCall(() => this.#onEvent?.(event));
    if (mailbox === undefined) return;
    if (mailbox.runId !== undefined && mailbox.correlatedJobId !== undefined) {
      this.#relay(mailbox.runId, mailbox.correlatedJobId, event);
      return;
    }
    if (this.#max === 0) {
      mailbox.dropped++;
      return;
    }
    if (mailbox.buffer.length >= this.#max) {
      mailbox.buffer.shift();
      mailbox.dropped++;
    }
    mailbox.buffer.push(event);
  }

  /**
   * Correlate a mailbox with a job and flush what it buffered, preceded by an
   * `events-dropped` event (built by `droppedEvent`) when the buffer overflowed.
   */
  correlate(
    mailbox: AgentMailbox,
    runId: string,
    jobId: string,
    droppedEvent: (dropped: number) => ScalerEvent,
  ): void {
    mailbox.runId = runId;
    mailbox.correlatedJobId = jobId;
    const buffered = mailbox.buffer.splice(0);
    if (mailbox.dropped > 0) {
      const dropped = mailbox.dropped;
      mailbox.dropped = 0;
      this.#relay(runId, jobId, droppedEvent(dropped));
    }
    for (const event of buffered) this.#relay(runId, jobId, event);
  }

  /** End the correlation: later events are buffered again. */
  uncorrelate(mailbox: AgentMailbox): void {
    mailbox.runId = undefined;
    mailbox.correlatedJobId = undefined;
  }

  /** An event about no single agent: to `onEvent` only. */
  general(event: ScalerEvent): void {
    safeCall(() => this.#onEvent?.(event));
  }

  #relay(runId: string, jobId: string, event: ScalerEvent): void {
    safeCall(() => this.#onScalerEvent?.(runId, jobId, event));
  }
}

function safeCall(fn: () => void): void {
  try {
    fn();
  } catch {
    // Ignored on purpose: see the class comment.
  }
}
