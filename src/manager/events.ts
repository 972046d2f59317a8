/**
 * A lifecycle or backend event about one agent. Manager events have `source: 'manager'`;
 * events a backend reports through `emit` have `source: 'backend'`.
 */
export interface ScalerEvent {
  /** Who produced the event. */
  source: 'manager' | 'backend';
  /**
   * For the manager: `spawning`, `spawned`, `spawn-failed`, `registered`, `busy`, `idle`,
   * `disconnected`, `pruned`, `destroyed`, `destroy-failed`, `release-failed`, `gone`
   * (reconcile), `events-dropped` (the pre-correlation buffer overflowed),
   * `reservation-lost` (the ledger removed this agent's pool row while this instance's
   * lease had lapsed: the agent runs without a pool reservation; `data.certain` is false
   * when the ledger could not say which rows it removed), `job-taken` (another agent took
   * the job this one was spawning for: `data: { jobId, by }`); and, with an
   * empty `agentId`, `maintenance-failed`, `warm-pool-failed`, `shutdown-failed`,
   * `warm-pool-held` (`data` is a `WarmPoolHold`: why and until when),
   * `warm-pool-resumed` (`data: { reason }`: the hold that ended),
   * `lease-at-risk`, `lease-lost` and `lease-renewed` (the ledger lease;
   * `data: { lease, policy, agents }`, see `LeaseLostPolicy`), and
   * from `reconcile()`'s sweeps `swept`, `sweep-failed`, `sweeps-skipped`. For a backend: its own kind.
   */
  kind: string;
  /** The agent. */
  agentId: string;
  /** The scaler. */
  scaler: string;
  /** When, in epoch milliseconds (from the manager's clock). */
  at: number;
  /** A human-readable sentence. */
  message?: string;
  /** Extra facts (e.g. `{ dropped: 12 }` for `events-dropped`, `{ error }` for failures). */
  data?: Record<string, unknown>;
}

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
