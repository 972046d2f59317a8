/**
 * Soak: 10,000 simulated jobs through one manager with random spawn failures,
 * agents that crash, drains, schedule changes, reloads, reconciles and time
 * passing on a TestClock. After every step the fleet's invariants hold (no cap
 * exceeded, agents above a lowered maxAgents only drain, no pool row released
 * while its agent may run, no row leaked) and no busy agent was destroyed;
 * after shutdownAll(), nothing runs and the pool is empty.
 */

import type { ScalerConfigInput } from 'scaler-primitives/manager';
import { createTestFleet } from 'scaler-primitives/testing';
import { describe, expect, it } from 'vitest';

const JOBS = 10_000;
const GLOBAL_MAX = 8;
const POOL_CPU = 5;

function config(variant: number): ScalerConfigInput {
  const schedules = [
    [],
    [{ cron: '* * * * *', size: 2 }],
    [{ cron: '*/2 * * * *', timezone: 'Europe/Berlin', size: 0 }],
  ][variant % 3]!;
  return {
    globalMaxAgents: GLOBAL_MAX,
    resourceCap: { maxCpu: 6 },
    machinePools: { host: { maxCpu: POOL_CPU } },
    scalers: [
      {
        name: 'vm',
        type: 'c',
        maxAgents: variant % 2 === 0 ? 5 : 2,
        machinePool: 'host',
        labelSets: [{ labels: ['linux'], resources: { cpus: 1 } }],
        warmPool: { size: 1, idleTimeoutSeconds: 30, schedules },
        maxJobsPerAgent: variant % 4 === 3 ? 1 : 5,
        maxAgentLifetimeSeconds: 900,
        maxSpawnsPerMinute: 20,
        spawnBackoff: { failureThreshold: 3, initialMs: 500, maxMs: 5000 },
      },
      {
        name: 'other',
        type: 'c',
        maxAgents: 4,
        labelSets: [{ labels: ['linux'], resources: { cpus: 1 } }],
        idleTimeoutSeconds: 60,
      },
    ],
  };
}

function mulberry32(seed: number) {
  let a = seed;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

describe('soak', () => {
  it(`runs ${JOBS} jobs with faults and keeps every guarantee after every step`, async () => {
    const rng = mulberry32(12);
    const pick = <T>(items: readonly T[]): T | undefined =>
      items.length === 0 ? undefined : items[Math.floor(rng() * items.length)];
    const violations: string[] = [];
    /** Agents running a job, as the simulated dispatcher knows it. */
    const busy = new Map<string, string>();
    const registered = new Set<string>();
    let shuttingDown = false;
    const fleet = createTestFleet(config(0), {
      start: '2026-01-05T12:00:00Z',
      startManager: false,
      backend: {
        shutdown: false,
        onCall: (call) => {
          if (call.method === 'destroy' && busy.has(call.agentId!) && !shuttingDown) {
            violations.push(`busy agent ${call.agentId} destroyed`);
          }
        },
      },
      manager: { random: rng, registrationTimeoutMs: 20_000, demandHoldMs: 2000 },
    });
    const { manager, ledger, clock } = fleet;
    const backends = [fleet.backends.vm!, fleet.backends.other!];
    const [backend, other] = backends as [(typeof backends)[0], (typeof backends)[0]];
    const check = (where: string) => {
      try {
        fleet.checkInvariants();
      } catch (error) {
        violations.push(`${where}: ${(error as Error).message}`);
      }
    };

    let jobs = 0;
    let steps = 0;
    let variant = 0;
    let nextJob = 0;
    const waiting: string[] = [];
    while (jobs < JOBS) {
      steps++;
      const r = rng();
      if (r < 0.3) {
        const job = waiting.shift() ?? `job-${++nextJob}`;
        if (job === `job-${nextJob}`) jobs++;
        if (rng() < 0.05) backend.failNext(1);
        if (rng() < 0.05) other.failNext(1);
        const result = await manager.requestScale({ jobId: job, labels: ['linux'] });
        if (result.kind !== 'spawned' && result.kind !== 'already-spawning') waiting.push(job);
      } else if (r < 0.5) {
        const id = pick(backends.flatMap((b) => b.running()).filter((a) => !registered.has(a)));
        if (id !== undefined) {
          registered.add(id);
          const answer = manager.onAgentRegistered(id, []);
          if (answer?.boundJobId !== undefined) busy.set(id, answer.boundJobId);
        }
      } else if (r < 0.68) {
        const id = pick([...busy.keys()]);
        if (id !== undefined) {
          busy.delete(id);
          manager.onJobComplete(id);
        }
      } else if (r < 0.78) {
        const job = waiting.shift();
        const id = pick([...registered].filter((a) => !busy.has(a)));
        if (job !== undefined && id !== undefined && manager.canRunJob(id, ['linux'])) {
          busy.set(id, job);
          manager.correlateAgentToJob(id, 'run', job);
        } else if (job !== undefined) {
          waiting.unshift(job);
        }
      } else if (r < 0.8) {
        // An agent crashes: it no longer runs, then the dispatcher notices.
        const id = pick([...registered]);
        if (id !== undefined) {
          busy.delete(id);
          registered.delete(id);
          const owner = backends.find((b) => b.agent(id) !== undefined);
          if (owner !== undefined) await owner.crash(id);
          else await manager.onAgentDisconnected(id);
        }
      } else if (r < 0.82) {
        const id = pick([...registered]);
        if (id !== undefined) void manager.drain(id);
      } else if (r < 0.95) {
        await clock.advance(Math.floor(rng() * 20_000));
        await manager.maintain();
      } else if (r < 0.96) {
        variant++;
        const result = await manager.reload(config(variant));
        if (!result.ok) violations.push(`reload ${variant}: ${JSON.stringify(result.errors)}`);
      } else {
        await manager.reconcile();
      }
      await new Promise<void>((resolve) => setImmediate(resolve));
      check(`step ${steps}`);
      if (violations.length > 0) break;
    }
    expect(violations).toEqual([]);
    const status = manager.getStatus();
    expect(status.counters.coldStarts + status.counters.warmSpawns).toBeGreaterThan(1000);
    expect(status.counters.spawnFailures).toBeGreaterThan(10);
    expect(status.counters.drained).toBeGreaterThan(10);

    shuttingDown = true;
    const spawned = backends.flatMap((b) => b.spawned().map((s) => s.agentId));
    const shutdown = manager.shutdownAll({ drain: true, timeoutMs: 30_000 });
    await clock.settle(); // its wait starts now
    await clock.advance(30_000);
    await shutdown;
    check('after shutdown');
    expect(violations).toEqual([]);
    for (const b of backends) expect(b.running()).toEqual([]);
    expect(ledger.inspect('host').live).toEqual([]);
    expect(manager.getStatus().globalActiveCount).toBe(0);
    expect(spawned.length).toBeGreaterThan(1000);
  }, 300_000);
});
