/**
 * The shutdown storm (issue 38): 1,200 requests with churn, a fifth of the
 * spawns failing and a tenth hanging, about 200 spawns in flight when
 * `shutdownAll()` is called. Afterwards no agent runs on any backend and no
 * pool row is left, in every run. Before the fix, a request refused by its
 * first scaler (pool full) went on to spawn on the next one after
 * `shutdownAll()` had taken its list: that agent ran on, with its row.
 */

import type { ScalerConfigInput } from 'scaler-primitives/manager';
import { createTestFleet, type FakeBackend } from 'scaler-primitives/testing';
import { describe, expect, it } from 'vitest';

const REQUESTS = 1200;
const BURST = 200;

// Two scalers answer the same labels, each on its own pool: when the first
// pool is full, a request goes on to the second scaler (after an await).
const config: ScalerConfigInput = {
  globalMaxAgents: 1000,
  machinePools: { a: { maxCpu: 120 }, b: { maxCpu: 400 } },
  scalers: [
    {
      name: 'first',
      type: 'vm',
      maxAgents: 500,
      machinePool: 'a',
      idleTimeoutSeconds: 5,
      spawnBackoff: { failureThreshold: 1000 },
      labelSets: [{ labels: ['linux'], resources: { cpus: 1 } }],
    },
    {
      name: 'second',
      type: 'vm',
      maxAgents: 500,
      machinePool: 'b',
      idleTimeoutSeconds: 5,
      spawnBackoff: { failureThreshold: 1000 },
      labelSets: [{ labels: ['linux'], resources: { cpus: 1 } }],
    },
  ],
};

/** Mulberry32: a seeded PRNG, so each run repeats exactly. */
function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

type Fate = 'fail' | 'hang' | 'late' | 'ok';

/**
 * Script a backend: each spawn's fate is drawn when it is called (20% fail,
 * 5% hang until aborted, 5% answer only after 10 minutes and ignore the abort,
 * the rest answer within 0-8 s); destroys take 0-2 s.
 */
function script(backend: FakeBackend, random: () => number, fates: Map<string, Fate>): void {
  const fateOf = (agentId: string | undefined): Fate => {
    if (agentId === undefined) return 'ok';
    let fate = fates.get(agentId);
    if (fate === undefined) {
      const r = random();
      fate = r < 0.2 ? 'fail' : r < 0.25 ? 'hang' : r < 0.3 ? 'late' : 'ok';
      fates.set(agentId, fate);
    }
    return fate;
  };
  backend.script({
    times: Number.POSITIVE_INFINITY,
    when: (call) => fateOf(call.agentId) === 'fail',
    fail: new Error('scripted spawn failure'),
    latencyMs: 500,
  });
  backend.script({
    times: Number.POSITIVE_INFINITY,
    when: (call) => fateOf(call.agentId) === 'hang',
    hang: true,
  });
  backend.script({
    times: Number.POSITIVE_INFINITY,
    when: (call) => fateOf(call.agentId) === 'late',
    latencyMs: 600_000,
  });
  for (const ms of [0, 1000, 3000, 8000]) {
    backend.script({
      times: Number.POSITIVE_INFINITY,
      when: (call) => fateOf(call.agentId) === 'ok' && random() < 0.34,
      latencyMs: ms,
    });
  }
  for (const ms of [0, 500, 2000]) {
    backend.script({
      method: 'destroy',
      times: Number.POSITIVE_INFINITY,
      when: () => random() < 0.5,
      latencyMs: ms,
    });
  }
}

