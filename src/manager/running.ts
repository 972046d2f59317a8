/**
 * Running a manager unattended and stopping it: `start()` (once the stored
 * books are recovered), the timers it arms, the reconcile pass they run, and
 * the `shutdownAll()` sequence.
 */

import { runSweeps } from './agents/sweeps.js';
import { reconcileFleet, SHUTDOWN_TIMEOUT_MS, shutdownFleet, within } from './agents/teardown.js';
import { nonNegative } from './checks.js';
import type { ManagerParts } from './parts.js';
import type { RecoveryResult } from './state/recovery.js';
import type { ReconcileResult, ReconcileSweep, ShutdownOptions, ShutdownResult } from './types.js';

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
export function startManager(parts: ManagerParts, passes: ManagerPasses): void {
  if (parts.core.shuttingDown) return;
  if (parts.core.state !== undefined && (parts.recovering === undefined || parts.recoveryPending)) {
    // Timers and the ledger's reaper start once the stored books are back.
    if (parts.startQueued) return;
    parts.startQueued = true;
    const arm = () => {
      parts.startQueued = false;
      if (!parts.core.shuttingDown) armManager(parts, passes);
    };
    passes.recoverState().then(arm, (error: unknown) => {
      parts.core.emitGeneral('', 'recovery-failed', 'Recovering the stored manager state failed', {
        error,
      });
      arm();
    });
    return;
  }
  armManager(parts, passes);
}

function armManager(parts: ManagerParts, passes: ManagerPasses): void {
  parts.timers.every('maintain', parts.maintenanceIntervalMs, () => passes.maintain());
  if (parts.reconcileIntervalMs !== undefined) {
    parts.timers.every('reconcile', parts.reconcileIntervalMs, () =>
      passes.reconcile().catch(() => undefined),
    );
  }
  if (parts.ledgers.any && !parts.ledgerStarted) {
    for (const ledger of parts.ledgers.all()) ledger.start();
    parts.ledgerStarted = true;
  }
}

/**
 * `reconcile()`: release tracked agents their backend no longer lists, detect
 * and restore lost pool rows, then run the sweeps.
 * @internal
 */
export async function reconcileManager(
  parts: ManagerParts,
  sweeps: ReadonlyMap<string, ReconcileSweep> | undefined,
): Promise<ReconcileResult> {
  const result = await reconcileFleet(parts.core);
  await parts.core.gate.retryReleases();
  await parts.lost.detect();
  await parts.lost.restore();
  if (sweeps) result.sweeps = await runSweeps(parts.core, sweeps, result);
  return result;
}

/**
 * `shutdownAll()`: check the options, then stop timers, agents and the
 * ledger's reaper once (later calls share the first run).
 * @internal
 */
export function shutdownManager(
  parts: ManagerParts,
  options: ShutdownOptions,
): Promise<ShutdownResult> {
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
  parts.shutdown ??= (async () => {
    parts.core.shuttingDown = true;
    parts.timers.stop();
    // A maintenance pass in flight is waited for with the spawns (bounded):
    // a warm-pool spawn that hangs must not hold shutdown forever.
    const result = await shutdownFleet(parts.core, options, parts.maintenance.running);
    const flushed = parts.core.state?.flush();
    if (flushed !== undefined)
      await within(parts.core.clock, flushed, options.timeoutMs ?? SHUTDOWN_TIMEOUT_MS);
    if (parts.ledgerStarted) for (const ledger of parts.ledgers.all()) ledger.stop();
    parts.ledgerStarted = false;
    parts.leases.close();
    return result;
  })();
  return parts.shutdown;
}
