/**
 * Recovery after the host restarted: the stored books are checked against
 * what each backend lists, re-attached (agents, job bindings, pool rows taken
 * over under the same agent ids), and what is stored but no longer runs, or
 * runs but is not stored, is settled by policy.
 */
import { ErrorCode, isScalerError } from '../../errors/base.js';
import type { AdoptRequest, AdoptResult } from '../../ledger/types.js';
import type { AgentRecord } from '../agents/agents.js';
import { adoptRequest } from '../capacity/capacity.js';
import { addDevices, devicesIn, splitRequest } from '../capacity/pools.js';
import type { FleetCore } from '../core.js';
import { newMailbox } from '../events.js';
import type { ScalerState } from '../spawning/scalers.js';
import type { AgentState } from '../types.js';
import type { AgentStateRecord } from './types.js';

/**
 * What `recoverState()` does with an agent a backend lists that no stored
 * record names (started by hand, by another manager sharing the backend, or
 * recorded in a store that was lost):
 *
 * - `leave`: report it (`RecoveryResult.unrecorded`) and leave it alone;
 * - `destroy`: ask its backend to destroy it.
 */
export type UnrecordedAgentPolicy = 'leave' | 'destroy';

/** Options of restart recovery (from the `policies` option of `ScalerManager`). @internal */
export interface RecoveryOptions {
  /**
   * What to do with agents a backend lists that no stored record names.
   * @default 'leave'
   */
  unrecordedAgents?: UnrecordedAgentPolicy;
}

/** What `recoverState()` found and did. */
export interface RecoveryResult {
  /** Stored agents re-attached (tracked again in their stored state). */
  recovered: string[];
  /** Stored agents their backend no longer lists: forgotten, pool rows released. */
  released: string[];
  /** What became of each recovered agent's pool row. */
  poolRows: {
    /** The agent. */
    agentId: string;
    /** Its pool. */
    pool: string;
    /**
     * `adopted`: its old row was taken over in place; `reserved`: it was gone
     * (the restart outlasted the lease and a peer reaped it) and was reserved
     * again; `destroyed`: it was gone and did not fit (or the ledger failed),
     * and `policies.leaseLost` is `stop-agents`, so the agent was destroyed (a
     * recovered agent never runs without a row); `lost`: the same under the
     * other lease policies: `reservation-lost` handling applies
     * (`policies.reservationLost`).
     */
    how: 'adopted' | 'reserved' | 'destroyed' | 'lost';
  }[];
  /** Agents a backend lists that no record names, with what was done. */
  unrecorded: {
    /** The scaler whose backend listed it. */
    scaler: string;
    /** The agent. */
    agentId: string;
    /** What was done: left alone, or destroyed. */
    action: 'leave' | 'destroy';
  }[];
  /** Stored agents of a scaler this config no longer has: left in the store, untouched. */
  unknownScaler: string[];
  /** Backends whose `list()` threw: their stored agents were re-attached unchecked. */
  failed: {
    /** The scaler. */
    scaler: string;
    /** What `list()` threw. */
    error: unknown;
  }[];
}

/** What recovery did with one recovered agent's pool row. @internal */
export type RecoveredPoolRow = RecoveryResult['poolRows'][number];

/** An agent a backend runs that no stored record names. @internal */
export type UnrecordedAgent = RecoveryResult['unrecorded'][number];

const POLICIES: readonly UnrecordedAgentPolicy[] = ['leave', 'destroy'];

/** @throws TypeError naming the accepted values. @internal */
export function checkRecoveryOptions(policy: unknown): Required<RecoveryOptions> {
  if (policy === undefined) return { unrecordedAgents: 'leave' };
  if (!POLICIES.includes(policy as UnrecordedAgentPolicy)) {
    throw new TypeError(
      `Expected \`policies.unrecordedAgents\` to be one of ${POLICIES.join(', ')}, got \`${String(policy).slice(0, 64)}\``,
    );
  }
  return { unrecordedAgents: policy as UnrecordedAgentPolicy };
}

/**
 * Recover the stored books into `core` (which tracks nothing yet). Never
 * rejects for a backend or ledger failure (they are in the result and in
 * events); rejects when the store cannot be read (a corrupt store is never reset).
 * @internal
 */
