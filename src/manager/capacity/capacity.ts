import { CapTracker } from '../../caps/cap-tracker.js';
import type { CapDimension } from '../../caps/types.js';
import type {
  AdoptHeldBy,
  AdoptRequest,
  ReserveRefusal,
  ReserveResult,
} from '../../ledger/types.js';
import { checkLimitRange } from '../../resources/limit-range.js';
import { coresToMillicores } from '../../resources/quantity.js';
import type { ResourceAmount } from '../../resources/types.js';
import type { AgentBook, AgentRecord } from '../agents/agents.js';
import type { AgentResources } from '../backend.js';
import { exceeds } from '../checks.js';
import type { ScalerConfig } from '../config/config.js';
import type { ScalerState } from '../spawning/scalers.js';
import type { CapacityLimit, Usage } from '../types.js';
import {
  addDevices,
  devicesIn,
  type PoolLedgers,
  type PoolShare,
  uncoveredResource,
} from './pools.js';

// The id a request's in-memory reservation is tried under before it has an
// agent id (generated agent ids are at most 253 characters: never this one).
const PENDING_ID = `pending:${'-'.repeat(250)}`;

/**
 * What reserving an agent's rows in all its pools came to: every pool granted
 * (with the device ids assigned), one refused (the pools before it were
 * released), or one failed (`tried` pools may hold a row: release them).
 * @internal
 */
export type PoolsOutcome =
  | { ok: true; devices: Record<string, string[]> | undefined }
  | { ok: false; pool: string; refusal: ReserveRefusal }
  | { ok: 'error'; pool: string; error: unknown; tried: readonly string[] };

/** The CapTracker scope of the orchestrator-wide cap. @internal */
export const GLOBAL_SCOPE = 'global';

/**
 * The capacity gate: every reservation an agent holds, taken in one order
 * (count maxes → scaler and orchestrator caps in memory → the machine pool
 * through the ledger) and given back in one place. A pool row is released
 * only by {@link CapacityGate.releasePool}, which the manager calls once
 * the agent no longer runs (or never ran).
 * @internal
 */
export class CapacityGate {
  readonly #caps = new CapTracker();
  readonly #book: AgentBook;
  readonly #ledgers: PoolLedgers;
  /** The pool caps of the config in force. */
  #machinePools: ScalerConfig['machinePools'] = {};
  readonly #pending = new Set<Promise<void>>();
  /** Rows whose release failed (the ledger could not write), by agent: released again later. */
  readonly #unreleased = new Map<string, AgentRecord>();
  readonly #onReleaseFailed: (record: AgentRecord, pool: string, error: unknown) => void;

  constructor(
    book: AgentBook,
    ledgers: PoolLedgers,
    onReleaseFailed: (record: AgentRecord, pool: string, error: unknown) => void,
  ) {
    this.#book = book;
    this.#ledgers = ledgers;
    this.#onReleaseFailed = onReleaseFailed;
  }

  /** The ledger of each machine pool. */
  get ledgers(): PoolLedgers {
    return this.#ledgers;
  }

  /** Set the caps of a config: the orchestrator's, every scaler's, and register its pools. */
  applyConfig(config: ScalerConfig, scalers: Iterable<ScalerState>): void {
    this.#caps.setCap(GLOBAL_SCOPE, config.resourceCap);
    for (const scaler of scalers) this.#caps.setCap(scaler.scope, scaler.config.resourceCap);
    this.#machinePools = config.machinePools;
    for (const [pool, cap] of Object.entries(config.machinePools)) {
      this.#ledgers.of(pool)?.registerPool(pool, cap);
    }
  }

  /** A retired scaler's cap goes away with it. */
  dropScope(scope: string): void {
    this.#caps.setCap(scope, undefined);
  }

  usage(scope: string): Usage {
    const usage = this.#caps.usage(scope);
    const out: Usage = { cpus: usage.cpus, memBytes: usage.memBytes };
    if (usage.extended !== undefined) out.extended = { ...usage.extended };
    return out;
  }

