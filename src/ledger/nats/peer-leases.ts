/**
 * Other instances' leases, as one NatsPoolLedger judges them: by the server's
 * timestamps on their heartbeat keys only, never by this host's clock. A
 * watch on the heartbeat keys saves reads (a refresh seen proves a peer fresh,
 * an end marker ends it at once); without it every judgement reads the key.
 *
 * The watch starts with the first judgement of rows (a write here, a read of a
 * pool, a forwarded call's sender), not at connect: an instance that only
 * sends its calls to the pool's combiner judges nothing, and every heartbeat
 * of every peer would wake it for nothing (a fleet of n instances delivers
 * n x (n - 1) of them per heartbeat round). Until then, freshness read from a
 * key serves only to route calls, never to keep a row.
 */
import type { KV, KvEntry } from '@nats-io/kv';
import { KvWatchInclude } from '@nats-io/kv';
import type { LeaseState } from '../document/verdict.js';
import type { ReservationRow } from '../types.js';
import type { CasWriter } from './cas.js';
import { LEASE_KEY_PREFIX, leaseKey } from './keys.js';
import { foreignLeases, type LeaseFacts, type ServerClock } from './liveness.js';

/** How long after a failed start of the watch a judgement starts it again. */
const WATCH_RETRY_MS = 5000;
/** How many peer leases are remembered as fresh, and as ended, at most. */
const MAX_FRESH = 1000;
const MAX_ENDED = 10_000;

/** Whether a heartbeat key holds an end marker (closed by its owner or fenced by a peer). */
export function hasEnded(entry: KvEntry): boolean {
  try {
    return (entry.json() as { ended?: unknown }).ended !== undefined;
  } catch {
    return false;
  }
}

/** The lease window a heartbeat declares, or 0 when it declares none. */
function declaredLeaseMs(entry: KvEntry): number {
  try {
    const value = (entry.json() as { leaseMs?: unknown }).leaseMs;
    return typeof value === 'number' && Number.isFinite(value) && value > 0 ? value : 0;
  } catch {
    return 0;
  }
}

/** What {@link PeerLeases} works with. */
export interface PeerLeasesOptions {
  kv: KV;
  cas: CasWriter;
  /** This instance's lease window: a peer is judged by the longer of it and its own. */
  leaseMs: number;
  /** Added to a peer's window before it is judged expired (clock drift between the two sides). */
  marginMs: number;
  /**
   * The server time since which this instance's own heartbeats have been
   * confirmed without a break, or undefined while they are not: a peer is
   * judged expired only by what was seen while this instance was itself healthy.
   */
  healthySince: () => number | undefined;
  /** The server's time, as learnt from this instance's own heartbeats. */
  clock: ServerClock;
  /** This instance's current lease id, which is never judged as a peer. */
  ownLeaseId: () => string;
  /** The end marker written when a peer is fenced. */
  fencedBody: () => string;
  /** This host's monotonic clock in ms (when to start a failed watch again). */
  monotonic: () => number;
}

/** The judge of peer leases for one ledger instance. */
export class PeerLeases {
  readonly #options: PeerLeasesOptions;
  /** Peer leases known fresh: heartbeat server time and the window it is judged by. */
  readonly #fresh = new Map<string, { created: number; windowMs: number }>();
  /** Peer leases known ended (closed, fenced or deleted); they never come back. */
  readonly #ended = new Set<string>();
  #watch: { stop(): void } | undefined;
  /** The start of the watch, once asked for (see {@link PeerLeases.watch}). */
  #watching: Promise<void> | undefined;
  /**
   * Whether a heartbeat seen fresh before a judgement may serve it: once the
   * watch runs (an end marker is then seen at once), or failed to start
   * (leases are then judged by reading their keys once per window). Until
   * then every judgement reads the key.
   */
  #knownServesJudges = false;
  /** Counts the start of the watch: a read begun before it makes no peer fresh after it. */
  #epoch = 0;
  /** After a failed start of the watch: when a judgement starts it again (monotonic ms). */
  #retryAt = 0;
  #stopped = false;

  constructor(options: PeerLeasesOptions) {
    this.#options = options;
  }

  /**
   * Follow the heartbeat keys, once (later calls wait for the first). A failure
   * to start the watch is not an error: leases are then judged by reading their keys.
   */
  watch(): Promise<void> {
    this.#watching ??= this.#startWatch();
    return this.#watching;
  }

  async #startWatch(): Promise<void> {
    if (this.#stopped) return;
    try {
      const watch = await this.#options.kv.watch({
        key: `${LEASE_KEY_PREFIX}>`,
        include: KvWatchInclude.UpdatesOnly,
      });
      if (this.#stopped) {
        watch.stop();
        return;
      }
      this.#watch = watch;
      this.#judgeFromKnown();
      void (async () => {
        for await (const entry of watch) {
          const id = entry.key.slice(LEASE_KEY_PREFIX.length);
          if (id === this.#options.ownLeaseId()) continue;
          if (entry.operation !== 'PUT' || hasEnded(entry)) {
            this.end(id);
          } else if (!this.#ended.has(id)) {
            const windowMs = Math.max(this.#options.leaseMs, declaredLeaseMs(entry));
            this.#noteFresh(id, entry.created.getTime(), windowMs);
          }
        }
      })().catch(() => {});
    } catch {
      // Without the watch, leases are judged by reading their keys (once per window,
      // as an instance whose watch cannot start does), and a later judgement tries again.
      this.#judgeFromKnown();
      this.#retryAt = this.#options.monotonic() + WATCH_RETRY_MS;
      this.#watching = undefined;
    }
  }