export async function recoverFleet(
  core: FleetCore,
  options: Required<RecoveryOptions>,
  onLost: (pool: string, records: AgentRecord[]) => void,
  destroyUnreserved = false,
): Promise<RecoveryResult> {
  const writer = core.state;
  const result: RecoveryResult = {
    recovered: [],
    released: [],
    poolRows: [],
    unrecorded: [],
    unknownScaler: [],
    failed: [],
  };
  if (writer === undefined) return result;
  await openLeases(core);
  const stored = await writer.store.load();
  const listed = new Map<ScalerState, Set<string> | undefined>();
  for (const scaler of core.scalers.order) {
    if (typeof scaler.backend.list !== 'function') {
      listed.set(scaler, undefined);
      continue;
    }
    try {
      listed.set(scaler, new Set(await scaler.backend.list()));
    } catch (error) {
      result.failed.push({ scaler: scaler.name, error });
      listed.set(scaler, undefined);
    }
  }
  const storedIds = new Set(stored.map((s) => s.agentId));
  const byPool = new Map<string, AgentRecord[]>();
  const released: AgentRecord[] = [];
  const destroys: Promise<void>[] = [];
  for (const saved of stored) {
    const scaler = core.scalers.get(saved.scaler);
    if (scaler === undefined || core.book.has(saved.agentId)) {
      result.unknownScaler.push(saved.agentId);
      continue;
    }
    const running = listed.get(scaler);
    const record = revive(core, scaler, saved);
    // Not listed: it does not run (its spawn never started, or it ended while
    // the host was down). Its row, if any, goes back; its record is deleted.
    const gone = running !== undefined && !running.has(saved.agentId);
    if (gone) {
      record.state = 'destroying';
      core.book.add(record);
      core.gate.holdInMemory(record.agentId, scaler, record.resources.requests);
      result.released.push(record.agentId);
      released.push(record);
      continue;
    }
    core.book.add(record);
    if (record.state !== 'spawning') core.book.unbindSpawn(record);
    core.gate.holdInMemory(record.agentId, scaler, record.resources.requests);
    result.recovered.push(record.agentId);
    core.emitFor(record, 'recovered', `${record.agentId} recovered (${record.state})`, {
      state: record.state as Exclude<AgentState, 'gone'>,
      jobId: record.jobId,
    });
    for (const { pool } of record.shares) {
      if (core.gate.ledgers.of(pool) === undefined) continue;
      const list = byPool.get(pool) ?? [];
      list.push(record);
      byPool.set(pool, list);
    }
    if (record.state === 'destroying') destroys.push(core.runDestroy(record));
  }
  await Promise.all(
    [...byPool].map(([pool, records]) =>
      reclaimRows(core, pool, records, result, onLost, destroyUnreserved, destroys),
    ),
  );
  // Only after the takeovers: a release writes the pool, and a write drops the
  // rows the dead process left that were not taken over yet.
  await Promise.all(
    released.map((record) => {
      core.emitFor(
        record,
        'gone',
        `${record.agentId} is no longer listed by ${record.scaler.name}; released`,
      );
      return core.forget(record);
    }),
  );
  await releaseUnnamedRows(core, listed, storedIds);
  for (const [scaler, ids] of listed) {
    if (ids === undefined) continue;
    for (const agentId of ids) {
      if (storedIds.has(agentId) || core.book.has(agentId)) continue;
      const action = options.unrecordedAgents;
      result.unrecorded.push({ scaler: scaler.name, agentId, action });
      if (action === 'destroy') {
        destroys.push(
          scaler.backend.destroy(agentId).then(
            () => undefined,
            (error: unknown) =>
              core.emitGeneral(
                scaler.name,
                'destroy-failed',
                `Destroying unrecorded ${agentId} failed`,
                {
                  agentId,
                  error,
                },
              ),
          ),
        );
      }
    }
  }
  await Promise.all(destroys);
  return result;
}

// Before anything is revived: a ledger that can (MachineLedger.openLease)
// makes its lease now, continuing the lease of a dead predecessor with this
// instance id while it is within its deadline, so that the agents watching it
// keep running; a live process holding this instance id refuses recovery here,
// before it touches an agent or a row. Other failures are left to the calls
// that follow (they report them as they do).
async function openLeases(core: FleetCore): Promise<void> {
  for (const ledger of core.gate.ledgers.all()) {
    const open = (ledger as { openLease?: unknown }).openLease;
    if (typeof open !== 'function') continue;
    try {
      await (open as () => Promise<unknown>).call(ledger);
    } catch (error) {
      if (isScalerError(error, ErrorCode.LEDGER_INSTANCE_IN_USE)) throw error;
    }
  }
}

// The tracked agent a stored record describes, in its stored state. Its spawn
// counts as settled: whatever the backend was doing before the restart, the
// registration timeout prunes an agent that never registers.
function revive(core: FleetCore, scaler: ScalerState, saved: AgentStateRecord): AgentRecord {
  const pools = saved.pools ?? (saved.pool === undefined ? [] : [saved.pool]);
  const requests = { ...saved.resources.requests };
  const record: AgentRecord = {
    agentId: saved.agentId,
    scaler,
    jobId: saved.jobId,
    warm: saved.warm,
    state: saved.state,
    labels: [...saved.labels],
    resources: {
      requests,
      limits: { ...saved.resources.limits },
    },
    shares: pools.length === 0 ? [] : splitRequest(core.config.machinePools, pools, requests),
    poolHeld: false,
    devices: saved.devices === undefined ? undefined : addDevices(undefined, saved.devices),
    spawnedAt: saved.spawnedAt,
    spawnSettled: true,
    registeredAt: saved.registeredAt,
    idleSince: saved.idleSince,
    jobsCompleted: saved.jobsCompleted,
    context: saved.context,
    mailbox: newMailbox(),
    disconnected: false,
    destroyReason: saved.destroyReason,
    destroyCall: undefined,
    destroyFailed: false,
    keepPoolRow: false,
    goneWaiters: undefined,
    released: undefined,
  };
  if (saved.runId !== undefined && saved.jobId !== undefined) {
    record.mailbox.runId = saved.runId;
    record.mailbox.correlatedJobId = saved.jobId;
  }
  return record;
}