  /**
   * The policy or cap the job breaks even with nothing held, at this scaler:
   * the scaler's limit range, the orchestrator's, then the caps.
   */
  neverFits(
    config: ScalerConfig,
    scaler: ScalerState,
    shares: readonly PoolShare[],
    resources: AgentResources,
  ): CapacityLimit | undefined {
    for (const [limit, policy] of [
      ['scaler-limit-range', scaler.config.limits],
      ['global-limit-range', config.limits],
    ] as const) {
      if (policy === undefined) continue;
      const checked = checkLimitRange(policy, resources);
      if (!checked.ok) {
        const { ok: _ok, ...rule } = checked;
        return { limit, scaler: scaler.name, ...rule, neverFits: true };
      }
    }
    const requests = resources.requests;
    const global = exceeds(config.resourceCap, requests);
    if (global) return { limit: 'global-cap', scaler: scaler.name, ...global, neverFits: true };
    const own = exceeds(scaler.config.resourceCap, requests, true);
    if (own) return { limit: 'scaler-cap', scaler: scaler.name, ...own, neverFits: true };
    for (const { pool, amount } of shares) {
      const hit = exceeds(config.machinePools[pool], amount, true);
      if (hit) return { limit: 'pool-cap', scaler: scaler.name, pool, ...hit, neverFits: true };
    }
    // With several pools, a resource none of them counts would be held nowhere.
    const pools = shares.map((share) => share.pool);
    const none = uncoveredResource(config.machinePools, pools, requests);
    if (none !== undefined) {
      return {
        limit: 'pool-cap',
        scaler: scaler.name,
        pool: pools[0]!,
        dimension: none.resource as CapDimension,
        requested: none.count,
        used: 0,
        max: 0,
        neverFits: true,
      };
    }
    return undefined;
  }

  /**
   * Count maxes, then the in-memory caps. Only when they grant it is `newId`
   * called (so a refused request uses no agent id), and the caps are held under
   * the id it returns (the caller must then track the agent, so the counts see it).
   */
  reserveInMemory(
    config: ScalerConfig,
    newId: () => string,
    scaler: ScalerState,
    requests: ResourceAmount,
  ): CapacityLimit | { agentId: string } {
    const globalMax = config.globalMaxAgents;
    if (this.#book.size >= globalMax) {
      return {
        limit: 'global-max-agents',
        scaler: scaler.name,
        used: this.#book.size,
        max: globalMax,
        neverFits: false,
      };
    }
    if (scaler.agents.size >= scaler.config.maxAgents) {
      return {
        limit: 'scaler-max-agents',
        scaler: scaler.name,
        used: scaler.agents.size,
        max: scaler.config.maxAgents,
        neverFits: false,
      };
    }
    const scopes = [GLOBAL_SCOPE, scaler.scope];
    // Tried under a placeholder first; nothing runs between it and the real
    // reservation, so the second answer is the first one.
    let granted = this.#caps.tryReserve(PENDING_ID, scopes, requests);
    if (granted.ok) {
      this.#caps.release(PENDING_ID);
      const agentId = newId();
      granted = this.#caps.tryReserve(agentId, scopes, requests);
      if (granted.ok) return { agentId };
    }
    return {
      limit: granted.scope === GLOBAL_SCOPE ? 'global-cap' : 'scaler-cap',
      scaler: scaler.name,
      dimension: granted.dimension,
      requested: granted.requested,
      used: granted.used,
      max: granted.max,
      neverFits: granted.neverFits,
    };
  }

