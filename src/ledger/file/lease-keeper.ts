/**
 * The lease of one MachineLedger instance: `<dir>/<leaseId>.lease`, made before
 * the first row that names it is written and renewed every third of its
 * window by an unref'd timer. Peers judge this instance's rows by it; this
 * instance knows when its store last confirmed a renewal, so it knows its
 * deadline and says so (`lease-at-risk`, `lease-lost`, `lease-renewed`) from
 * its own timers, and it judges peers only while it renews its own lease.
 */
import type { Clock, ClockTimer } from '../../clock.js';
import { LedgerUnavailableError } from '../../errors/index.js';
import { isLedgerError } from '../../errors/ledger.js';
import type { LedgerFs } from '../fs.js';
import {
  atRiskAt,
  breaksStreak,
  deadlineOf,
  healthAt,
  LeaseEvents,
  renewDue,
  renewEveryMs,
} from '../lease-health.js';
import type { LedgerTelemetry } from '../telemetry.js';
import type { LeaseEvent, LeaseHealth, LeaseInfo } from '../types.js';
import { ledgerIoError, systemErrorCode } from './io-error.js';
import { leasePath, touchLeaseSync } from './lease.js';

/** What the lease needs from its ledger. */
export interface LeaseOwner {
  readonly fs: LedgerFs;
  readonly clock: Clock;
  /** The lease id (read each time: the claim may switch it to a predecessor's). */
  readonly leaseId: string;
  readonly leaseTtlMs: number;
  /** What peers add to the deadline before they take this instance's rows. */
  readonly marginMs: number;
  readonly telemetry: LedgerTelemetry | undefined;
  /** The monotonic clock stalls are measured with. */
  monotonic(): number;
  /** The lease file's body. */
  body(): string;
  /**
   * Once, before the first lease write: continue a dead predecessor's lease
   * (switching `leaseId` to it, its file renewed; `true`) or keep the new one
   * (`false`).
   *
   * @throws LedgerInstanceInUseError when a live process holds this instance id.
   */
  claim(dir: string, pool: string): boolean;
  /**
   * Right after a new lease's file was first written: no other live process
   * holds a lease of this instance id.
   *
   * @throws LedgerInstanceInUseError when one does.
   */
  checkAlone(dir: string, pool: string): void;
  /** True once the ledger is closed (no renewal timer is started then). */
  closed(): boolean;
  /** The directory the lease file would be in before the first renewal resolved it. */
  expectedDir(): string;
}

/** Keeps one instance's lease renewed, and knows how it stands. */
export class LeaseKeeper {
  private renewTimer: ClockTimer | undefined;
  private transitionTimer: ClockTimer | undefined;
  private dir: string | undefined;
  private attempted = false;
  private claimed = false;
  private stopped = false;
  // When the last confirmed renewal was sent: ledger clock (the mtime written) and monotonic.
  private confirmedAt: number | undefined;
  private confirmedMono = Number.NEGATIVE_INFINITY;
  // The start of the current unbroken streak of confirmed renewals.
  private healthyFrom: number | undefined;
  private lastError: unknown;
  private readonly events: LeaseEvents;

  constructor(private readonly owner: LeaseOwner) {
    this.events = new LeaseEvents(
      (health) => this.info(health),
      (type) => owner.telemetry?.leaseEvent(type),
    );
  }

  /**
   * Before a cycle: make the lease (first call), or renew it when it was not
   * confirmed within the last third of its window (on the ledger clock or the
   * monotonic one: a stalled process renews before acting). No syscall when
   * it is recent. Whether rows were lost is decided from the document (see
   * `held-rows.ts`), never from the stall.
   *
   * @throws LedgerUnavailableError (naming `pool` and the lease file) when the
   *   renewal fails; LedgerFileError when something else is at the lease path.
   */
  async ensure(dir: string, pool: string): Promise<void> {
    this.dir = dir;
    const first = this.renewTimer === undefined && !this.stopped && !this.owner.closed();
    if (first) {
      // Started before the first renewal so that, at equal instants on a test
      // clock, a renewal runs before the transition it would have prevented.
      this.renewTimer = this.owner.clock.setInterval(
        () => this.renewInBackground(),
        Math.max(100, Math.floor(renewEveryMs(this.owner.leaseTtlMs))),
      );
      this.renewTimer.unref();
    }
    if (this.confirmedAt !== undefined && !this.stale()) return;
    try {
      this.renewOrThrow(dir, pool);
    } catch (error) {
      // A lease that was never made has no timer (nothing to keep, no events).
      if (this.confirmedAt === undefined) this.clearRenewTimer();
      throw error;
    }
  }

