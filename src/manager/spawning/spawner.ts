import { randomBytes } from 'node:crypto';
import { BackendError } from '../../errors/index.js';
import { isLedgerLeaseExpiredError } from '../../errors/ledger.js';
import {
  combineResourceLayers,
  type ReadLayer,
  readResourceLayer,
} from '../../resources/resolve.js';
import type { ResourceLimits, ResourceRequest } from '../../resources/types.js';
import type { AgentRecord } from '../agents/agents.js';
import type { AgentResources, ScalerBackend, SpawnLease, SpawnRequest } from '../backend.js';
import type { Pacing } from '../capacity/pacing.js';
import { type PoolShare, splitRequest } from '../capacity/pools.js';
import { resourceLayers, type ScalerConfig, type ScalerEntryConfig } from '../config/config.js';
import type { FleetCore } from '../core.js';
import { newMailbox } from '../events.js';
import type { CapacityLimit, ScaleResult } from '../types.js';
import type { LabelSetState, ScalerState } from './scalers.js';

/**
 * One spawn attempt, start to end: reserve in memory, then in the pool, then
 * ask the backend. Whatever happens, the books end straight: a refusal or
 * failure releases what was taken; an agent doomed while it spawned (pruned,
 * drained, shut down) is destroyed when its spawn settles and only then
 * releases its pool row.
 * @internal
 */
export class Spawner {
  readonly #core: FleetCore;
  readonly #generateAgentId: (scaler: string) => string;
  readonly #pacing: Pacing;
  /** The config's resource layers per label set (label sets are rebuilt by a reload). */
  readonly #layers = new WeakMap<LabelSetState, ResolvedLayers>();
  /** Called when the pool ledger reports rows of ours lost. */
  readonly #onLost: (pool: string, records: AgentRecord[]) => void;
  /** The ledger leases an agent in machine pools is told about. */
  readonly #leases: (pools: readonly string[]) => SpawnLease[];

  constructor(
    core: FleetCore,
    generateAgentId: ((scaler: string) => string) | undefined,
    pacing: Pacing,
    onLost: (pool: string, records: AgentRecord[]) => void,
    leases: (pools: readonly string[]) => SpawnLease[],
  ) {
    if (generateAgentId !== undefined && typeof generateAgentId !== 'function') {
      throw new TypeError(
        `Expected \`generateAgentId\` to be a function, got \`${typeof generateAgentId}\``,
      );
    }
    this.#core = core;
    this.#generateAgentId = generateAgentId ?? defaultAgentId;
    this.#pacing = pacing;
    this.#onLost = onLost;
    this.#leases = leases;
  }

  /**
   * The job's resources after layered defaults (job, label set, scaler, scaler
   * limit range, global, global limit range). The layers below the job come
   * from the config, which never changes in place (a reload replaces it): they
   * are read once per config, and a job without resources of its own gets one
   * shared, frozen answer.
   */
  resolve(
    scaler: ScalerState,
    labelSet: LabelSetState,
    job: ResourceRequest | undefined,
  ): AgentResources {
    const entry = this.#layersOf(scaler, labelSet);
    if (job === undefined) {
      entry.plain ??= freezeResources(combineResourceLayers(entry.read));
      return entry.plain;
    }
    const read = [...entry.read];
    read[0] = readResourceLayer(job, 0, LAYER_NAMES[0]!, {
      convention: this.#core.config.quantityConvention ?? 'binary',
    });
    const { requests, limits } = combineResourceLayers(read);
    return { requests, limits };
  }

