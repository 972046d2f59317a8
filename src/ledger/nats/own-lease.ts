/**
 * This instance's own lease: a heartbeat key (`lease.<id>`) kept fresh by a
 * compare-and-set on its own revision, so that a peer's fence (an end marker
 * written at the revision it judged expired) and a late refresh cannot both
 * win. A lease found fenced is lost for good; a new one replaces it.
 *
 * The lease knows when a heartbeat was last confirmed (`confirmedAt`, the
 * instant on the ledger clock that heartbeat was sent), its deadline and its
 * health, and says so from its own timers: `lease-at-risk` at two thirds of
 * the window without a confirmation, `lease-lost` at the deadline (or at once
 * when it is found fenced), `lease-renewed` at the next confirmation.
 */
import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import type { KV } from '@nats-io/kv';
import type { Clock, ClockTimer } from '../../clock.js';
import type { LedgerTelemetry } from '../telemetry.js';
import type { LeaseEvent, LeaseHealth, LeaseInfo } from '../types.js';
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
  /** Ledger clock (epoch ms) when the last acknowledged heartbeat was sent; undefined before the first. */
  confirmedAt: number | undefined;
  status: LeaseStatus;
}

function newLease(): Lease {
  const id = randomUUID();
  return {
    id,
    key: leaseKey(id),
    revision: 0,
    sentAt: Number.NEGATIVE_INFINITY,
    confirmedAt: undefined,
    status: 'live',
  };
}

/** What a heartbeat key holds once its lease has ended: closed by its owner or fenced by a peer. */
export function endBody(instanceId: string, how: 'closed' | 'fenced'): string {
  return JSON.stringify({ ended: how, by: instanceId, host: hostname() });
}

/** Thrown before a write when the lease was not confirmed recently enough (retried until the caller's deadline). */
export class LeaseNotConfirmed extends Error {
  constructor(readonly health: LeaseHealth) {
    super(`this instance's lease is ${health} and not confirmed by the server recently enough`);
    this.name = 'LeaseNotConfirmed';
  }
}

/** What {@link OwnLease} works with. */
export interface OwnLeaseOptions {
  kv: KV;
  cas: CasWriter;
  bucket: string;
  instanceId: string;
  bootId: string;
  leaseMs: number;
  /** What peers add to the deadline before they take rows. */
  marginMs: number;
  /** This host's monotonic clock, which times the heartbeats and the write gate. */
  monotonic: () => number;
  /** Learns the server's time from each acknowledged heartbeat. */
  serverClock: ServerClock;
  /** The ledger clock: `confirmedAt`, the heartbeat timer and the lease event timers. */
  timers: Clock;
  telemetry: LedgerTelemetry | undefined;
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
  #atRiskTimer: ClockTimer | undefined;
  #lostTimer: ClockTimer | undefined;
  #stopped = false;
  /** The health last reported by an event (or 'held' once first confirmed). */
  #reported: LeaseHealth = 'none';
  #lastError: unknown;
  readonly #listeners = new Set<(event: LeaseEvent) => void>();
  /** Monotonic ack time of the first confirmation of the current unbroken streak. */
  #healthySince: number | undefined;
  /** Monotonic ack time of the last confirmation. */
  #lastAck = Number.NEGATIVE_INFINITY;

  constructor(options: OwnLeaseOptions) {
    this.#options = options;
    this.#lease = newLease();
  }

  /** The current lease id, written into this instance's rows. */
  get id(): string {
    return this.#lease.id;
  }

  /** Whether the lease is live and its last heartbeat was sent and acknowledged within `ms`. */
  confirmedWithin(ms: number): boolean {
    return this.#lease.status === 'live' && this.#options.monotonic() - this.#lease.sentAt < ms;
  }