  /**
   * Hold the in-memory caps of an agent that already runs (restart recovery):
   * counted even when a cap lowered since is exceeded (new work then waits).
   */
  holdInMemory(agentId: string, scaler: ScalerState, requests: ResourceAmount): void {
    const scopes = [GLOBAL_SCOPE, scaler.scope];
    const caps = scopes.map((scope) => this.#caps.getCap(scope));
    for (const scope of scopes) this.#caps.setCap(scope, undefined);
    try {
      this.#caps.tryReserve(agentId, scopes, requests);
    } finally {
      for (const [i, scope] of scopes.entries()) this.#caps.setCap(scope, caps[i]);
    }
  }

  /** Give back the in-memory caps of an agent. Idempotent. */
  releaseInMemory(agentId: string): void {
    this.#caps.release(agentId);
  }

  /**
   * Reserve the agent's rows in all its pools, in their (sorted) order, all or
   * nothing: a refusal releases the rows granted before it, awaited, before
   * the answer; a failure answers the pools that may hold a row. `wrap` runs
   * each pool's call (telemetry). Never rejects.
   */
  async reservePools(
    record: AgentRecord,
    wrap?: (pool: string, run: () => Promise<ReserveResult>) => Promise<ReserveResult>,
  ): Promise<PoolsOutcome> {
    let devices: Record<string, string[]> | undefined;
    const granted: string[] = [];
    for (const share of record.shares) {
      const run = () => this.reserveShare(record, share);
      let answer: ReserveResult;
      try {
        answer = await (wrap === undefined ? run() : wrap(share.pool, run));
      } catch (error) {
        return { ok: 'error', pool: share.pool, error, tried: [...granted, share.pool] };
      }
      if (!answer.ok) {
        if (granted.length > 0) await this.releasePool(record, granted);
        return { ok: false, pool: share.pool, refusal: answer };
      }
      granted.push(share.pool);
      devices = addDevices(devices, answer.devices);
    }
    return { ok: true, devices };
  }

  /** Reserve the agent's row in one of its pools (its part of the request there). */
  reserveShare(record: AgentRecord, share: PoolShare): Promise<ReserveResult> {
    const { cpus, memBytes, extended } = share.amount;
    const ledger = this.#ledgers.of(share.pool)!;
    if (extended === undefined || Object.keys(extended).length === 0) {
      return ledger.reserve(share.pool, record.agentId, cpus, memBytes);
    }
    return ledger.reserve(share.pool, record.agentId, cpus, memBytes, {
      extended: { ...extended },
    });
  }

  /**
   * Write back the agent's row in one pool (a lost row): by adoption with the
   * device ids the agent uses, when it has some there and the ledger adopts;
   * else by a reservation.
   */
  async restoreShare(record: AgentRecord, share: PoolShare): Promise<ReserveResult | AdoptHeldBy> {
    const ledger = this.#ledgers.of(share.pool)!;
    const devices = devicesIn(this.#machinePools[share.pool], share.amount, record.devices);
    if (devices === undefined || typeof ledger.adopt !== 'function') {
      return this.reserveShare(record, share);
    }
    const [answer] = await ledger.adopt(share.pool, [adoptRequest(record.agentId, share, devices)]);
    if (answer === undefined)
      throw new Error(`The ledger answered no adoption for ${record.agentId}`);
    if (!answer.ok) return answer;
    return answer.devices === undefined ? { ok: true } : { ok: true, devices: answer.devices };
  }

  /**
   * Release the agent's pool rows (all its pools, or `pools`; idempotent in
   * the ledger). Never rejects: a failure is reported, and the ledger's
   * reaper removes the row later.
   */
  releasePool(record: AgentRecord, pools?: readonly string[]): Promise<void> {
    const list = pools ?? record.shares.map((share) => share.pool);
    if (list.length === 0) return Promise.resolve();
    if (list.length === 1) return this.#releaseOne(record, list[0]!);
    return Promise.all(list.map((pool) => this.#releaseOne(record, pool))).then(() => undefined);
  }

  #releaseOne(record: AgentRecord, pool: string): Promise<void> {
    const ledger = this.#ledgers.of(pool);
    if (ledger === undefined) return Promise.resolve();
    const done = ledger
      .release(pool, record.agentId)
      .then(
        () => {
          this.#unreleased.delete(record.agentId);
        },
        (error: unknown) => {
          this.#unreleased.set(record.agentId, record);
          this.#onReleaseFailed(record, pool, error);
        },
      )
      .finally(() => {
        this.#pending.delete(done);
      });
    this.#pending.add(done);
    return done;
  }

  /**
   * Release again every row whose release failed (a storage outage, an
   * unreachable server): this instance's own rows are never reaped by a peer
   * while it lives, so they would hold the capacity for good. Agents tracked
   * again under the same id are left alone. Never rejects.
   */
  retryReleases(): Promise<void> {
    const retries: Promise<void>[] = [];
    for (const [agentId, record] of [...this.#unreleased]) {
      this.#unreleased.delete(agentId);
      if (this.#book.get(agentId) !== undefined) continue;
      retries.push(this.releasePool(record));
    }
    return Promise.all(retries).then(() => undefined);
  }

  /** Wait for every pool release in flight. */
  async settled(): Promise<void> {
    await Promise.all([...this.#pending]);
  }

  /** What this manager's agents hold in each pool (each agent's part there). */
  poolUsage(): Map<string, Usage> {
    const usage = new Map<string, Usage>();
    for (const record of this.#book.values()) {
      // Only rows the ledger granted: a reservation still waiting for the
      // ledger's answer (or refused by it) holds nothing in the pool.
      if (!record.poolHeld) continue;
      for (const { pool, amount } of record.shares) {
        const held = usage.get(pool) ?? { cpus: 0, memBytes: 0 };
        held.cpus = (coresToMillicores(held.cpus) + coresToMillicores(amount.cpus)) / 1000;
        held.memBytes += amount.memBytes;
        for (const [name, count] of Object.entries(amount.extended ?? {})) {
          if (count <= 0) continue;
          held.extended ??= {};
          held.extended[name] = (held.extended[name] ?? 0) + count;
        }
        usage.set(pool, held);
      }
    }
    return usage;
  }
}

/** What `PoolLedger.adopt` is asked for one agent's row in one pool. @internal */
export function adoptRequest(
  agentId: string,
  share: PoolShare,
  devices: Record<string, string[]> | undefined,
): AdoptRequest {
  const { cpus, memBytes, extended } = share.amount;
  const request: AdoptRequest = { agentId, cpus, memBytes };
  if (extended !== undefined && Object.keys(extended).length > 0)
    request.extended = { ...extended };
  if (devices !== undefined) request.devices = devices;
  return request;
}
