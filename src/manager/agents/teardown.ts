import type { Clock, ClockTimer } from '../../clock.js';
import { BackendError } from '../../errors/index.js';
import type { ScalerBackend } from '../backend.js';
import type { FleetCore } from '../core.js';
import type { ScalerState } from '../spawning/scalers.js';
import type {
  ReconcileResult,
  ShutdownOptions,
  ShutdownResult,
  UnconfirmedAgent,
} from '../types.js';
import type { AgentRecord } from './agents.js';

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

/** The default of `ShutdownOptions.timeoutMs`. @internal */
export const SHUTDOWN_TIMEOUT_MS = 300_000;

/** How long an aborted spawn is given to answer, at most (see `ShutdownOptions.timeoutMs`). @internal */
export const SPAWN_ABORT_GRACE_MS = 5000;

/**
 * Stop every agent and release every reservation, in an order that never
 * releases a pool row while its agent may still run: drain (optional), wait for
 * spawns in flight and the maintenance `pass` in flight (aborting spawns that
 * do not answer), destroy (or the backend's `shutdown()`), and only then
 * release. Every wait is bounded.
 * @internal
 */
export async function shutdownFleet(
  core: FleetCore,
  options: ShutdownOptions,
  pass?: Promise<void>,
): Promise<ShutdownResult> {
  const timeoutMs = options.timeoutMs ?? SHUTDOWN_TIMEOUT_MS;
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
  // Spawns in flight destroy their own agent once the backend answers. No
  // attempt starts after shutdownAll() (Spawner.attempt refuses): this set is
  // every spawn there will be.
  const attempts = Promise.allSettled(
    pass === undefined ? [...core.attempts] : [...core.attempts, pass],
  );
  if (!(await within(core.clock, attempts, timeoutMs))) {
    for (const record of core.book.values()) {
      if (record.spawnSettled || record.abort === undefined) continue;
      record.abort.abort(
        new BackendError(
          record.scaler.name,
          `shutdownAll() aborted the spawn of ${record.agentId}: no answer within ${timeoutMs} ms`,
        ),
      );
    }
    await within(core.clock, attempts, Math.min(timeoutMs, SPAWN_ABORT_GRACE_MS));
  }
  // A destroy that failed (before the call or while it waited) is tried once
  // more: maintenance, which retries them, no longer runs.
  for (const record of core.book.values()) {
    if (
      record.destroyFailed &&
      record.spawnSettled &&
      record.destroyCall === undefined &&
      !viaShutdown.has(record.scaler.backend)
    ) {
      destroys.push(core.runDestroy(record));
    }
  }
  const failedShutdown = new Set<ScalerBackend>();
  const stops: Promise<unknown>[] = [];
  for (const [backend, scalers] of viaShutdown) {
    const names = scalers.map((scaler) => scaler.name).join(', ');
    failedShutdown.add(backend); // until it answers
    // What shutdown() stops: the agents whose spawn has answered (one still
    // unanswered may start its agent after it; its spawn destroys it).
    const stopped: AgentRecord[] = [];
    for (const scaler of scalers) {
      for (const id of scaler.agents) {
        const record = core.book.get(id)!;
        if (record.spawnSettled) stopped.push(record);
      }
    }
    stops.push(
      backend.shutdown!().then(
        () => {
          failedShutdown.delete(backend);
          for (const record of stopped) {
            if (core.book.get(record.agentId) === record) void core.forget(record);
            else if (record.keepPoolRow && !record.disconnected) {
              // Answered after shutdownAll() resolved and kept its rows: stopped now.
              record.released = core.gate.releasePool(record);
            }
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
  await within(core.clock, Promise.all([...stops, ...destroys]), timeoutMs);
  // Whatever is left may still run: forget it in memory but keep its pool rows
  // (released once its spawn or destroy answers, else reaped after the lease).
  const unconfirmed: UnconfirmedAgent[] = [];
  let kept = 0;
  for (const record of core.book.list()) {
    unconfirmed.push({
      agentId: record.agentId,
      scaler: record.scaler.name,
      reason: unconfirmedReason(record, failedShutdown),
    });
    record.keepPoolRow = true;
    kept += record.shares.length > 0 ? 1 : 0;
    void core.forget(record);
  }
  core.book.clearJobs();
  if (unconfirmed.length > 0) {
    core.emitGeneral(
      [...new Set(unconfirmed.map((agent) => agent.scaler))].join(', '),
      'shutdown-incomplete',
      `shutdownAll() could not confirm that ${unconfirmed.length} agent(s) stopped; their pool rows are kept`,
      { unconfirmed: unconfirmed.map((agent) => ({ ...agent })) },
    );
  }
  // A ledger that does not answer is left to its own reaper (bounded waits).
  await within(core.clock, core.gate.settled(), timeoutMs);
  if (kept === 0) {
    for (const ledger of core.gate.ledgers.all()) {
      // The ledger's own reaper removes rows of an instance whose lease ended.
      const released = ledger.releaseAllForInstance().catch(() => undefined);
      await within(core.clock, released, timeoutMs);
    }
  }
  return { unconfirmed };
}

function unconfirmedReason(
  record: AgentRecord,
  failedShutdown: ReadonlySet<ScalerBackend>,
): UnconfirmedAgent['reason'] {
  if (!record.spawnSettled) return 'spawn-unanswered';
  if (record.destroyCall !== undefined) return 'destroy-unanswered';
  if (failedShutdown.has(record.scaler.backend)) return 'shutdown-failed';
  return 'destroy-failed';
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
