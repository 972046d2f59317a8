/**
 * This instance's own lease: a heartbeat key (`lease.<id>`) kept fresh by a
 * compare-and-set on its own revision, so that a peer's fence (an end marker
 * written at the revision it judged expired) and a late refresh cannot both
 * win. A lease found fenced is lapsed for good; the next operation takes a new
 * one.
 */
import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import type { KV } from '@nats-io/kv';
import type { Clock, ClockTimer } from '../../clock.js';
import { type CasWriter, isRevisionConflict } from './cas.js';
import { leaseKey } from './keys.js';
import type { ServerClock } from './liveness.js';
import { hasEnded } from './peer-leases.js';

type LeaseStatus = 'live' | 'lapsed';

interface Lease {
  id: string;
  key: string;
  revision: number;
  /** Monotonic time the last acknowledged heartbeat was sent. */
  sentAt: number;
  status: LeaseStatus;
}

function newLease(sentAt: number): Lease {
  const id = randomUUID();
  return { id, key: leaseKey(id), revision: 0, sentAt, status: 'live' };
}

/** What a heartbeat key holds once its lease has ended: closed by its owner or fenced by a peer. */
export function endBody(instanceId: string, how: 'closed' | 'fenced'): string {
  return JSON.stringify({ ended: how, by: instanceId, host: hostname() });
}

/** What {@link OwnLease} works with. */
export interface OwnLeaseOptions {
  kv: KV;
  cas: CasWriter;
  instanceId: string;
  bootId: string;
  leaseMs: number;
  /** This host's monotonic clock, which times the heartbeats. */
  monotonic: () => number;
  /** Learns the server's time from each acknowledged heartbeat. */
  serverClock: ServerClock;
  /** Runs the heartbeat timer. */
  timers: Clock;
  /** Called once when the lease is found fenced. */
  onLapse: () => void;
  /** Called with the old id once a lapsed lease has been replaced. */
  onRenewed: (lostLeaseId: string) => void;
}

/** This instance's lease. */
export class OwnLease {
  readonly #options: OwnLeaseOptions;
  #lease: Lease;
  #beating: Promise<void> | undefined;
  #renewing: Promise<void> | undefined;
  #timer: ClockTimer | undefined;
  #stopped = false;

  constructor(options: OwnLeaseOptions) {
    this.#options = options;
    this.#lease = newLease(options.monotonic());
  }

  /** The current lease id, written into this instance's rows. */
  get id(): string {
    return this.#lease.id;
  }

  /** Whether the lease is live and its last heartbeat was acknowledged within half the window. */
  get confirmed(): boolean {
    return (
      this.#lease.status === 'live' &&
      this.#options.monotonic() - this.#lease.sentAt < this.#options.leaseMs / 2
    );
  }

  /** Take a new lease: a fresh id and a heartbeat key created for it. */
  async open(): Promise<void> {
    const { cas, monotonic } = this.#options;
    const lease = newLease(monotonic());
    const sent = monotonic();
    const revision = await cas.write(lease.key, this.#heartbeatBody(), 0);
    lease.revision = revision;
    lease.sentAt = sent;
    lease.status = 'live';
    this.#lease = lease;
    await this.#anchorClock(lease.key, revision, monotonic()).catch(() => {});
  }

  /** Refresh the heartbeat every third of the window (at least every 100 ms apart). */
  startHeartbeat(): void {
    this.#timer = this.#options.timers.setInterval(
      () => {
        this.beat().catch(() => {});
      },
      Math.max(100, Math.floor(this.#options.leaseMs / 3)),
    );
    this.#timer.unref();
  }

  /**
   * Refresh the heartbeat, as a compare-and-set on its own revision: when a peer
   * fenced it, the refresh fails and the lease is lapsed for good.
   */
  beat(): Promise<void> {
    if (this.#lease.status !== 'live' || this.#stopped) return Promise.resolve();
    this.#beating ??= (async () => {
      const { cas, kv, monotonic } = this.#options;
      const lease = this.#lease;
      const sent = monotonic();
      try {
        const revision = await cas.write(lease.key, this.#heartbeatBody(), lease.revision);
        const acked = monotonic();
        lease.revision = revision;
        lease.sentAt = sent;
        await this.#anchorClock(lease.key, revision, acked).catch(() => {});
      } catch (error) {
        if (!isRevisionConflict(error)) throw error;
        // The revision moved. Only a peer's end marker (or an operator's delete)
        // means the lease is lost; a heartbeat body is our own earlier refresh
        // that landed although its answer did not arrive: carry on from it.
        const entry = await kv.get(lease.key);
        if (entry !== null && entry.operation === 'PUT' && !hasEnded(entry)) {
          lease.revision = Math.max(lease.revision, entry.revision);
          return;
        }
        if (lease === this.#lease && lease.status === 'live') {
          lease.status = 'lapsed';
          this.#options.onLapse();
        }
      }
    })().finally(() => {
      this.#beating = undefined;
    });
    return this.#beating;
  }

  /**
   * Before acting on a pool: a heartbeat older than half the window (a stall,
   * a slow server) is refreshed first; a lapsed lease is replaced.
   */
  async refresh(): Promise<void> {
    if (
      this.#lease.status === 'live' &&
      this.#options.monotonic() - this.#lease.sentAt > this.#options.leaseMs / 2
    ) {
      // A failure here is retried by the caller's loop until its deadline.
      await this.beat();
    }
    if (this.#lease.status === 'lapsed') {
      const lost = this.#lease.id;
      this.#renewing ??= this.open()
        .then(() => this.#options.onRenewed(lost))
        .finally(() => {
          this.#renewing = undefined;
        });
      await this.#renewing;
    }
  }

  /** Stop the heartbeat timer; no refresh starts after this. */
  stop(): void {
    this.#stopped = true;
    this.#options.timers.clearInterval(this.#timer);
    this.#timer = undefined;
  }

  /** Wait for a refresh in flight, then end the lease with an end marker (best effort). */
  async end(): Promise<void> {
    this.stop();
    await this.#beating?.catch(() => {});
    if (this.#lease.status === 'live') {
      await this.#options.cas
        .write(this.#lease.key, endBody(this.#options.instanceId, 'closed'), this.#lease.revision)
        .catch(() => {});
    }
  }

  #heartbeatBody(): string {
    const { instanceId, bootId, leaseMs } = this.#options;
    return JSON.stringify({ instanceId, host: hostname(), pid: process.pid, bootId, leaseMs });
  }

  // Learn the server's time from the heartbeat just written.
  async #anchorClock(key: string, revision: number, ackedAt: number): Promise<void> {
    const entry = await this.#options.kv.get(key, { revision });
    if (entry) this.#options.serverClock.anchor(entry.created.getTime(), ackedAt);
  }
}
