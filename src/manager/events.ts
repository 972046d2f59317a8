import type { ScalerEvent } from './agent-types.js';

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