  /**
   * Under the pool lock, right before rows are written: the lease was
   * confirmed within the last third of its window and its file is in the
   * directory as it is now (one `lstat`), else it is renewed (the file made
   * again when missing).
   *
   * @throws LedgerIoError (a system error: EROFS, ENOSPC...) or LedgerUnavailableError
   *   when it cannot be renewed: nothing may be written.
   */
  confirm(dir: string, pool: string): void {
    this.dir = dir;
    if (this.confirmedAt !== undefined && !this.stale()) {
      try {
        const stat = this.owner.fs.lstatSync(this.file(dir), { throwIfNoEntry: false });
        if (stat?.isFile()) return;
      } catch {
        // Renewed below, which says what is wrong.
      }
    }
    this.renewOrThrow(dir, pool);
  }

  /**
   * Renew now whatever its age (the directory was made again: the lease file
   * must exist before any row is written under it).
   *
   * @throws as {@link LeaseKeeper.confirm}.
   */
  reassert(dir: string, pool: string): void {
    this.dir = dir;
    this.renewOrThrow(dir, pool);
  }

  /**
   * Since when this instance has renewed its lease without a break (epoch ms
   * on the ledger clock), or `undefined` when it is not renewing now: no
   * lease yet, the last renewal failed, or the last confirmation is more than
   * half a window old (a stall). Peers are judged only from this instant on.
   */
  healthySince(): number | undefined {
    if (this.healthyFrom === undefined || this.confirmedAt === undefined) return undefined;
    const { leaseTtlMs } = this.owner;
    if (breaksStreak(this.owner.clock.now() - this.confirmedAt, leaseTtlMs)) return undefined;
    if (breaksStreak(this.owner.monotonic() - this.confirmedMono, leaseTtlMs)) return undefined;
    return this.healthyFrom;
  }

  /** The lease as of now. */
  info(health?: LeaseHealth): LeaseInfo {
    const { leaseTtlMs, marginMs, leaseId } = this.owner;
    const confirmedAt = this.confirmedAt;
    return {
      health: health ?? this.healthAt(this.owner.clock.now()),
      leaseId,
      confirmedAt,
      deadline: confirmedAt === undefined ? undefined : deadlineOf(confirmedAt, leaseTtlMs),
      leaseMs: leaseTtlMs,
      marginMs,
      location: { kind: 'file', path: this.file(this.dir ?? this.owner.expectedDir()) },
    };
  }

  /**
   * Call `listener` on each lease event. Listener errors are caught.
   *
   * @returns The function that removes the listener.
   * @throws TypeError when `listener` is not a function.
   */
  onEvent(listener: (event: LeaseEvent) => void): () => void {
    return this.events.listen(listener);
  }

  /** True once a lease file may exist (it was made, or is being made). */
  started(): boolean {
    return this.attempted;
  }

  /** Stop renewing and stop the events. */
  stop(): void {
    this.stopped = true;
    this.clearRenewTimer();
    this.owner.clock.clearTimeout(this.transitionTimer);
    this.transitionTimer = undefined;
  }

  private file(dir: string): string {
    return leasePath(dir, this.owner.leaseId)!;
  }

  private stale(): boolean {
    if (this.confirmedAt === undefined) return true;
    const { leaseTtlMs } = this.owner;
    return (
      renewDue(this.owner.clock.now() - this.confirmedAt, leaseTtlMs) ||
      renewDue(this.owner.monotonic() - this.confirmedMono, leaseTtlMs)
    );
  }

  private healthAt(now: number): LeaseHealth {
    if (this.confirmedAt === undefined) return 'none';
    return healthAt(this.confirmedAt, this.owner.leaseTtlMs, now);
  }

  private clearRenewTimer(): void {
    this.owner.clock.clearInterval(this.renewTimer);
    this.renewTimer = undefined;
  }

