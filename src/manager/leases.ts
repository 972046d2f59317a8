/**
 * The manager and its ledger's lease: what it does when the lease is at risk
 * (stop the agents that hold pool rows, or stop spawning, or only say so),
 * what it hands a backend so an agent can watch the lease itself, and what
 * the status says of it.
 */
import type { LeaseEvent, LeaseHealth, LeaseInfo, PoolLedger } from '../ledger/types.js';
import type { SpawnLease } from './backend.js';
import type { CapacityLimit } from './capacity.js';
import type { FleetCore } from './core.js';
import type { ScalerState } from './scalers.js';
import type { LeaseStatus } from './status.js';

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
      `Expected \`leaseLostPolicy\` to be one of ${POLICIES.join(', ')}, got \`${String(value).slice(0, 64)}\``,
    );
  }
  return value as LeaseLostPolicy;
}

const REASON = 'lease-at-risk';

/** The ledger's lease as the manager follows it. @internal */
export class LeaseWatch {
  readonly policy: LeaseLostPolicy;
  readonly #core: FleetCore;
  readonly #ledger: PoolLedger | undefined;
  #off: (() => void) | undefined;
  /** The health the last event said (or the ledger said at construction). */
  #health: LeaseHealth | undefined;

  constructor(core: FleetCore, ledger: PoolLedger | undefined, policy: LeaseLostPolicy) {
    this.#core = core;
    this.#ledger = ledger;
    this.policy = policy;
    this.#health = this.#read()?.health;
    if (typeof ledger?.onLeaseEvent === 'function') {
      this.#off = ledger.onLeaseEvent((event) => this.#on(event));
    }
  }

  /** True while the lease is at risk or lost, as last heard or as the ledger says now. */
  get fenced(): boolean {
    return atRisk(this.#health) || atRisk(this.#read()?.health);
  }

  /** The refusal this policy gives a scaler in a machine pool while the lease is at risk. */
  refusal(scaler: ScalerState): CapacityLimit | undefined {
    if (this.policy === 'report') return undefined;
    const pool = scaler.config.machinePool;
    if (pool === undefined || !this.fenced) return undefined;
    const lease = this.#read();
    const health = lease?.health === 'lost' || this.#health === 'lost' ? 'lost' : 'at-risk';
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

  /** What a backend passes to an agent in a machine pool, so it can watch the lease. */
  spawnLease(): SpawnLease | undefined {
    const lease = this.#read();
    if (lease === undefined) return undefined;
    return { location: { ...lease.location }, leaseMs: lease.leaseMs, marginMs: lease.marginMs };
  }

  /** The lease in the status, when the ledger can say. */
  status(): LeaseStatus | undefined {
    const lease = this.#read();
    if (lease === undefined) return undefined;
    const status: LeaseStatus = {
      health: lease.health,
      leaseMs: lease.leaseMs,
      marginMs: lease.marginMs,
      policy: this.policy,
      spawningStopped: this.policy !== 'report' && this.fenced,
    };
    if (lease.confirmedAt !== undefined) status.confirmedAt = lease.confirmedAt;
    if (lease.deadline !== undefined) status.deadline = lease.deadline;
    return status;
  }

  /** Stop listening (shutdown). */
  close(): void {
    this.#off?.();
    this.#off = undefined;
  }

  #read(): LeaseInfo | undefined {
    if (typeof this.#ledger?.lease !== 'function') return undefined;
    try {
      return this.#ledger.lease();
    } catch {
      return undefined;
    }
  }

  #on(event: LeaseEvent): void {
    const type = event?.type;
    if (type !== 'lease-at-risk' && type !== 'lease-lost' && type !== 'lease-renewed') return;
    this.#health = type === 'lease-renewed' ? 'held' : type === 'lease-lost' ? 'lost' : 'at-risk';
    const stopping = this.policy === 'stop-agents' && type !== 'lease-renewed';
    const targets = stopping ? this.#holders() : [];
    const data: Record<string, unknown> = {
      lease: event.lease,
      policy: this.policy,
      agents: targets.map((record) => record.agentId),
    };
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

  // Every agent that holds (or is getting) a row in a machine pool.
  #holders() {
    const list = [];
    for (const record of this.#core.book.values()) {
      if (record.pool === undefined || record.state === 'gone') continue;
      if (record.state === 'destroying' && !record.destroyFailed) continue;
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
        ? `destroying ${stopped} agent(s) that hold pool rows and refusing new spawns in machine pools`
        : this.policy === 'stop-spawning'
          ? 'refusing new spawns in machine pools; running agents are kept'
          : 'reporting only (leaseLostPolicy "report")';
    return `The ledger lease ${what}${deadline}: ${action}`;
  }
}

function atRisk(health: LeaseHealth | undefined): boolean {
  return health === 'at-risk' || health === 'lost';
}
