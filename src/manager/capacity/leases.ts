/**
 * The manager and its ledger's lease: what it does when the lease is at risk
 * (stop the agents that hold pool rows, or stop spawning, or only say so),
 * what it hands a backend so an agent can watch the lease itself, and what
 * the status says of it.
 */
import type { LeaseEvent, LeaseHealth, LeaseInfo, PoolLedger } from '../../ledger/types.js';
import type { SpawnLease } from '../backend.js';
import type { FleetCore } from '../core.js';
import type { ScalerEventData } from '../events.js';
import type { ScalerState } from '../spawning/scalers.js';
import type { CapacityLimit, LeaseStatus } from '../types.js';
import type { PoolLedgers } from './pools.js';

/**
 * What the manager does when its ledger says the lease its pool rows are held
 * under is at risk (renewals have failed for a third of the lease: a storage
 * outage, a network cut, a stall), before peers may take those rows:
 *
 * - `stop-agents` (the default): destroy every agent that holds a row in a
 *   machine pool (busy ones too) as soon as `lease-at-risk` fires, so the
 *   capacity is never used twice, then release their rows as usual; refuse new
 *   spawns in machine pools until `lease-renewed`. After a restart, a recovered
 *   agent that cannot get a row again is destroyed.
 * - `stop-spawning`: keep the agents running, refuse new spawns in machine
 *   pools (`at-capacity` with `limit: 'lease-at-risk'`) until `lease-renewed`.
 *   If the lease is lost, peers may start agents on the same capacity while
 *   these still run.
 * - `report`: only emit the events and show the health in the status.
 *
 * Every policy emits `lease-at-risk`, `lease-lost` and `lease-renewed` (events
 * with an empty `agentId`, `data: { lease, policy, agents }`) and reports the
 * lease in `getStatus().lease`. It needs a ledger with the optional
 * `onLeaseEvent` (`MachineLedger`, `NatsPoolLedger`, `MemoryPoolLedger`);
 * with another ledger the policy has nothing to act on.
 *
 * `reservationLostPolicy` is the other half: it handles rows already gone
 * (reaped by a peer after a lapse, or released by an operator) while their
 * agents still run; this policy acts before that can happen.
 */
export type LeaseLostPolicy = 'stop-agents' | 'stop-spawning' | 'report';

const POLICIES: readonly LeaseLostPolicy[] = ['stop-agents', 'stop-spawning', 'report'];

/** @throws TypeError naming the accepted values. @internal */
export function checkLeaseLostPolicy(value: unknown): LeaseLostPolicy {
  if (value === undefined) return 'stop-agents';
  if (!POLICIES.includes(value as LeaseLostPolicy)) {
    throw new TypeError(
      `Expected \`policies.leaseLost\` to be one of ${POLICIES.join(', ')}, got \`${String(value).slice(0, 64)}\``,
    );
  }
  return value as LeaseLostPolicy;
}

const REASON = 'lease-at-risk';

/** One ledger's lease as the manager follows it. */
interface Watched {
  readonly ledger: PoolLedger;
  /** The health the last event said (or the ledger said at construction). */
  health: LeaseHealth | undefined;
  off: (() => void) | undefined;
}

/**
 * The leases of the manager's ledgers as it follows them: with several
 * ledgers, a lease at risk on any of them acts on the agents with a row in a
 * pool that ledger serves. @internal
 */
export class LeaseWatch {
  readonly policy: LeaseLostPolicy;
  readonly #core: FleetCore;
  readonly #ledgers: PoolLedgers;
  readonly #watched: Watched[] = [];

  constructor(core: FleetCore, ledgers: PoolLedgers, policy: LeaseLostPolicy) {
    this.#core = core;
    this.#ledgers = ledgers;
    this.policy = policy;
    for (const ledger of ledgers.all()) {
      const watched: Watched = { ledger, health: read(ledger)?.health, off: undefined };
      this.#watched.push(watched);
      if (typeof ledger.onLeaseEvent === 'function') {
        watched.off = ledger.onLeaseEvent((event) => this.#on(watched, event));
      }
    }
  }

  /**
   * The refusal this policy gives a spawn of `scaler` in `pools` (by default
   * every pool the scaler uses) while a lease of one of them is at risk.
   */
  refusal(scaler: ScalerState, pools = scaler.pools): CapacityLimit | undefined {
    if (this.policy === 'report' || pools.length === 0) return undefined;
    for (const pool of pools) {
      const watched = this.#of(pool);
      if (watched === undefined || !fenced(watched)) continue;
      const lease = read(watched.ledger);
      const health = lease?.health === 'lost' || watched.health === 'lost' ? 'lost' : 'at-risk';
      const limit: CapacityLimit = {
        limit: 'lease-at-risk',
        scaler: scaler.name,
        pool,
        health,
        neverFits: false,
      };
      if (lease?.deadline !== undefined) limit.deadline = lease.deadline;
      return limit;
    }
    return undefined;
  }

  /**
   * What a backend passes to an agent in these machine pools, so it can watch
   * every lease its rows are held under: one per ledger (that has a lease),
   * earliest deadline first.
   */
  spawnLeases(pools: readonly string[]): SpawnLease[] {
    const leases: LeaseInfo[] = [];
    for (const ledger of this.#ledgers.byLedger(pools).keys()) {
      const lease = read(ledger);
      if (lease !== undefined) leases.push(lease);
    }
    // Earliest deadline first; a lease without one (none held yet) last. Stable.
    const at = (lease: LeaseInfo) => lease.deadline ?? Number.POSITIVE_INFINITY;
    leases.sort((a, b) => (at(a) < at(b) ? -1 : at(a) > at(b) ? 1 : 0));
    return leases.map((lease) => ({
      location: { ...lease.location },
      leaseMs: lease.leaseMs,
      marginMs: lease.marginMs,
    }));
  }

  /**
   * The lease in the status, when a ledger can say: with several ledgers, the
   * one in the worst health, then with the earliest deadline.
   */
  status(): LeaseStatus | undefined {
    let pick: { lease: LeaseInfo; watched: Watched } | undefined;
    for (const watched of this.#watched) {
      const lease = read(watched.ledger);
      if (lease === undefined) continue;
      if (pick === undefined || worse(lease, pick.lease)) pick = { lease, watched };
    }
    if (pick === undefined) return undefined;
    const { lease } = pick;
    const status: LeaseStatus = {
      health: lease.health,
      leaseMs: lease.leaseMs,
      marginMs: lease.marginMs,
      policy: this.policy,
      spawningStopped: this.policy !== 'report' && this.#watched.some(fenced),
    };
    if (lease.confirmedAt !== undefined) status.confirmedAt = lease.confirmedAt;
    if (lease.deadline !== undefined) status.deadline = lease.deadline;
    return status;
  }

  /** Stop listening (shutdown). */
  close(): void {
    for (const watched of this.#watched) {
      watched.off?.();
      watched.off = undefined;
    }
  }

  #of(pool: string): Watched | undefined {
    const ledger = this.#ledgers.of(pool);
    return ledger === undefined ? undefined : this.#watched.find((w) => w.ledger === ledger);
  }