  // The timer's renewal: a failure throws nowhere, it is recorded (the
  // transitions report it when they come).
  private renewInBackground(): void {
    if (this.dir === undefined || this.stopped) return;
    try {
      this.renew(this.dir);
    } catch {
      // Recorded by renew().
    }
  }

  private renewOrThrow(dir: string, pool: string): void {
    try {
      this.renew(dir, pool);
    } catch (error) {
      if (isLedgerError(error)) throw error;
      const file = this.file(dir);
      // A system error (EROFS, ENOSPC...) is the ledger's typed I/O error, as everywhere.
      if (systemErrorCode(error) !== undefined) {
        throw ledgerIoError(error, { pool, path: file, mayHaveWritten: false });
      }
      const third = Math.floor(renewEveryMs(this.owner.leaseTtlMs));
      throw new LedgerUnavailableError(
        pool,
        `Cannot renew the lease of this ledger instance (${file}) for pool ${JSON.stringify(pool)}: ${(error as Error).message}. Nothing was written: rows are written only under a lease confirmed within the last leaseTtlMs / 3 (${third} ms). Retry once the ledger directory is writable again.`,
        { cause: error },
      );
    }
  }

  private renew(dir: string, pool = ''): void {
    const { owner } = this;
    const sentAt = owner.clock.now();
    const sentMono = owner.monotonic();
    try {
      if (this.claimed) {
        touchLeaseSync(owner.fs, this.file(dir), sentAt, owner.body());
      } else {
        const continued = owner.claim(dir, pool);
        this.attempted = true;
        touchLeaseSync(owner.fs, this.file(dir), sentAt, owner.body());
        if (!continued) this.checkAlone(dir, pool);
        this.claimed = true;
      }
    } catch (error) {
      this.lastError = error;
      this.healthyFrom = undefined;
      throw error;
    }
    this.confirmed(sentAt, sentMono);
  }

  // A new lease another live process of this instance id made at the same
  // time: ours is removed again (nothing was written under it) and the call refused.
  private checkAlone(dir: string, pool: string): void {
    try {
      this.owner.checkAlone(dir, pool);
    } catch (error) {
      try {
        this.owner.fs.unlinkSync(this.file(dir));
      } catch {
        // Gone already.
      }
      this.attempted = false;
      throw error;
    }
  }

  private confirmed(sentAt: number, sentMono: number): void {
    const { leaseTtlMs } = this.owner;
    // A stall is over: what was due before this renewal was sent is said first
    // (one sent at the very instant of a transition was in time).
    this.catchUp(sentAt - 1);
    const broken =
      this.confirmedAt === undefined ||
      breaksStreak(sentAt - this.confirmedAt, leaseTtlMs) ||
      breaksStreak(sentMono - this.confirmedMono, leaseTtlMs);
    if (this.healthyFrom === undefined || broken) this.healthyFrom = sentAt;
    this.confirmedAt = Math.max(this.confirmedAt ?? Number.NEGATIVE_INFINITY, sentAt);
    this.confirmedMono = Math.max(this.confirmedMono, sentMono);
    this.events.renewed(this.lastError);
    this.lastError = undefined;
    this.arm();
  }

  // Announce the transitions due at `now` that were not announced yet.
  private catchUp(now: number): void {
    if (this.confirmedAt === undefined || this.stopped) return;
    this.events.report(healthAt(this.confirmedAt, this.owner.leaseTtlMs, now), this.lastError);
  }

  // One timer, at the next transition's instant.
  private arm(): void {
    this.owner.clock.clearTimeout(this.transitionTimer);
    this.transitionTimer = undefined;
    const reported = this.events.reported;
    if (this.stopped || this.confirmedAt === undefined || reported === 'lost') return;
    const { leaseTtlMs } = this.owner;
    const at =
      reported === 'held'
        ? atRiskAt(this.confirmedAt, leaseTtlMs)
        : deadlineOf(this.confirmedAt, leaseTtlMs);
    this.transitionTimer = this.owner.clock.setTimeout(
      () => {
        this.transitionTimer = undefined;
        // One more try first: at-risk and lost mean it cannot renew even now
        // (a renewal due at the same instant may not have run yet).
        this.renewInBackground();
        this.catchUp(this.owner.clock.now());
        this.arm();
      },
      Math.max(0, at - this.owner.clock.now()),
    );
    this.transitionTimer.unref();
  }
}
