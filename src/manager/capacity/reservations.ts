import type { AgentRecord } from '../agents/agents.js';
import type { FleetCore } from '../core.js';
import type { ScalerState } from '../spawning/scalers.js';
import type { CapacityLimit } from '../types.js';

/**
 * What the manager does when the ledger removed the pool row of an agent that
 * still runs (a lease that lapsed while this instance stalled, an operator):
 *
 * - `report`: emit `reservation-lost` and carry on;
 * - `stop-spawning`: also spawn nothing more in that pool until every lost row
 *   is restored (requests answer `at-capacity` with `limit: 'reservation-lost'`);
 * - `drain`: also drain each agent whose row could not be restored.
 *
 * In every case the manager first tries to write the row back; `reconcile()`
 * tries again for rows still missing.
 */
export type ReservationLostPolicy = 'report' | 'stop-spawning' | 'drain';

const POLICIES: readonly ReservationLostPolicy[] = ['report', 'stop-spawning', 'drain'];

/** @throws TypeError naming the accepted values. @internal */
export function checkReservationLostPolicy(value: unknown): ReservationLostPolicy {
  if (value === undefined) return 'report';
  if (!POLICIES.includes(value as ReservationLostPolicy)) {
    throw new TypeError(
      `Expected \`policies.reservationLost\` to be one of ${POLICIES.join(', ')}, got \`${String(value).slice(0, 64)}\``,
    );
  }
  return value as ReservationLostPolicy;
}

/** Lost pool rows: restore them, and apply the policy to those that stay lost. @internal */
export class LostReservations {
  readonly #core: FleetCore;
  readonly #policy: ReservationLostPolicy;
  /** Agents whose row is missing, by pool. */
  readonly #lost = new Map<string, Set<AgentRecord>>();
  #restoring: Promise<void> | undefined;

  constructor(core: FleetCore, policy: ReservationLostPolicy) {
    if (!POLICIES.includes(policy)) {
      throw new TypeError(
        `Expected \`reservationLostPolicy\` to be one of ${POLICIES.join(', ')}, got \`${String(policy).slice(0, 64)}\``,
      );
    }
    this.#core = core;
    this.#policy = policy;
  }

  /** The ledger reported these agents' rows in `pool` as gone. */
  handle(pool: string, records: readonly AgentRecord[]): void {
    if (records.length === 0) return;
    let set = this.#lost.get(pool);
    if (set === undefined) {
      set = new Set();
      this.#lost.set(pool, set);
    }
    for (const record of records) set.add(record);
    this.#restoring ??= this.restore().finally(() => {
      this.#restoring = undefined;
    });
  }

  /**
   * The refusal `stop-spawning` gives a spawn of `scaler` in `pools` (by
   * default every pool the scaler uses) when one of them lost rows, if any.
   */
  refusal(scaler: ScalerState, pools = scaler.pools): CapacityLimit | undefined {
    if (this.#policy !== 'stop-spawning' || this.#lost.size === 0) return undefined;
    const pool = pools.find((name) => (this.#lost.get(name)?.size ?? 0) > 0);
    if (pool === undefined) return undefined;
    return { limit: 'reservation-lost', scaler: scaler.name, pool, neverFits: false };
  }

  /**
   * Compare the rows of ours each pool lists with the agents that hold one
   * (those granted before the listing began), and handle the missing ones.
   */
  async detect(): Promise<void> {
    const core = this.#core;
    const byPool = new Map<string, AgentRecord[]>();
    for (const record of core.book.values()) {
      if (!record.poolHeld || record.state === 'destroying') continue;
      for (const { pool } of record.shares) {
        if (this.#lost.get(pool)?.has(record)) continue;
        const list = byPool.get(pool) ?? [];
        list.push(record);
        byPool.set(pool, list);
      }
    }
    for (const [pool, held] of byPool) {
      const ledger = core.gate.ledgers.of(pool);
      if (ledger === undefined) continue;
      let listed: Set<string>;
      try {
        listed = new Set((await ledger.list(pool)).map((row) => row.agentId));
      } catch {
        continue; // the ledger is unreachable: nothing can be concluded
      }
      const missing = held.filter(
        (record) => core.book.get(record.agentId) === record && !listed.has(record.agentId),
      );
      for (const record of missing) {
        core.emitFor(
          record,
          'reservation-lost',
          `The pool reservation of ${record.agentId} in "${pool}" is gone; its capacity may now be given to others`,
          { pool, certain: true },
        );
      }
      this.handle(pool, missing);
    }
  }

  /** Try to write every missing row back; apply the policy to those that stay missing. */
  async restore(): Promise<void> {
    const core = this.#core;
    for (const [pool, set] of this.#lost) {
      for (const record of [...set]) {
        if (core.book.get(record.agentId) !== record || record.state === 'destroying') {
          set.delete(record);
          continue;
        }
        const share = record.shares.find((each) => each.pool === pool);
        if (share === undefined) {
          set.delete(record);
          continue;
        }
        let restored = false;
        let error: unknown;
        try {
          const granted = await core.gate.restoreShare(record, share);
          restored = granted.ok;
          if (!granted.ok) error = granted;
        } catch (caught) {
          error = caught;
        }
        // Gone while we asked: the row we may have written goes back.
        if (core.book.get(record.agentId) !== record) {
          if (restored) void core.gate.releasePool(record, [pool]);
          set.delete(record);
          continue;
        }
        if (restored) {
          set.delete(record);
          core.emitFor(
            record,
            'reservation-restored',
            `The pool row of ${record.agentId} in "${pool}" was restored`,
            { pool },
          );
          continue;
        }
        core.emitFor(
          record,
          'reservation-restore-failed',
          `The pool row of ${record.agentId} in "${pool}" could not be restored`,
          { pool, error },
        );
        if (this.#policy === 'drain') {
          set.delete(record);
          void core.drain(record, 'reservation-lost');
        }
      }
      if (set.size === 0) this.#lost.delete(pool);
    }
  }
}
