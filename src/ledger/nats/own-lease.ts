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
 *
 * A process that starts with the instance id of a predecessor whose lease is
 * still within its deadline continues that lease (the agents fencing on its
 * key stay satisfied): the key `instance.<hash>` names the lease, and the
 * newcomer takes the heartbeat key over by a compare-and-set that writes its
 * own session id. The old session, if it still runs, finds its next refresh
 * refused and a heartbeat of another session there: it counts its lease lost
 * and writes nothing more. A predecessor provably alive on this host (same boot
 * id, its pid alive with the same start time) is never taken over.
 */
import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import type { KV, KvEntry } from '@nats-io/kv';
import type { Clock, ClockTimer } from '../../clock.js';
import { LedgerInstanceInUseError } from '../../errors/index.js';
import { defaultFs } from '../fs.js';
import {
  atRiskAt,
  breaksStreak,
  deadlineOf,
  healthAt,
  LeaseEvents,
  renewEveryMs,
} from '../lease-health.js';
import { isProcessAlive, readProcessStartTime } from '../proc.js';
import type { LedgerTelemetry } from '../telemetry.js';
import type { LeaseEvent, LeaseHealth, LeaseInfo } from '../types.js';
import { type CasWriter, isRevisionConflict } from './cas.js';
import { instanceKey, leaseKey } from './keys.js';
import type { ServerClock } from './liveness.js';
import { hasEnded } from './peer-leases.js';

/** `lapsed`: fenced or deleted (a new lease replaces it); `taken-over`: another session renews it now (terminal). */
type LeaseStatus = 'live' | 'lapsed' | 'taken-over';

/** What a heartbeat key says of the session that wrote it. */
interface HeartbeatBody {
  instanceId?: unknown;
  session?: unknown;
  host?: unknown;
  pid?: unknown;
  pidStart?: unknown;
  bootId?: unknown;
  leaseMs?: unknown;
  ended?: unknown;
}

function bodyOf(entry: KvEntry | null): HeartbeatBody | undefined {
  if (entry === null || entry.operation !== 'PUT') return undefined;
  try {
    const value = entry.json() as unknown;
    return typeof value === 'object' && value !== null ? (value as HeartbeatBody) : undefined;
  } catch {
    return undefined;
  }
}

/** The fields of a heartbeat that say who holds a lease, for messages and errors. */
function holderOf(body: HeartbeatBody | undefined): Record<string, string | number> {
  const out: Record<string, string | number> = {};
  for (const field of ['host', 'pid', 'bootId', 'session'] as const) {
    const value = body?.[field];
    if (typeof value === 'string' || typeof value === 'number') out[field] = value;
  }
  return out;
}

function describeHolder(holder: Record<string, string | number>): string {
  const parts = Object.entries(holder).map(([k, v]) => `${k} ${JSON.stringify(v)}`);
  return parts.length === 0 ? 'an unknown process' : `the process with ${parts.join(', ')}`;
}

interface Lease {
  id: string;
  key: string;
  revision: number;
  /** Monotonic time the last acknowledged heartbeat was sent. */
  sentAt: number;
  /** Ledger clock (epoch ms) when the last acknowledged heartbeat was sent; undefined before the first. */
  confirmedAt: number | undefined;
  status: LeaseStatus;
  /** Who took the lease over (status `taken-over`). */
  takenBy?: Record<string, string | number>;
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
  /** Whether a pid is alive, and its start time: a predecessor alive on this host is not taken over. */
  processProbe?: {
    isAlive(pid: number): boolean;
    startTime(pid: number): number | undefined;
  };
}

