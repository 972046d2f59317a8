/**
 * The lease of one MachineLedger instance: `<dir>/<leaseId>.lease`, made before
 * the first row that names it is written and refreshed every third of its
 * window by an unref'd timer. Peers judge this instance's rows by it.
 */
import type { Clock, ClockTimer } from '../clock.js';
import type { LedgerFs } from './fs.js';
import { leasePath, touchLease } from './lease.js';

/** What the lease needs from its ledger. */
export interface LeaseOwner {
  readonly fs: LedgerFs;
  readonly clock: Clock;
  readonly leaseId: string;
  readonly leaseTtlMs: number;
  /** The monotonic clock stalls are measured with. */
  monotonic(): number;
  /** The lease file's body. */
  body(): string;
  /** True once the ledger is closed (no refresh timer is started then). */
  closed(): boolean;
}

/** Keeps one instance's lease fresh. */
export class LeaseKeeper {
  private ready: Promise<void> | undefined;
  private timer: ClockTimer | undefined;
  private refreshedAt = Number.NEGATIVE_INFINITY;

  constructor(private readonly owner: LeaseOwner) {}

  /**
   * Make the lease (first call) or make sure it is fresh. A refresh older than
   * half the window (on the monotonic clock) means this process stalled: the
   * lease is refreshed before acting, so rows written now are not judged by a
   * lease that looks expired. Only a refresh: whether rows were lost is decided
   * from the document (see `held-rows.ts`), never from the stall.
   */
  async ensure(dir: string): Promise<void> {
    const { owner } = this;
    const file = leasePath(dir, owner.leaseId)!;
    const refresh = async () => {
      const started = owner.monotonic();
      await touchLease(owner.fs, file, owner.clock.now(), owner.body());
      this.refreshedAt = Math.max(this.refreshedAt, started);
    };
    if (!this.ready) {
      const ready = refresh().then(() => {
        if (owner.closed()) return;
        this.timer = owner.clock.setInterval(
          () => {
            refresh().catch(() => {});
          },
          Math.max(100, Math.floor(owner.leaseTtlMs / 3)),
        );
        this.timer.unref();
      });
      this.ready = ready;
      ready.catch(() => {
        if (this.ready === ready) this.ready = undefined;
      });
      return ready;
    }
    await this.ready;
    if (owner.monotonic() - this.refreshedAt > owner.leaseTtlMs / 2) await refresh();
  }

  /** True once a lease file may exist (it was made, or is being made). */
  started(): boolean {
    return this.ready !== undefined;
  }

  /** Stop refreshing. */
  stop(): void {
    this.owner.clock.clearInterval(this.timer);
    this.timer = undefined;
  }
}
