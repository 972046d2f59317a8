/**
 * The sweeps `reconcile()` runs after comparing with the backends: host-given
 * functions that remove what agents no longer alive left behind outside the
 * manager (per-agent caps keys, nftables isolation rules). The manager imports
 * neither adapter; the host passes closures over `sweepAgentCaps` and
 * `sweepIsolation`.
 */
import type { FleetCore } from '../core.js';
import type { ReconcileResult, ReconcileSweep, SweepOutcome } from '../types.js';

const MAX_SWEEP_NAME_LENGTH = 63;

/** Check the `sweeps` option: an object of functions, by name. */
export function checkSweeps(sweeps: unknown): ReadonlyMap<string, ReconcileSweep> | undefined {
  if (sweeps === undefined) return undefined;
  if (typeof sweeps !== 'object' || sweeps === null || Array.isArray(sweeps)) {
    throw new TypeError(
      `Expected \`sweeps\` to be an object of functions such as { agentCaps: (live) => sweepAgentCaps(kv, live) }, got \`${Array.isArray(sweeps) ? 'array' : String(sweeps)}\``,
    );
  }
  const out = new Map<string, ReconcileSweep>();
  for (const [name, sweep] of Object.entries(sweeps)) {
    if (name === '' || name.length > MAX_SWEEP_NAME_LENGTH) {
      throw new TypeError(
        `Expected every sweep name to be 1 to ${MAX_SWEEP_NAME_LENGTH} characters, got \`${name.slice(0, 80)}\``,
      );
    }
    if (typeof sweep !== 'function') {
      throw new TypeError(`Expected sweep \`${name}\` to be a function, got \`${typeof sweep}\``);
    }
    out.set(name, sweep as ReconcileSweep);
  }
  return out;
}

function liveView(core: FleetCore, result: ReconcileResult): Iterable<string> {
  return {
    *[Symbol.iterator]() {
      for (const record of core.book.list()) yield record.agentId;
      for (const agent of result.untracked) yield agent.agentId;
    },
  };
}

function answerOf(answer: unknown, name: string): string[] {
  const removed = (answer as { removedAgents?: unknown } | null)?.removedAgents;
  if (!Array.isArray(removed) || removed.some((id) => typeof id !== 'string')) {
    throw new TypeError(
      `Expected sweep \`${name}\` to answer { removedAgents: string[] }, got \`${String(answer)}\``,
    );
  }
  return [...removed];
}

/**
 * Run every sweep, one after the other, after a reconcile pass; never rejects
 * (a failed sweep is an outcome and a `sweep-failed` event). Sweeps do not run
 * when some backend's agents could not be listed.
 */
export async function runSweeps(
  core: FleetCore,
  sweeps: ReadonlyMap<string, ReconcileSweep>,
  result: ReconcileResult,
): Promise<SweepOutcome[]> {
  const unknown =
    result.failed.length > 0 ||
    core.scalers.order.some((scaler) => typeof scaler.backend.list !== 'function');
  const outcomes: SweepOutcome[] = [];
  for (const [name, sweep] of sweeps) {
    if (unknown) {
      outcomes.push({ name, removedAgents: [], skipped: 'live-set-unknown' });
      continue;
    }
    try {
      const removedAgents = answerOf(await sweep(liveView(core, result)), name);
      outcomes.push({ name, removedAgents });
      if (removedAgents.length > 0) {
        core.emitGeneral(
          '',
          'swept',
          `Sweep ${name} removed the leftovers of ${removedAgents.length} agents no longer alive`,
          { sweep: name, removedAgents },
        );
      }
    } catch (error) {
      outcomes.push({ name, removedAgents: [], error });
      core.emitGeneral('', 'sweep-failed', `Sweep ${name} failed`, { sweep: name, error });
    }
  }
  if (unknown && sweeps.size > 0) {
    core.emitGeneral(
      '',
      'sweeps-skipped',
      'Sweeps skipped: a backend has no list() or its list() failed, so the live agents are unknown',
      { sweeps: [...sweeps.keys()] },
    );
  }
  return outcomes;
}