const defaultProbe = {
  isAlive: isProcessAlive,
  startTime: (pid: number) => readProcessStartTime(defaultFs, pid),
};

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
  #lastError: unknown;
  readonly #events = new LeaseEvents(
    () => this.info(),
    (type) => this.#options.telemetry?.leaseEvent(type),
  );
  /** Monotonic ack time of the first confirmation of the current unbroken streak. */
  #healthySince: number | undefined;
  /** Monotonic ack time of the last confirmation. */
  #lastAck = Number.NEGATIVE_INFINITY;
  /** This session: written into every heartbeat, so that a takeover is told from our own refresh. */
  readonly #session = randomUUID();
  /** This process's start time, written into heartbeats for a successor on this host. */
  readonly #pidStart: number | undefined;
  /** Whether the first lease was taken (the next `open` replaces a lapsed lease). */
  #opened = false;
  /** How the first lease was had: a new one, or continued from a predecessor. */
  #origin: 'new' | 'continued' = 'new';

  constructor(options: OwnLeaseOptions) {
    this.#options = options;
    this.#lease = newLease();
    this.#pidStart = (options.processProbe ?? defaultProbe).startTime(process.pid);
  }

  /** Whether the first lease continued a predecessor's (a restart within its deadline) or is new. */
  get origin(): 'new' | 'continued' {
    return this.#origin;
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
    return this.confirmedWithin(renewEveryMs(this.#options.leaseMs));
  }

  /**
   * The start (monotonic ms) of the current unbroken streak of confirmed
   * heartbeats, or undefined when the streak is broken (a failed heartbeat,
   * or no confirmation for half the window: this process stalled or is cut off).
   */
  healthySince(): number | undefined {
    if (this.#healthySince === undefined || this.#lease.status !== 'live') return undefined;
    if (breaksStreak(this.#options.monotonic() - this.#lastAck, this.#options.leaseMs)) {
      return undefined;
    }
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
      deadline: confirmedAt === undefined ? undefined : deadlineOf(confirmedAt, leaseMs),
      leaseMs,
      marginMs,
      location: { kind: 'nats', bucket, key: lease.key },
    };
  }

  /** Call `listener` on every lease event; returns the function that removes it. */
  onEvent(listener: (event: LeaseEvent) => void): () => void {
    return this.#events.listen(listener);
  }

  #health(lease: Lease): LeaseHealth {
    if (lease.confirmedAt === undefined) return lease.status === 'live' ? 'none' : 'lost';
    if (lease.status !== 'live') return 'lost';
    return healthAt(lease.confirmedAt, this.#options.leaseMs, this.#options.timers.now());
  }

  /**
   * Take this instance's first lease: continue the lease of a predecessor with
   * the same instance id while it is within its deadline (a restart), else a
   * new one. Later calls take a new lease (after a fence).
   *
   * @throws LedgerInstanceInUseError when the predecessor's process is alive on this host.
   */
  async open(): Promise<void> {
    if (this.#opened) {
      await this.#openNew();
      await this.#pointInstanceKey(this.#lease.id, true).catch(() => {});
      return;
    }
    const { kv } = this.#options;
    const key = instanceKey(this.#options.instanceId);
    const pointer = await kv.get(key);
    const previous = bodyOf(pointer) as { leaseId?: unknown } | undefined;
    const predecessorId = typeof previous?.leaseId === 'string' ? previous.leaseId : undefined;
    let predecessor: KvEntry | null = null;
    if (predecessorId !== undefined) {
      predecessor = await kv.get(leaseKey(predecessorId));
      this.#refuseIfAlive(bodyOf(predecessor));
    }
    // Claim the instance key (it names the predecessor's lease until one is
    // continued or replaced); its server timestamp dates the predecessor's heartbeat.
    const claimRevision = await this.#writeInstanceKey(key, predecessorId, pointer?.revision ?? 0);
    if (predecessorId !== undefined && predecessor !== null) {
      if (await this.#continue(predecessorId, predecessor)) {
        this.#opened = true;
        this.#origin = 'continued';
        return;
      }
    }
    await this.#openNew();
    this.#opened = true;
    // Name the new lease, for a restart to continue. Best effort: a failure
    // costs only that continuation (the restart then takes a new lease).
    await this.#options.cas
      .write(key, this.#instanceBody(this.#lease.id), claimRevision)
      .catch(() => this.#pointInstanceKey(this.#lease.id, true))
      .catch(() => {});
  }

  // A predecessor provably alive on this host (same boot id, its pid alive with
  // the start time it wrote) keeps its lease: two processes must not renew one.
  #refuseIfAlive(body: HeartbeatBody | undefined): void {
    if (body === undefined || body.ended !== undefined || body.session === this.#session) return;
    const { bootId, instanceId } = this.#options;
    const probe = this.#options.processProbe ?? defaultProbe;
    if (body.instanceId !== instanceId || bootId === 'unknown-boot' || body.bootId !== bootId)
      return;
    if (typeof body.pid !== 'number' || typeof body.pidStart !== 'number') return;
    if (!probe.isAlive(body.pid) || probe.startTime(body.pid) !== body.pidStart) return;
    const holder = holderOf(body);
    throw new LedgerInstanceInUseError(
      '',
      instanceId,
      body.pid,
      `Instance id ${JSON.stringify(instanceId)} is in use on NATS KV ${this.#options.bucket}: its lease is held by ${describeHolder(holder)}, which is alive on this host. Two processes must not share an instance id: stop that process first (a restart continues its lease when it is gone), or give this one another instanceId.`,
    );
  }

  // Continue a predecessor's lease by a compare-and-set at the revision read,
  // writing this session's heartbeat, while it is within its deadline and of
  // the same window. False when it cannot be (then a new lease is taken).
  async #continue(id: string, entry: KvEntry): Promise<boolean> {
    const { cas, kv, monotonic, timers, serverClock, leaseMs, instanceId } = this.#options;
    let current: KvEntry | null = entry;
    for (let attempt = 0; attempt < 3; attempt++) {
      const body = bodyOf(current);
      if (current === null || body === undefined || body.ended !== undefined) return false;
      if (body.instanceId !== instanceId || body.leaseMs !== leaseMs) return false;
      const now = serverClock.now();
      if (now === undefined || now - current.created.getTime() >= leaseMs) return false;
      const lease: Lease = { ...newLease(), id, key: leaseKey(id) };
      const sent = monotonic();
      const sentClock = timers.now();
      try {
        lease.revision = await cas.write(lease.key, this.#heartbeatBody(), current.revision);
      } catch (error) {
        if (!isRevisionConflict(error)) throw error;
        // Its owner (a live session elsewhere) refreshed it meanwhile: try again from the new revision.
        current = await kv.get(lease.key);
        continue;
      }
      this.#lease = lease;
      const acked = monotonic();
      this.#confirm(lease, sent, sentClock, acked);
      await this.#anchorClock(lease.key, lease.revision, acked, sent).catch(() => {});
      return true;
    }
    return false;
  }

  /** Take a new lease: a fresh id and a heartbeat key created for it. */
  async #openNew(): Promise<void> {
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

  // Write the instance key at `revision`, naming `leaseId`; learn the server's time from it.
  async #writeInstanceKey(
    key: string,
    leaseId: string | undefined,
    revision: number,
  ): Promise<number> {
    const { cas, monotonic } = this.#options;
    const sent = monotonic();
    const written = await cas.write(key, this.#instanceBody(leaseId), revision);
    await this.#anchorClock(key, written, monotonic(), sent).catch(() => {});
    return written;
  }

  // After a fence: point the instance key at the new lease, unless another session claimed it since.
  async #pointInstanceKey(leaseId: string, onlyOwn: boolean): Promise<void> {
    const key = instanceKey(this.#options.instanceId);
    const entry = await this.#options.kv.get(key);
    const body = bodyOf(entry);
    if (onlyOwn && body !== undefined && body.session !== this.#session) return;
    await this.#options.cas.write(key, this.#instanceBody(leaseId), entry?.revision ?? 0);
  }

  #instanceBody(leaseId: string | undefined): string {
    const { instanceId, bootId } = this.#options;
    return JSON.stringify({
      instanceId,
      ...(leaseId === undefined ? {} : { leaseId }),
      session: this.#session,
      host: hostname(),
      pid: process.pid,
      bootId,
    });
  }

  /** Refresh the heartbeat every third of the window (at least every 100 ms apart). */
  startHeartbeat(): void {
    this.#timer = this.#options.timers.setInterval(
      () => {
        const { status } = this.#lease;
        if (status === 'taken-over') return;
        (status === 'lapsed' ? this.#renew() : this.beat()).catch(() => {});
      },
      Math.max(100, Math.floor(renewEveryMs(this.#options.leaseMs))),
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
        // The revision moved. A peer's end marker (or an operator's delete)
        // means the lease is lost; a heartbeat of this session is our own earlier
        // refresh that landed although its answer did not arrive: carry on from
        // it. A heartbeat of another session: a restart took the lease over.
        const entry = await kv.get(lease.key);
        if (entry !== null && entry.operation === 'PUT' && !hasEnded(entry)) {
          const body = bodyOf(entry);
          if (body?.session === this.#session) {
            // Its revision, even below the one we hold: a server that lost an
            // acknowledged heartbeat (nats-server before 2.11, docs/ledger.md) holds an
            // older one of ours, and every refresh at the lost revision would conflict.
            lease.revision = entry.revision;
            return;
          }
          if (lease === this.#lease && lease.status === 'live') this.#takenOver(lease, body);
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
  async refresh(pool = ''): Promise<void> {
    this.#assertNotTakenOver(pool);
    if (this.#lease.status === 'lapsed') await this.#renew();
    if (!this.confirmed) await this.beat();
    this.#assertNotTakenOver(pool);
    if (this.#lease.status === 'lapsed') await this.#renew();
    if (!this.confirmed) throw new LeaseNotConfirmed(this.#health(this.#lease));
  }

  /** @throws LedgerInstanceInUseError once another session took this lease over. */
  #assertNotTakenOver(pool: string): void {
    const lease = this.#lease;
    if (lease.status !== 'taken-over') return;
    const { instanceId, bucket } = this.#options;
    const holder = lease.takenBy ?? {};
    throw new LedgerInstanceInUseError(
      pool,
      instanceId,
      typeof holder.pid === 'number' ? holder.pid : undefined,
      `Instance ${JSON.stringify(instanceId)}: its lease ${lease.id} on NATS KV ${bucket} was taken over by ${describeHolder(holder)}, a newer process with the same instance id, which now holds its reservations${pool === '' ? '' : ` in pool ${JSON.stringify(pool)}`}. This ledger writes nothing more: stop its agents and close it.`,
    );
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
    if (
      this.#healthySince === undefined ||
      breaksStreak(acked - this.#lastAck, this.#options.leaseMs)
    ) {
      this.#healthySince = acked;
    }
    this.#lastAck = acked;
    this.#events.renewed();
    this.#schedule(lease);
  }

  // A heartbeat failed: the streak of confirmations is broken.
  #broken(error: unknown): void {
    this.#healthySince = undefined;
    this.#lastError = error;
  }

  // Another session wrote the heartbeat key: a restart with this instance id
  // continues the lease. This session is fenced for good and writes nothing more.
  #takenOver(lease: Lease, body: HeartbeatBody | undefined): void {
    lease.status = 'taken-over';
    lease.takenBy = holderOf(body);
    this.#healthySince = undefined;
    const { timers } = this.#options;
    timers.clearInterval(this.#timer);
    timers.clearTimeout(this.#atRiskTimer);
    timers.clearTimeout(this.#lostTimer);
    this.#timer = this.#atRiskTimer = this.#lostTimer = undefined;
    this.#events.lost(this.#lastError);
  }

  // The lease was found fenced (or deleted): lost for good, whatever its deadline said.
  #lapse(lease: Lease): void {
    lease.status = 'lapsed';
    this.#healthySince = undefined;
    const { timers } = this.#options;
    timers.clearTimeout(this.#atRiskTimer);
    timers.clearTimeout(this.#lostTimer);
    this.#events.lost(this.#lastError);
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
        if (type === 'lease-at-risk') this.#events.report('at-risk', this.#lastError);
        else this.#events.lost(this.#lastError);
      };
      return timers.setTimeout(fire, Math.max(0, at - timers.now())).unref();
    };
    this.#atRiskTimer = arm(atRiskAt(confirmedAt, leaseMs), 'lease-at-risk');
    this.#lostTimer = arm(deadlineOf(confirmedAt, leaseMs), 'lease-lost');
  }

  #heartbeatBody(): string {
    const { instanceId, bootId, leaseMs, marginMs } = this.#options;
    return JSON.stringify({
      instanceId,
      session: this.#session,
      host: hostname(),
      pid: process.pid,
      ...(this.#pidStart === undefined ? {} : { pidStart: this.#pidStart }),
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
