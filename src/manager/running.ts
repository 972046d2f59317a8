/**
 * Running a manager unattended and stopping it: `start()` (once the stored
 * books are recovered), the timers it arms, the reconcile pass they run, and
 * the `shutdownAll()` sequence.
 */
import { nonNegative } from './checks.js';
import type { ReconcileResult } from './fleet-types.js';
import type { Rooms } from './rooms.js';
import type { RecoveryResult } from './state/recovery.js';
import { type ReconcileSweep, runSweeps } from './sweeps.js';
import { reconcileFleet, type ShutdownOptions, shutdownFleet } from './teardown.js';

/**
 * What a running manager calls on itself: the manager's own public passes, so
 * the timers run exactly what a host calling them would.
 * @internal
 */
export interface ManagerPasses {
  maintain(): Promise<void>;
  reconcile(): Promise<ReconcileResult>;
  recoverState(): Promise<RecoveryResult>;
}

/**
 * `start()`: arm the timers and the ledger's reaper, after recovery when a
 * state store holds books. Idempotent.
 * @internal
 */
export function startManager(rooms: Rooms, passes: ManagerPasses): void {
  if (rooms.core.shuttingDown) return;
  if (rooms.core.state !== undefined && (rooms.recovering === undefined || rooms.recoveryPending)) {
    // Timers and the ledger's reaper start once the stored books are back.
    if (rooms.startQueued) return;
    rooms.startQueued = true;
    const arm = () => {
      rooms.startQueued = false;
      if (!rooms.core.shuttingDown) armManager(rooms, passes);
    };
    passes.recoverState().then(arm, (error: unknown) => {
      rooms.core.emitGeneral('', 'recovery-failed', 'Recovering the stored manager state failed', {
        error,
      });
      arm();
    });
    return;
  }
  armManager(rooms, passes);
}

function armManager(rooms: Rooms, passes: ManagerPasses): void {
  rooms.timers.every('maintain', rooms.maintenanceIntervalMs, () => passes.maintain());
  if (rooms.reconcileIntervalMs !== undefined) {
    rooms.timers.every('reconcile', rooms.reconcileIntervalMs, () =>
      passes.reconcile().catch(() => undefined),
    );
  }
  if (rooms.ledger && !rooms.ledgerStarted) {
    rooms.ledger.start();
    rooms.ledgerStarted = true;
  }
}

/**
 * `reconcile()`: release tracked agents their backend no longer lists, detect
 * and restore lost pool rows, then run the sweeps.
 * @internal
 */
export async function reconcileManager(
  rooms: Rooms,
  sweeps: ReadonlyMap<string, ReconcileSweep> | undefined,
): Promise<ReconcileResult> {
  const result = await reconcileFleet(rooms.core);
  await rooms.core.gate.retryReleases();
  await rooms.lost.detect();
  await rooms.lost.restore();
  if (sweeps) result.sweeps = await runSweeps(rooms.core, sweeps, result);
  return result;
}

/**
 * `shutdownAll()`: check the options, then stop timers, agents and the
 * ledger's reaper once (later calls share the first run).
 * @internal
 */
export function shutdownManager(rooms: Rooms, options: ShutdownOptions): Promise<void> {
  if (typeof options !== 'object' || options === null) {
    throw new TypeError(`Expected \`options\` to be an object, got \`${String(options)}\``);
  }
  for (const key of Object.keys(options)) {
    if (key !== 'drain' && key !== 'timeoutMs') {
      throw new TypeError(
        `Unknown shutdown option \`${key.slice(0, 64)}\`; expected drain, timeoutMs`,
      );
    }
  }
  if (options.timeoutMs !== undefined) nonNegative('timeoutMs', options.timeoutMs, 0);
  rooms.shutdown ??= (async () => {
    rooms.core.shuttingDown = true;
    rooms.timers.stop();
    await rooms.maintenance.running;
    await shutdownFleet(rooms.core, options);
    await rooms.core.state?.flush();
    if (rooms.ledger && rooms.ledgerStarted) rooms.ledger.stop();
    rooms.ledgerStarted = false;
    rooms.leases.close();
  })();
  return rooms.shutdown;
}