// Take the agents' old rows over (same agent ids, this process's identity),
// all of a pool in one write, or reserve them again when gone; never a second
// row for one agent.
async function reclaimRows(
  core: FleetCore,
  pool: string,
  records: AgentRecord[],
  result: RecoveryResult,
  onLost: (pool: string, records: AgentRecord[]) => void,
  destroyUnreserved: boolean,
  destroys: Promise<void>[],
): Promise<void> {
  const ledger = core.gate.ledgers.of(pool)!;
  const cap = core.config.machinePools[pool];
  const agents: AdoptRequest[] = records.map((record) => {
    const share = record.shares.find((each) => each.pool === pool)!;
    return adoptRequest(record.agentId, share, devicesIn(cap, share.amount, record.devices));
  });
  let answers: (AdoptResult | undefined)[] = [];
  let error: unknown;
  try {
    if (typeof ledger.adopt === 'function') {
      answers = await ledger.adopt(pool, agents);
    } else {
      answers = await Promise.all(
        agents.map(async ({ agentId, cpus, memBytes, extended }) => {
          const reserved = await ledger.reserve(
            pool,
            agentId,
            cpus,
            memBytes,
            extended === undefined ? undefined : { extended },
          );
          return reserved.ok ? { ok: true as const, adopted: false } : reserved;
        }),
      );
    }
  } catch (caught) {
    error = caught;
  }
  const lost: AgentRecord[] = [];
  records.forEach((record, i) => {
    const answer = answers[i];
    if (core.book.get(record.agentId) !== record) {
      if (answer?.ok) void core.gate.releasePool(record, [pool]);
      return;
    }
    if (answer?.ok) {
      record.poolHeld = true;
      // The ids the row holds now (its own when the store had none).
      record.devices = addDevices(record.devices, answer.devices);
      core.book.touch(record);
      result.poolRows.push({
        agentId: record.agentId,
        pool,
        how: answer.adopted ? 'adopted' : 'reserved',
      });
      return;
    }
    result.poolRows.push({
      agentId: record.agentId,
      pool,
      how: destroyUnreserved ? 'destroyed' : 'lost',
    });
    core.emitFor(
      record,
      'reservation-lost',
      `The pool row of recovered ${record.agentId} in "${pool}" could not be taken over or reserved again; its capacity may be in use by others${destroyUnreserved ? ' (destroying it: leaseLostPolicy "stop-agents")' : ''}`,
      { pool, certain: true, error: error ?? answer },
    );
    if (destroyUnreserved) {
      if (record.state !== 'destroying') destroys.push(core.destroy(record, 'no-pool-row', true));
    } else lost.push(record);
  });
  if (lost.length > 0) onLost(pool, lost);
}

// Rows of this instance that no recovered agent names: the host was killed
// after a grant and before the agent's record was stored (between the grants
// of a multi-pool agent, say), or after the record was deleted and before the
// rows were released. On a NATS pool such a row stays live until the dead
// process's lease runs out; recovery releases it now. Only when every backend
// answered `list()`: a row whose agent a backend still runs is left alone (the
// agent is reported as unrecorded), and so is one a stored record names (of a
// scaler this config no longer has). Then stale rows are reaped, so the pools
// hold nothing of the dead process once recovery has run.
async function releaseUnnamedRows(
  core: FleetCore,
  listed: ReadonlyMap<ScalerState, Set<string> | undefined>,
  storedIds: ReadonlySet<string>,
): Promise<void> {
  const running = new Set<string>();
  let known = true;
  for (const ids of listed.values()) {
    if (ids === undefined) known = false;
    else for (const id of ids) running.add(id);
  }
  await Promise.all(
    Object.keys(core.config.machinePools).map(async (pool) => {
      const ledger = core.gate.ledgers.of(pool);
      if (ledger === undefined) return;
      try {
        if (known) {
          const own = (ledger as { instanceId?: unknown }).instanceId;
          for (const row of await ledger.list(pool)) {
            if (typeof own === 'string' && row.instanceId !== own) continue;
            const { agentId } = row;
            if (core.book.has(agentId) || storedIds.has(agentId) || running.has(agentId)) continue;
            // Without options only this instance's row is removed.
            await ledger.release(pool, agentId);
          }
        }
        await ledger.reapStale(pool);
      } catch {
        // The ledger's reaper, or the lease running out, removes them later.
      }
    }),
  );
}