  /** Whether the lease is live and was confirmed within a third of the window (the write gate). */
  get confirmed(): boolean {
    return this.confirmedWithin(this.#options.leaseMs / 3);
  }

  /**
   * The start (monotonic ms) of the current unbroken streak of confirmed
   * heartbeats, or undefined when the streak is broken (a failed heartbeat,
   * or no confirmation for half the window: this process stalled or is cut off).
   */
  healthySince(): number | undefined {
    if (this.#healthySince === undefined || this.#lease.status !== 'live') return undefined;
    if (this.#options.monotonic() - this.#lastAck > this.#options.leaseMs / 2) return undefined;
    return this.#healthySince;
  }

  /** The lease as this instance knows it now. */
  info(): LeaseInfo {
    const { leaseMs, marginMs, bucket } = this.#options;
    const lease = this.#lease;
    const confirmedAt = lease.confirmedAt;
    return {
      health: this.#health(lease),
      leaseId: lease.id,
      confirmedAt,
      deadline: confirmedAt === undefined ? undefined : confirmedAt + leaseMs,
      leaseMs,
      marginMs,
      location: { kind: 'nats', bucket, key: lease.key },
    };
  }

  /** Call `listener` on every lease event; returns the function that removes it. */
  onEvent(listener: (event: LeaseEvent) => void): () => void {
    if (typeof listener !== 'function') {
      throw new TypeError(`Expected \`listener\` to be a function, got \`${typeof listener}\``);
    }
    const wrapped = (event: LeaseEvent) => listener(event);
    this.#listeners.add(wrapped);
    return () => {
      this.#listeners.delete(wrapped);
    };
  }

  #health(lease: Lease): LeaseHealth {
    if (lease.confirmedAt === undefined) return lease.status === 'lapsed' ? 'lost' : 'none';
    if (lease.status === 'lapsed') return 'lost';
    const age = this.#options.timers.now() - lease.confirmedAt;
    if (age >= this.#options.leaseMs) return 'lost';
    return age >= (2 * this.#options.leaseMs) / 3 ? 'at-risk' : 'held';
  }

  /** Take a new lease: a fresh id and a heartbeat key created for it. */
  async open(): Promise<void> {
    const { cas, monotonic, timers } = this.#options;
    const lease = newLease();
    const sent = monotonic();
    const sentClock = timers.now();
    try {
      lease.revision = await cas.write(lease.key, this.#heartbeatBody(), 0);
    } catch (error) {
      this.#broken(error);
      throw error;
    }
    this.#lease = lease;
    const acked = monotonic();
    this.#confirm(lease, sent, sentClock, acked);
    await this.#anchorClock(lease.key, lease.revision, acked, sent).catch(() => {});
  }

  /** Refresh the heartbeat every third of the window (at least every 100 ms apart). */
  startHeartbeat(): void {
    this.#timer = this.#options.timers.setInterval(
      () => {
        const lapsed = this.#lease.status === 'lapsed';
        (lapsed ? this.#renew() : this.beat()).catch(() => {});
      },
      Math.max(100, Math.floor(this.#options.leaseMs / 3)),
    );
    this.#timer.unref();
  }

  /**
   * Refresh the heartbeat, as a compare-and-set on its own revision: when a peer
   * fenced it, the refresh fails and the lease is lost for good.
   */
  beat(): Promise<void> {
    if (this.#lease.status !== 'live' || this.#stopped) return Promise.resolve();
    this.#beating ??= (async () => {
      const { cas, kv, monotonic, timers } = this.#options;
      const lease = this.#lease;
      const sent = monotonic();
      const sentClock = timers.now();
      try {
        const revision = await cas.write(lease.key, this.#heartbeatBody(), lease.revision);
        const acked = monotonic();
        lease.revision = revision;
        if (lease === this.#lease && lease.status === 'live') {
          this.#confirm(lease, sent, sentClock, acked);
        }
        await this.#anchorClock(lease.key, revision, acked, sent).catch(() => {});
      } catch (error) {
        this.#broken(error);
        if (!isRevisionConflict(error)) throw error;
        // The revision moved. Only a peer's end marker (or an operator's delete)
        // means the lease is lost; a heartbeat body is our own earlier refresh
        // that landed although its answer did not arrive: carry on from it.
        const entry = await kv.get(lease.key);
        if (entry !== null && entry.operation === 'PUT' && !hasEnded(entry)) {
          lease.revision = Math.max(lease.revision, entry.revision);
          return;
        }
        if (lease === this.#lease && lease.status === 'live') this.#lapse(lease);
      }
    })().finally(() => {
      this.#beating = undefined;
    });
    return this.#beating;
  }

  /**
   * Before acting on a pool: a lapsed lease is replaced, and a heartbeat older
   * than a third of the window (a stall, a slow server) is refreshed first.
   *
   * @throws LeaseNotConfirmed when the lease is still not confirmed within a
   *   third of the window (the server did not acknowledge the refresh).
   */
  async refresh(): Promise<void> {
    if (this.#lease.status === 'lapsed') await this.#renew();
    if (!this.confirmed) await this.beat();
    if (this.#lease.status === 'lapsed') await this.#renew();
    if (!this.confirmed) throw new LeaseNotConfirmed(this.#health(this.#lease));
  }

  #renew(): Promise<void> {
    if (this.#stopped) return Promise.resolve();
    const lost = this.#lease.id;
    this.#renewing ??= this.open()
      .then(() => this.#options.onRenewed(lost))
      .finally(() => {
        this.#renewing = undefined;
      });
    return this.#renewing;
  }

  /** Stop the heartbeat and event timers; no refresh starts after this. */
  stop(): void {
    this.#stopped = true;
    const { timers } = this.#options;
    timers.clearInterval(this.#timer);
    timers.clearTimeout(this.#atRiskTimer);
    timers.clearTimeout(this.#lostTimer);
    this.#timer = this.#atRiskTimer = this.#lostTimer = undefined;
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

  // A heartbeat sent at `sent` (monotonic) / `sentClock` (ledger clock) was acknowledged at `acked`.
  #confirm(lease: Lease, sent: number, sentClock: number, acked: number): void {
    if (sent < lease.sentAt) return;
    lease.sentAt = sent;
    lease.confirmedAt = sentClock;
    if (this.#healthySince === undefined || acked - this.#lastAck > this.#options.leaseMs / 2) {
      this.#healthySince = acked;
    }
    this.#lastAck = acked;
    const before = this.#reported;
    this.#reported = 'held';
    if (before === 'at-risk' || before === 'lost') this.#emit('lease-renewed');
    this.#schedule(lease);
  }

  // A heartbeat failed: the streak of confirmations is broken.
  #broken(error: unknown): void {
    this.#healthySince = undefined;
    this.#lastError = error;
  }

  // The lease was found fenced (or deleted): lost for good, whatever its deadline said.
  #lapse(lease: Lease): void {
    lease.status = 'lapsed';
    this.#healthySince = undefined;
    const { timers } = this.#options;
    timers.clearTimeout(this.#atRiskTimer);
    timers.clearTimeout(this.#lostTimer);
    if (this.#reported !== 'lost') {
      this.#reported = 'lost';
      this.#emit('lease-lost');
    }
    this.#options.onLapse();
  }

  // Timers for the at-risk and lost instants of the confirmation just recorded.
  #schedule(lease: Lease): void {
    if (this.#stopped || lease.confirmedAt === undefined) return;
    const { timers, leaseMs } = this.#options;
    timers.clearTimeout(this.#atRiskTimer);
    timers.clearTimeout(this.#lostTimer);
    const confirmedAt = lease.confirmedAt;
    // Each timer re-arms itself if it fires before its instant (timer and clock granularity).
    const arm = (at: number, type: 'lease-at-risk' | 'lease-lost'): ClockTimer => {
      const fire = () => {
        if (lease !== this.#lease || lease.confirmedAt !== confirmedAt || this.#stopped) return;
        if (timers.now() < at) {
          const again = arm(at, type);
          if (type === 'lease-lost') this.#lostTimer = again;
          else this.#atRiskTimer = again;
          return;
        }
        if (type === 'lease-at-risk' && this.#reported === 'held') {
          this.#reported = 'at-risk';
          this.#emit('lease-at-risk');
        } else if (type === 'lease-lost' && this.#reported !== 'lost') {
          this.#reported = 'lost';
          this.#emit('lease-lost');
        }
      };
      return timers.setTimeout(fire, Math.max(0, at - timers.now())).unref();
    };
    this.#atRiskTimer = arm(confirmedAt + (2 * leaseMs) / 3, 'lease-at-risk');
    this.#lostTimer = arm(confirmedAt + leaseMs, 'lease-lost');
  }

  #emit(type: LeaseEvent['type']): void {
    this.#options.telemetry?.leaseEvent(type);
    const event: LeaseEvent = { type, lease: this.info() };
    if (type !== 'lease-renewed' && this.#lastError !== undefined) event.error = this.#lastError;
    for (const listener of [...this.#listeners]) {
      try {
        listener(event);
      } catch {
        // A listener's failure is its own; the lease goes on.
      }
    }
  }

  #heartbeatBody(): string {
    const { instanceId, bootId, leaseMs, marginMs } = this.#options;
    return JSON.stringify({
      instanceId,
      host: hostname(),
      pid: process.pid,
      bootId,
      leaseMs,
      marginMs,
    });
  }

  // Learn the server's time from the heartbeat just written.
  async #anchorClock(
    key: string,
    revision: number,
    ackedAt: number,
    sentAt: number,
  ): Promise<void> {
    const entry = await this.#options.kv.get(key, { revision });
    if (entry) this.#options.serverClock.anchor(entry.created.getTime(), ackedAt, sentAt);
  }
}