async function storm(seed: number) {
  const random = prng(seed);
  const fleet = createTestFleet(config, {
    seed,
    // Odd seeds: backends without shutdown() (destroy per agent); even seeds: with it.
    backend: { registerAfterMs: 2000, jobDurationMs: 4000, shutdown: seed % 2 === 0 },
    backends: { second: { registerAfterMs: 1500, jobDurationMs: 3000 } },
  });
  const { manager, clock, ledger, backends } = fleet;
  const fates = new Map<string, Fate>();
  for (const backend of Object.values(backends)) script(backend, random, fates);
  const running = () => Object.values(backends).flatMap((backend) => backend.running());
  const rows = () => ['a', 'b'].flatMap((pool) => ledger.inspect(pool).live.map((r) => r.agentId));
  // Churn: the first 1,000 requests over 100 s of clock time, agents
  // registering, running their job, going idle and being reaped meanwhile.
  for (let i = 0; i < REQUESTS - BURST; i++) {
    void manager.requestScale({ jobId: `job-${i}`, labels: ['linux'] });
    if (i % 10 === 9) await clock.advance(1000);
  }
  // The last 200 at once: pool `a` is full, so most of them are refused there
  // (after the ledger answered) and go on to scaler `second`.
  for (let i = REQUESTS - BURST; i < REQUESTS; i++) {
    void manager.requestScale({ jobId: `job-${i}`, labels: ['linux'] });
  }
  const inFlight = manager.listAgents({ state: 'spawning' }).length;
  const shutdown = manager.shutdownAll({ timeoutMs: 30_000 });
  // Drive the clock until shutdownAll resolves: it must not wait forever.
  let done = false;
  void shutdown.then(() => {
    done = true;
  });
  for (let step = 0; step < 120 && !done; step++) await clock.advance(1000);
  const atResolve = {
    resolved: done,
    unconfirmed: done ? ((await shutdown)?.unconfirmed ?? []) : [],
    running: running(),
    rows: rows(),
  };
  // The late spawns answer (10 minutes after they were called): each must be
  // destroyed and its rows released at once.
  await clock.advance(700_000);
  await clock.settle();
  return { inFlight, atResolve, running: running(), rows: rows(), fates, fleet };
}

describe('shutdownAll() storm: 1,200 requests, 20% failing and 10% hanging spawns', () => {
  it('leaves no agent running and no pool row, in 10 runs of 10', async () => {
    const failures: string[] = [];
    for (let seed = 1; seed <= 10; seed++) {
      const { inFlight, atResolve, running, rows, fates, fleet } = await storm(seed);
      expect(inFlight, `seed ${seed}: spawns in flight at shutdownAll()`).toBeGreaterThanOrEqual(
        BURST,
      );
      const problems: string[] = [];
      if (!atResolve.resolved) problems.push('shutdownAll() did not resolve in 120 s');
      const late = new Set([...fates].filter(([, fate]) => fate === 'late').map(([id]) => id));
      const unconfirmed = new Set(atResolve.unconfirmed.map((agent) => agent.agentId));
      // When it resolved: only what it reports unconfirmed may run or hold a row,
      // and that is only spawns that ignored the abort and still had not answered.
      const unreported = [...atResolve.running, ...atResolve.rows].filter(
        (id) => !unconfirmed.has(id),
      );
      if (unreported.length > 0) {
        problems.push(
          `at resolve, ${new Set(unreported).size} agents ran or held rows unreported (${[...new Set(unreported)].slice(0, 5).join(', ')})`,
        );
      }
      for (const agent of atResolve.unconfirmed) {
        if (!late.has(agent.agentId) || agent.reason !== 'spawn-unanswered') {
          problems.push(
            `unconfirmed ${agent.agentId} (${agent.reason}, fate ${fates.get(agent.agentId)})`,
          );
        }
      }
      // Once the late spawns answered: nothing runs, no row is left.
      if (running.length > 0) {
        problems.push(`${running.length} agents running (${running.slice(0, 5).join(', ')})`);
      }
      if (rows.length > 0)
        problems.push(`${rows.length} rows left (${rows.slice(0, 5).join(', ')})`);
      // No row was released while its agent ran, and the books agree with the ledger.
      try {
        fleet.checkInvariants();
      } catch (error) {
        problems.push(String(error));
      }
      const hung = Object.values(fleet.backends)
        .flatMap((backend) => backend.callsOf('spawn'))
        .filter((call) => fates.get(call.agentId!) === 'hang');
      if (hung.some((call) => call.outcome !== 'failed')) {
        problems.push('a hanging spawn was not aborted');
      }
      if (problems.length > 0) failures.push(`seed ${seed}: ${problems.join('; ')}`);
    }
    expect(failures).toEqual([]);
  }, 60_000);
});