  // From now on every end marker written is delivered (or, without the watch,
  // a heartbeat is read again once per window). What was learnt before (key
  // reads that routed calls) may predate one that was not delivered: drop it.
  #judgeFromKnown(): void {
    this.#fresh.clear();
    this.#epoch++;
    this.#knownServesJudges = true;
  }

  /** Stop following the heartbeat keys (for good). */
  stop(): void {
    this.#stopped = true;
    this.#watch?.stop();
    this.#watch = undefined;
  }

  /** The lease facts for judging `rows`: the state of every foreign lease they name. */
  async facts(rows: readonly ReservationRow[]): Promise<LeaseFacts> {
    const ownLeaseId = this.#options.ownLeaseId();
    const ids = foreignLeases(rows, ownLeaseId);
    const states = new Map<string, LeaseState>();
    await Promise.all(ids.map(async (id) => states.set(id, await this.state(id))));
    return { ownLeaseId, leaseState: (id) => states.get(id) ?? 'unknown' };
  }

  /**
   * A peer lease's state, by server timestamps only, to judge rows or a
   * forwarded call by (it starts the watch). A heartbeat is `fresh`
   * while the server's time, as an upper bound, is within its window of it (a
   * heartbeat seen fresh is not read again until then, so a busy pool reads
   * each peer's heartbeat about once per window). A lease is `expired` when
   * its key ended, or when it was not renewed for its window plus the margin
   * by the server's time as a lower bound, while this instance's own
   * heartbeats were confirmed throughout (then it is fenced). Anything
   * uncertain is `unknown`, which keeps the rows.
   */
  state(id: string): Promise<LeaseState> {
    if (this.#knownServesJudges) {
      if (this.#watching === undefined && this.#options.monotonic() >= this.#retryAt) {
        void this.watch();
      }
      return this.#state(id, true);
    }
    return this.watch().then(() => this.#state(id, this.#knownServesJudges));
  }

  /**
   * A peer lease's state as {@link PeerLeases.state} says it, to route calls
   * by (to a pool's combiner) without starting the watch: before it runs, a
   * heartbeat read within its window stands for `fresh` although an end marker
   * may have come since (a combiner whose lease ended refuses what it is sent,
   * or does not answer; either way its callers route again).
   */
  routingState(id: string): Promise<LeaseState> {
    return this.#state(id, true);
  }

  async #state(id: string, useKnown: boolean): Promise<LeaseState> {
    if (this.#ended.has(id)) return 'expired';
    const now = this.#options.clock.now();
    if (now === undefined) return 'unknown';
    if (useKnown && this.#knownFresh(id)) return 'fresh';
    const key = leaseKey(id);
    const epoch = this.#epoch;
    try {
      const entry = await this.#options.kv.get(key);
      if (entry === null || entry.operation !== 'PUT' || hasEnded(entry)) {
        this.end(id);
        return 'expired';
      }
      const created = entry.created.getTime();
      const windowMs = Math.max(this.#options.leaseMs, declaredLeaseMs(entry));
      if (epoch === this.#epoch) this.#noteFresh(id, created, windowMs);
      // An end marker the watch delivered while the key was read.
      if (this.#ended.has(id)) return 'expired';
      if (this.#freshAt(created, windowMs)) return 'fresh';
      const later = this.#options.clock.now() ?? now;
      const since = this.#options.healthySince();
      if (
        since === undefined ||
        later - Math.max(created, since) <= windowMs + this.#options.marginMs
      ) {
        return 'unknown';
      }
      await this.#options.cas.write(key, this.#options.fencedBody(), entry.revision);
      this.end(id);
      return 'expired';
    } catch {
      return 'unknown';
    }
  }

  /**
   * Whether a peer lease is known fresh right now, without a read: its last
   * heartbeat seen is within its window by the server's time as an upper bound.
   */
  freshNow(id: string): boolean {
    return this.#knownServesJudges && this.#knownFresh(id);
  }

  // Whether the last heartbeat of `id` seen (read or watched) is within its window now.
  #knownFresh(id: string): boolean {
    if (this.#ended.has(id)) return false;
    const known = this.#fresh.get(id);
    return known !== undefined && this.#freshAt(known.created, known.windowMs);
  }

  // Whether a heartbeat stamped `created` (server ms) is within `windowMs` of the server's time as an upper bound.
  #freshAt(created: number, windowMs: number): boolean {
    const upper = this.#options.clock.upperNow();
    return upper !== undefined && upper - created <= windowMs;
  }

  /** Forget that a lease was seen fresh: its next state is read from its key. */
  recheck(id: string): void {
    this.#fresh.delete(id);
  }

  /** Remember that a lease has ended (a peer's, or this instance's own previous one). */
  end(id: string): void {
    this.#fresh.delete(id);
    this.#ended.add(id);
    // Ended leases are only ever looked up while their rows exist; keep the set bounded.
    if (this.#ended.size > MAX_ENDED) {
      const first = this.#ended.values().next().value;
      if (first !== undefined) this.#ended.delete(first);
    }
  }

  #noteFresh(id: string, created: number, windowMs: number): void {
    const known = this.#fresh.get(id);
    if (known && known.created >= created) return;
    if (this.#fresh.size > MAX_FRESH) this.#fresh.clear();
    this.#fresh.set(id, { created, windowMs });
  }
}
