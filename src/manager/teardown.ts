import type { Clock, ClockTimer } from '../clock.js';
import type { AgentRecord } from './agents.js';
import type { ScalerBackend } from './backend.js';
import type { FleetCore } from './core.js';
import type { ScalerState } from './scalers.js';
import type { SweepOutcome } from './sweeps.js';

/** Options of `ScalerManager.shutdownAll`. */
export interface ShutdownOptions {
  /**
   * Drain first: idle and spawning agents are destroyed at once, busy ones when
   * their job completes, up to `timeoutMs`; what is left is then destroyed.
   * @default false
   */
  drain?: boolean;
  /**
   * The longest wait for draining agents, and (separately) for spawns in flight
   * to settle before their agents are destroyed. A spawn still unsettled after it
   * keeps its pool row (the ledger's reaper removes it once this instance's lease ends).
   * @default 300000
   */
  timeoutMs?: number;
}

/** What `reconcile` found. */
export interface ReconcileResult {
  /** Tracked agents their backend no longer lists: released and forgotten. */
  released: string[];
  /** Agents a backend lists that this manager does not track (left alone). */
  untracked: UntrackedAgent[];
  /** Backends whose `list()` threw (their agents were left alone). */
  failed: ReconcileFailure[];
  /** What each of the `sweeps` option's sweeps did, in order (absent without `sweeps`). */
  sweeps?: SweepOutcome[];
}

/** An agent a backend runs that the manager does not track. */
export interface UntrackedAgent {
  /** The scaler whose backend listed it (for a backend object serving several scalers, the first of them in config order). */
  scaler: string;
  /** The agent. */
  agentId: string;
}

/** A backend whose `list()` threw during `reconcile`. */
export interface ReconcileFailure {
  /** The scaler. */
  scaler: string;
  /** What `list()` threw. */
  error: unknown;
}

/** Resolve true when `promise` settles within `ms` on `clock`, false otherwise. @internal */
export async function within(
  clock: Clock,
  promise: Promise<unknown>,
  ms: number,
): Promise<boolean> {
  if (!Number.isFinite(ms)) {
    await promise;
    return true;
  }
  let timer: ClockTimer | undefined;
  const timeout = new Promise<false>((resolve) => {
    // Kept referenced: the host awaits shutdown, so the process must not exit mid-way.
    timer = clock.setTimeout(() => resolve(false), ms);
  });
  try {
    return await Promise.race([promise.then(() => true as const), timeout]);
  } finally {
    clock.clearTimeout(timer);
  }
}

/**
 * Stop every agent and release every reservation, in an order that never
 * releases a pool row while its agent may still run: drain (optional), wait for
 * spawns in flight, destroy (or the backend's `shutdown()`), and only then release.
 * @internal
 */
export async function shutdownFleet(core: FleetCore, options: ShutdownOptions): Promise<void> {
  const timeoutMs = options.timeoutMs ?? 300_000;
  if (options.drain === true) {
    const gone = core.book.list().map((record) => core.drain(record, 'shutdown'));
    await within(core.clock, Promise.all(gone), timeoutMs);
  }
  // One backend object may serve several scalers: its shutdown() runs once.
  const viaShutdown = byBackend(core.scalers.values(), 'shutdown');
  const destroys: Promise<void>[] = [];
  for (const record of core.book.list()) {
    if (record.state === 'destroying') {
      destroys.push(record.destroyCall ?? Promise.resolve());
      continue;
    }
    if (viaShutdown.has(record.scaler.backend) && record.spawnSettled) {
      core.book.transition(record, 'destroying');
      record.destroyReason = 'shutdown';
      continue;
    }
    destroys.push(core.destroy(record, 'shutdown', true));
  }
  // Spawns in flight destroy their own agent once the backend answers.
  await within(core.clock, Promise.allSettled([...core.attempts]), timeoutMs);
  const stops: Promise<unknown>[] = [];
  for (const [backend, scalers] of viaShutdown) {
    const names = scalers.map((scaler) => scaler.name).join(', ');
    stops.push(
      backend.shutdown!().then(
        () => {
          for (const scaler of scalers) {
            for (const id of [...scaler.agents]) void core.forget(core.book.get(id)!);
          }
        },
        (error: unknown) => {
          core.emitGeneral(
            names,
            'shutdown-failed',
            `The backend of scaler(s) ${names} failed to shut down`,
            {
              error,
            },
          );
        },
      ),
    );
  }
  await Promise.all([...stops, ...destroys]);
  // Whatever is left may still run (a failed destroy or shutdown, a spawn that
  // never settled): forget it in memory but keep its pool row.
  let kept = 0;
  for (const record of core.book.list()) {
    keepRow(record);
    kept += record.shares.length > 0 ? 1 : 0;
    void core.forget(record);
  }
  core.book.clearJobs();
  await core.gate.settled();
  if (kept === 0) {
    for (const ledger of core.gate.ledgers.all()) {
      try {
        await ledger.releaseAllForInstance();
      } catch {
        // The ledger's own reaper removes rows of an instance whose lease ended.
      }
    }
  }
}

function keepRow(record: AgentRecord): void {
  record.keepPoolRow = true;
}

/**
 * Release tracked agents their backend no longer lists (spawns in flight are
 * left alone); report agents a backend runs untracked.
 * @internal
 */
export async function reconcileFleet(core: FleetCore): Promise<ReconcileResult> {
  const result: ReconcileResult = { released: [], untracked: [], failed: [] };
  // One backend object may serve several scalers: its list() runs once, for all of them.
  for (const [backend, scalers] of byBackend(core.scalers.order, 'list')) {
    let listed: Set<string>;
    try {
      listed = new Set(await backend.list!());
    } catch (error) {
      for (const scaler of scalers) result.failed.push({ scaler: scaler.name, error });
      continue;
    }
    const releases: Promise<void>[] = [];
    for (const scaler of scalers) {
      for (const id of [...scaler.agents]) {
        const record = core.book.get(id);
        if (record === undefined || !record.spawnSettled || listed.has(id)) continue;
        if (record.destroyCall !== undefined) continue; // its destroy is answering now
        core.counters.reconciled++;
        core.emitFor(record, 'gone', `${id} is no longer listed by ${scaler.name}; released`);
        releases.push(core.forget(record));
        result.released.push(id);
      }
    }
    for (const id of listed) {
      if (!core.book.has(id)) result.untracked.push({ scaler: scalers[0]!.name, agentId: id });
    }
    await Promise.all(releases);
  }
  return result;
}

/**
 * The scalers grouped by backend object (in the order given), for the backends
 * that implement `method`: a backend serving several scalers appears once.
 * @internal
 */
export function byBackend(
  scalers: Iterable<ScalerState>,
  method: 'list' | 'shutdown',
): Map<ScalerBackend, ScalerState[]> {
  const groups = new Map<ScalerBackend, ScalerState[]>();
  for (const scaler of scalers) {
    if (typeof scaler.backend[method] !== 'function') continue;
    const group = groups.get(scaler.backend);
    if (group === undefined) groups.set(scaler.backend, [scaler]);
    else group.push(scaler);
  }
  return groups;
}