  // The read config layers of a label set, for the config in force.
  #layersOf(scaler: ScalerState, labelSet: LabelSetState): ResolvedLayers {
    const config = this.#core.config;
    const cached = this.#layers.get(labelSet);
    if (cached?.config === config && cached.scalerConfig === scaler.config) return cached;
    const layers = resourceLayers(config, scaler.config, labelSet.resources, undefined);
    const read: Array<ReadLayer | undefined> = [];
    for (let i = 1; i < layers.length; i++) {
      const layer = layers[i];
      if (layer === undefined) continue;
      read[i] = readResourceLayer(layer, i, LAYER_NAMES[i]!);
      if (read[i]!.error !== undefined) break;
    }
    const entry: ResolvedLayers = { config, scalerConfig: scaler.config, read };
    this.#layers.set(labelSet, entry);
    return entry;
  }

  /** The policy or cap `resources` break with nothing held (see `CapacityGate.neverFits`). */
  #neverFits(
    scaler: ScalerState,
    labelSet: LabelSetState,
    resources: AgentResources,
    shares: readonly PoolShare[],
  ) {
    const core = this.#core;
    const entry = this.#layers.get(labelSet);
    // The shared answer for a job without resources: its verdict is the config's too.
    if (
      entry === undefined ||
      entry.plain !== resources ||
      entry.config !== core.config ||
      entry.scalerConfig !== scaler.config
    ) {
      return core.gate.neverFits(core.config, scaler, shares, resources);
    }
    if (!('never' in entry)) {
      entry.never = core.gate.neverFits(core.config, scaler, shares, resources);
    }
    return entry.never === undefined ? undefined : { ...entry.never };
  }

  /** Reserve and spawn; returns a result, or the limit that refused (try the next scaler). */
  attempt(
    scaler: ScalerState,
    labelSet: LabelSetState,
    resources: AgentResources,
    jobId: string | undefined,
  ): Promise<ScaleResult | CapacityLimit> {
    const core = this.#core;
    // The one entry point to the backend: after shutdownAll() nothing starts (a request
    // refused by one scaler must not go on to spawn on the next).
    if (core.shuttingDown) return Promise.resolve({ kind: 'shutting-down' });
    const pools = labelSet.pools;
    const shares =
      pools.length === 0
        ? NO_SHARES
        : splitRequest(core.config.machinePools, pools, resources.requests);
    const never = this.#neverFits(scaler, labelSet, resources, shares);
    if (never) return Promise.resolve(never);
    const paced = this.#pacing.check(scaler);
    if (paced) return Promise.resolve(paced);
    const held = core.gate.reserveInMemory(
      core.config,
      () => this.#newAgentId(scaler.name),
      scaler,
      resources.requests,
    );
    if (!('agentId' in held)) return Promise.resolve(held);
    const { agentId } = held;
    this.#pacing.started(scaler);
    const now = core.now();
    const record: AgentRecord = {
      agentId,
      scaler,
      jobId,
      warm: jobId === undefined,
      state: 'spawning',
      labels: labelSet.labels,
      resources,
      shares,
      poolHeld: false,
      devices: undefined,
      spawnedAt: now,
      spawnSettled: false,
      registeredAt: 0,
      idleSince: 0,
      jobsCompleted: 0,
      context: undefined,
      mailbox: newMailbox(),
      disconnected: false,
      destroyReason: undefined,
      destroyCall: undefined,
      destroyFailed: false,
      keepPoolRow: false,
      goneWaiters: undefined,
      released: undefined,
    };
    // Tracked from here on: counts toward every max, visible to already-spawning.
    core.book.add(record);
    if (jobId !== undefined) scaler.jobSpawnsInFlight++;
    return core.track(this.#run(record, labelSet));
  }

  async #run(record: AgentRecord, labelSet: LabelSetState): Promise<ScaleResult | CapacityLimit> {
    try {
      return await this.#spawn(record, labelSet);
    } finally {
      if (!record.warm) record.scaler.jobSpawnsInFlight--;
    }
  }

  async #spawn(record: AgentRecord, labelSet: LabelSetState): Promise<ScaleResult | CapacityLimit> {
    const core = this.#core;
    const { agentId, scaler, jobId, resources } = record;
    if (record.shares.length > 0) {
      const outcome = await core.gate.reservePools(
        record,
        core.telemetry === undefined
          ? undefined
          : (pool, run) => core.telemetry!.reserve(record, pool, run),
      );
      if (outcome.ok === 'error') {
        const { pool, error, tried } = outcome;
        // A store that failed mid-write may hold the row: releasing is idempotent.
        record.spawnSettled = true;
        if (record.state === 'gone') {
          // Forgotten by shutdownAll while the ledger answered: the row may be there.
          if (!record.disconnected) await core.gate.releasePool(record, tried);
        } else if (record.shares.length === 1) void core.forget(record);
        else await core.forget(record, tried); // every pool's row goes before the answer
        if (isLedgerLeaseExpiredError(error)) {
          this.#onLost(pool, core.reservationsLost(pool, agentId, error));
        }
        core.counters.spawnFailures++;
        core.emitFor(record, 'spawn-failed', `Reserving in pool "${pool}" failed`, {
          stage: 'reserve',
          error,
          ...(record.shares.length === 1 ? {} : { pool }),
        });
        this.#pacing.failed(scaler, error);
        return { kind: 'spawn-failed', scaler: scaler.name, agentId, stage: 'reserve', error };
      }
      if (!outcome.ok) {
        const granted = outcome.refusal;
        record.spawnSettled = true;
        core.rollback(record); // nothing is held: the pools before it were released
        return {
          limit: 'pool-cap',
          scaler: scaler.name,
          pool: granted.pool,
          dimension: granted.dimension,
          requested: granted.requested,
          used: granted.used,
          max: granted.max,
          neverFits: granted.neverFits,
        };
      }
      record.poolHeld = true;
      record.devices = outcome.devices;
      core.book.touch(record);
      if (record.state === 'destroying' || record.state === 'gone') {
        // Pruned, drained or shut down while the ledger answered: nothing was
        // spawned, so the rows go back at once.
        record.spawnSettled = true;
        if (record.state === 'gone') await core.gate.releasePool(record);
        else await core.forget(record);
        return lostWhileSpawning(record, 'reserve');
      }
    }

    // The record is durable before the backend starts anything: no agent runs unrecorded.
    const durable = core.state?.durable(record);
    if (durable !== undefined) {
      const failed = await durable.then(
        () => undefined,
        (error: unknown) => ({ error }),
      );
      const lost =
        failed === undefined && (record.state === 'destroying' || record.state === 'gone');
      if (failed !== undefined || lost) {
        record.spawnSettled = true;
        if (record.state === 'gone') await core.gate.releasePool(record);
        else await core.forget(record);
        if (lost) return lostWhileSpawning(record, 'reserve');
        core.counters.spawnFailures++;
        core.emitFor(record, 'spawn-failed', `Recording ${agentId} in the state store failed`, {
          stage: 'state',
          error: failed!.error,
        });
        this.#pacing.failed(scaler, failed!.error);
        return {
          kind: 'spawn-failed',
          scaler: scaler.name,
          agentId,
          stage: 'state',
          error: failed!.error,
        };
      }
    }
    core.emitFor(record, 'spawning', `Spawning ${agentId} on ${scaler.name}`, {
      jobId,
      warm: record.warm,
    });
    const request: SpawnRequest = {
      agentId,
      scaler: scaler.name,
      warm: record.warm,
      labels: [...labelSet.labels],
      labelSetIndex: labelSet.index,
      mandatoryLabels: [...scaler.config.mandatoryLabels],
      resources: {
        requests: copyAmount(resources.requests),
        limits: copyAmount(resources.limits),
      },
      emit: (event) => core.backendEvent(agentId, scaler.name, event),
    };
    if (jobId !== undefined) request.jobId = jobId;
    if (record.shares.length > 0) {
      const leases = this.#leases(record.shares.map((share) => share.pool));
      if (leases.length > 0) {
        request.leases = leases;
        request.lease = leases[0]!;
      }
    }
    if (record.devices !== undefined) {
      const devices: Record<string, string[]> = {};
      for (const [name, ids] of Object.entries(record.devices)) devices[name] = [...ids];
      request.devices = devices;
    }
    const abort = new AbortController();
    record.abort = abort;
    request.signal = abort.signal;
    let result: Awaited<ReturnType<ScalerBackend['spawn']>>;
    try {
      result = await (core.telemetry?.spawn(record, () => scaler.backend.spawn(request)) ??
        scaler.backend.spawn(request));
    } catch (error) {
      record.spawnSettled = true;
      record.abort = undefined;
      const doomed = record.state === 'destroying';
      if (record.state === 'gone') {
        // Forgotten by shutdownAll while it spawned (its row kept): nothing runs now.
        if (!record.disconnected) await core.gate.releasePool(record);
      } else {
        // Nothing runs: everything goes back.
        await core.forget(record);
        core.counters.spawnFailures++;
        core.emitFor(
          record,
          'spawn-failed',
          `The backend of scaler ${scaler.name} failed to spawn ${agentId}`,
          {
            stage: 'spawn',
            error,
          },
        );
        if (!doomed) this.#pacing.failed(scaler, error);
      }
      return { kind: 'spawn-failed', scaler: scaler.name, agentId, stage: 'spawn', error };
    }
    record.spawnSettled = true;
    record.abort = undefined;
    core.book.touch(record);
    if (record.state === 'destroying') {
      // Doomed before the backend answered: it must not live on. Its rows go
      // back once the backend confirmed the destroy.
      await core.runDestroy(record);
      return lostWhileSpawning(record, 'spawn');
    }
    if (record.state === 'gone' && !record.disconnected) {
      // Forgotten by shutdownAll while it spawned (its row kept): destroy what
      // the backend just started, then release its rows.
      await core.runDestroy(record);
      return lostWhileSpawning(record, 'spawn');
    }
    // (A fast agent may even have registered, run and disconnected by now: still a spawn.)
    if (result && typeof result === 'object' && result.context) record.context = result.context;
    if (record.warm) core.counters.warmSpawns++;
    else core.counters.coldStarts++;
    core.emitFor(record, 'spawned', `The backend of scaler ${scaler.name} is starting ${agentId}`);
    return {
      kind: 'spawned',
      scaler: scaler.name,
      agentId,
      labels: [...labelSet.labels],
      resources: { requests: copyAmount(resources.requests), limits: copyAmount(resources.limits) },
    };
  }

  #newAgentId(scaler: string): string {
    for (let i = 0; i < 5; i++) {
      const id = this.#generateAgentId(scaler);
      if (typeof id !== 'string' || id === '' || id.length > 253) {
        throw new TypeError(
          `Expected \`generateAgentId\` to return a non-empty string of at most 253 characters, got \`${String(id).slice(0, 80)}\``,
        );
      }
      if (!this.#core.book.has(id) && !this.#core.book.wasForgotten(id)) return id;
    }
    throw new TypeError('Expected `generateAgentId` to return unique ids, got repeats');
  }
}

