/**
 * The lease of one MemoryPoolLedger: renewed on its clock, with the health,
 * events and "healthy since" every ledger keeps (`ledger/lease-health.ts`), and
 * a switch that makes renewals fail (`failRenewals`).
 */
import type { Clock, ClockTimer } from '../../clock.js';
import { LedgerUnavailableError } from '../../errors/index.js';
import {
  atRiskAt,
  breaksStreak,
  deadlineOf,
  healthAt,
  LeaseEvents,
  renewDue,
  renewEveryMs,
} from '../../ledger/lease-health.js';
import type { LeaseEvent, LeaseHealth, LeaseInfo } from '../../ledger/types.js';

type Listener = (event: LeaseEvent) => void;

/** A renewal made to fail by `failRenewals(true)`. @internal */
export class RenewalsFailing extends Error {
  constructor() {
    super('Lease renewals are failing (MemoryPoolLedger.failRenewals(true))');
    this.name = 'RenewalsFailing';
  }
}

/** One instance's own lease, renewed on the clock. @internal */
export class MemoryLease {
  readonly leaseId: string;
  readonly leaseMs: number;
  readonly marginMs: number;
  readonly #clock: Clock;
  // Records a confirmed renewal in the shared store (what peers see).
  readonly #record: (now: number) => void;
  readonly #events = new LeaseEvents(() => this.info());
  #confirmedAt: number;
  #healthySince: number | undefined;
  #failing = false;
  #lastError: unknown;
  #renewer: ClockTimer | undefined;
  #atRisk: ClockTimer | undefined;
  #lost: ClockTimer | undefined;
  #stopped = false;

  constructor(
    leaseId: string,
    leaseMs: number,
    marginMs: number,
    clock: Clock,
    record: (now: number) => void,
  ) {
    this.leaseId = leaseId;
    this.leaseMs = leaseMs;
    this.marginMs = marginMs;
    this.#clock = clock;
    this.#record = record;
    const now = clock.now();
    this.#confirmedAt = now;
    this.#healthySince = now;
    record(now);
    this.#renewer = clock.setInterval(() => this.renew(), renewEveryMs(leaseMs));
    this.#renewer.unref();
    this.#arm(now);
  }

  /**
   * The start of the current unbroken streak of confirmed renewals, or
   * `undefined` while renewals fail: this instance judges peers only then.
   */
  get healthySince(): number | undefined {
    return this.#healthySince;
  }

  /** Renew now; true when the renewal was confirmed. */
  renew(): boolean {
    if (this.#stopped) return false;
    if (this.#failing) {
      this.#healthySince = undefined;
      this.#lastError = new RenewalsFailing();
      return false;
    }
    const now = this.#clock.now();
    // A renewal after a stall (no timer ran): say first what the stall did to the lease.
    const before = this.health(now);
    if (before !== 'held') this.#report(before);
    // A gap of more than half a lease (this process stalled) breaks the streak.
    if (this.#healthySince === undefined || breaksStreak(now - this.#confirmedAt, this.leaseMs)) {
      this.#healthySince = now;
    }
    this.#confirmedAt = now;
    this.#record(now);
    this.#arm(now);
    this.#events.renewed();
    return true;
  }

  /** Make renewals fail (`true`) or work again (`false`, renewing at once). */
  setFailing(on: boolean): void {
    this.#failing = on;
    if (on) this.#healthySince = undefined;
    else this.renew();
  }

  /**
   * Before a call writes rows: the lease must have been confirmed within the
   * last third of the lease; renew first, and refuse when that fails.
   *
   * @throws LedgerUnavailableError when the renewal fails (nothing is written).
   */
  ensureConfirmed(pool: string): void {
    if (!renewDue(this.#clock.now() - this.#confirmedAt, this.leaseMs)) return;
    if (this.renew()) return;
    throw new LedgerUnavailableError(
      pool,
      `Lease ${this.leaseId} could not be renewed (the last confirmed renewal was ${this.#clock.now() - this.#confirmedAt} ms ago): nothing was written to memory pool ${JSON.stringify(pool)}. Retry once renewals work again.`,
      { cause: this.#lastError },
    );
  }

  health(now = this.#clock.now()): Exclude<LeaseHealth, 'none'> {
    return healthAt(this.#confirmedAt, this.leaseMs, now);
  }

  info(): LeaseInfo {
    return {
      health: this.#stopped ? 'lost' : this.health(),
      leaseId: this.leaseId,
      confirmedAt: this.#confirmedAt,
      deadline: deadlineOf(this.#confirmedAt, this.leaseMs),
      leaseMs: this.leaseMs,
      marginMs: this.marginMs,
      location: { kind: 'memory' },
    };
  }

  listen(listener: Listener): () => void {
    return this.#events.listen(listener);
  }

  /** Stop renewing and firing events (close, abandon). */
  stop(): void {
    this.#stopped = true;
    this.#clock.clearInterval(this.#renewer);
    this.#clock.clearTimeout(this.#atRisk);
    this.#clock.clearTimeout(this.#lost);
    this.#events.clear();
  }

  // The two instants of the current lease: at risk at 2/3, lost at the deadline.
  #arm(confirmedAt: number): void {
    this.#clock.clearTimeout(this.#atRisk);
    this.#clock.clearTimeout(this.#lost);
    const now = this.#clock.now();
    const at = (instant: number) => Math.max(1, instant - now);
    this.#atRisk = this.#clock.setTimeout(
      () => this.#check('at-risk'),
      at(atRiskAt(confirmedAt, this.leaseMs)),
    );
    this.#atRisk.unref();
    this.#lost = this.#clock.setTimeout(
      () => this.#check('lost'),
      at(deadlineOf(confirmedAt, this.leaseMs)),
    );
    this.#lost.unref();
  }

  // Fire each transition once, in order (a late timer may pass both at once).
  #check(due: 'at-risk' | 'lost'): void {
    if (this.#stopped) return;
    const now = this.#clock.now();
    const health = this.health(now);
    if (health !== 'held') this.#report(health);
    // A timer may fire a moment before its instant by the wall clock: look again then.
    if (health === 'lost' || (health === 'at-risk' && due === 'at-risk')) return;
    const instant =
      due === 'lost'
        ? deadlineOf(this.#confirmedAt, this.leaseMs)
        : atRiskAt(this.#confirmedAt, this.leaseMs);
    const again = this.#clock.setTimeout(() => this.#check(due), Math.max(1, instant - now));
    again.unref();
    if (due === 'lost') this.#lost = again;
    else this.#atRisk = again;
  }

  // Fire each transition up to `health` once, in order.
  #report(health: 'at-risk' | 'lost'): void {
    this.#events.report(health, this.#lastError);
  }
}