  #on(watched: Watched, event: LeaseEvent): void {
    const type = event?.type;
    if (type !== 'lease-at-risk' && type !== 'lease-lost' && type !== 'lease-renewed') return;
    const health = type === 'lease-renewed' ? 'held' : type === 'lease-lost' ? 'lost' : 'at-risk';
    // One event per transition: a ledger that says the same twice changes nothing.
    const repeated = watched.health === health;
    watched.health = health;
    const stopping = this.policy === 'stop-agents' && type !== 'lease-renewed';
    const targets = stopping ? this.#holders(watched.ledger) : [];
    if (repeated && targets.length === 0) return;
    const data: ScalerEventData['lease-renewed'] = {
      lease: event.lease,
      policy: this.policy,
      agents: targets.map((record) => record.agentId),
    };
    if (this.#watched.length > 1) {
      data.pools = Object.keys(this.#core.config.machinePools).filter(
        (pool) => this.#ledgers.of(pool) === watched.ledger,
      );
    }
    if (event.error !== undefined) data.error = event.error;
    this.#core.emitGeneral('', type, this.#message(type, event.lease, targets.length), data);
    // Rows whose release failed while the store was unreachable go now.
    if (type === 'lease-renewed') void this.#core.gate.retryReleases();
    for (const record of targets) {
      if (record.state === 'destroying') {
        // A destroy that failed earlier is tried again now, not at the next maintenance pass.
        if (record.destroyFailed) void this.#core.runDestroy(record);
        continue;
      }
      void this.#core.destroy(record, REASON, true);
    }
  }

  // Every agent that holds (or is getting) a row in a pool this ledger serves.
  #holders(ledger: PoolLedger) {
    const list = [];
    for (const record of this.#core.book.values()) {
      if (record.shares.length === 0 || record.state === 'gone') continue;
      if (record.state === 'destroying' && !record.destroyFailed) continue;
      if (!record.shares.some((share) => this.#ledgers.of(share.pool) === ledger)) continue;
      list.push(record);
    }
    return list;
  }

  #message(type: LeaseEvent['type'], lease: LeaseInfo | undefined, stopped: number): string {
    const deadline =
      lease?.deadline === undefined ? '' : ` (deadline ${new Date(lease.deadline).toISOString()})`;
    if (type === 'lease-renewed') {
      return `The ledger lease was renewed${this.policy === 'report' ? '' : '; spawning in machine pools resumes'}`;
    }
    const what = type === 'lease-lost' ? 'is lost' : 'is at risk';
    const action =
      this.policy === 'stop-agents'
        ? stopped > 0
          ? `destroying ${stopped} agent(s) that hold pool rows and refusing new spawns in machine pools`
          : 'no agent holds a pool row now (any that did are being destroyed); refusing new spawns in machine pools'
        : this.policy === 'stop-spawning'
          ? 'refusing new spawns in machine pools; running agents are kept'
          : 'reporting only (leaseLostPolicy "report")';
    return `The ledger lease ${what}${deadline}: ${action}`;
  }
}

function atRisk(health: LeaseHealth | undefined): boolean {
  return health === 'at-risk' || health === 'lost';
}

// True while the lease is at risk or lost, as last heard or as the ledger says now.
function fenced(watched: Watched): boolean {
  return atRisk(watched.health) || atRisk(read(watched.ledger)?.health);
}

function read(ledger: PoolLedger): LeaseInfo | undefined {
  if (typeof ledger.lease !== 'function') return undefined;
  try {
    return ledger.lease();
  } catch {
    return undefined;
  }
}

const RANK: Record<string, number> = { lost: 3, 'at-risk': 2, held: 1, none: 0 };

// True when `a` should be reported before `b`: worse health, then an earlier deadline.
function worse(a: LeaseInfo, b: LeaseInfo): boolean {
  const ra = RANK[a.health] ?? 0;
  const rb = RANK[b.health] ?? 0;
  if (ra !== rb) return ra > rb;
  return (a.deadline ?? Infinity) < (b.deadline ?? Infinity);
}