function lostWhileSpawning(record: AgentRecord, stage: 'reserve' | 'spawn'): ScaleResult {
  return {
    kind: 'spawn-failed',
    scaler: record.scaler.name,
    agentId: record.agentId,
    stage,
    error: new BackendError(
      record.scaler.name,
      `Agent ${record.agentId} was pruned, drained or shut down before its spawn finished; it was destroyed and its reservations released.`,
    ),
  };
}

function defaultAgentId(scaler: string): string {
  return `${scaler}-${randomBytes(6).toString('hex')}`;
}

// The backend gets its own copy: what it changes does not reach the caps.
function copyAmount<T extends ResourceLimits>(amount: T): T {
  return (
    amount.extended === undefined ? { ...amount } : { ...amount, extended: { ...amount.extended } }
  ) as T;
}

// The resource layers of a label set under one config, read once.
interface ResolvedLayers {
  readonly config: ScalerConfig;
  readonly scalerConfig: ScalerEntryConfig;
  /** Read layers by position in LAYER_NAMES; the job's slot (0) is empty. */
  readonly read: ReadonlyArray<ReadLayer | undefined>;
  /** The resources of a job that declares none, once resolved (frozen: records share it). */
  plain?: AgentResources;
  /** Whether `plain` never fits, once checked. */
  never?: CapacityLimit | undefined;
}

function freezeResources(resolved: AgentResources): AgentResources {
  const { requests, limits } = resolved;
  if (requests.extended !== undefined) Object.freeze(requests.extended);
  if (limits.extended !== undefined) Object.freeze(limits.extended);
  return Object.freeze({ requests: Object.freeze(requests), limits: Object.freeze(limits) });
}

const NO_SHARES: readonly PoolShare[] = Object.freeze([]);

const LAYER_NAMES = ['job', 'labelSet', 'scaler', 'scaler limits', 'global', 'global limits'];
