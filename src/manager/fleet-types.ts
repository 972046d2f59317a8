/**
 * The answers of the fleet-wide calls: `reload` (the config's validation) and
 * `reconcile` (what was released, what runs untracked, which backends failed).
 */
import type { ConfigIssue } from '../errors/input.js';
import type { SweepOutcome } from './sweeps.js';

/**
 * The answer to `reload`.
 *
 * @example
 * ```ts
 * import type { ScalerManager, ValidationResult } from 'scaler-primitives/manager';
 * declare const manager: ScalerManager;
 * declare const text: string;
 * const result: ValidationResult = await manager.reload(JSON.parse(text));
 * if (!result.ok) for (const e of result.errors) console.error(`${e.path.join('.')}: ${e.message}`);
 * ```
 */
export interface ValidationResult {
  /** True when the new config was applied. */
  ok: boolean;
  /** Every problem found (empty when `ok`); nothing was changed when there is one. */
  errors: ConfigIssue[];
}

/**
 * What `reconcile` found.
 *
 * @example
 * ```ts
 * import type { ReconcileResult, ScalerManager } from 'scaler-primitives/manager';
 * declare const manager: ScalerManager;
 * const result: ReconcileResult = await manager.reconcile();
 * console.log(`released ${result.released.length}, untracked ${result.untracked.length}, failed ${result.failed.length}`);
 * ```
 */
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

/**
 * An agent a backend runs that the manager does not track.
 *
 * @example
 * ```ts
 * import type { ScalerManager, UntrackedAgent } from 'scaler-primitives/manager';
 * declare const manager: ScalerManager;
 * const { untracked } = await manager.reconcile();
 * for (const agent of untracked as UntrackedAgent[]) console.warn(`${agent.scaler} runs ${agent.agentId}, not ours`);
 * ```
 */
export interface UntrackedAgent {
  /** The scaler whose backend listed it (for a backend object serving several scalers, the first of them in config order). */
  scaler: string;
  /** The agent. */
  agentId: string;
}

/**
 * A backend whose `list()` threw during `reconcile`.
 *
 * @example
 * ```ts
 * import type { ReconcileFailure, ScalerManager } from 'scaler-primitives/manager';
 * declare const manager: ScalerManager;
 * const { failed } = await manager.reconcile();
 * for (const f of failed as ReconcileFailure[]) console.error(`list() of ${f.scaler} failed`, f.error);
 * ```
 */
export interface ReconcileFailure {
  /** The scaler. */
  scaler: string;
  /** What `list()` threw. */
  error: unknown;
}
