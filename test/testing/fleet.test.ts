import type { ScalerConfigInput } from 'scaler-primitives/manager';
import {
  createTestFleet,
  FleetInvariantError,
  MemoryPoolLedger,
  MemoryPoolStore,
} from 'scaler-primitives/testing';
import { describe, expect, it } from 'vitest';

const config: ScalerConfigInput = {
  globalMaxAgents: 6,
  machinePools: { host: { maxCpu: 8, maxMemory: '16Gi' } },
  scalers: [
    {
      name: 'linux',
      type: 'container',
      maxAgents: 4,
      machinePool: 'host',
      labelSets: [{ labels: ['linux'], resources: { cpus: 2, memory: '4Gi' } }],
      warmPool: { size: 1, idleTimeoutSeconds: 600 },
    },
    {
      name: 'mac',
      type: 'vm',
      maxAgents: 2,
      labelSets: [{ labels: ['mac'], resources: { cpus: 1, memory: '1Gi' } }],
    },
  ],
};

describe('createTestFleet', () => {
  it('wires a manager, a backend per scaler and the ledger on one TestClock', async () => {
    const fleet = createTestFleet(config, {
      backend: { registerAfterMs: 20_000, jobDurationMs: 10 * 60_000 },
    });
    expect(Object.keys(fleet.backends)).toEqual(['linux', 'mac']);
    const result = await fleet.manager.requestScale({ jobId: 'job-1', labels: ['linux'] });
    expect(result).toMatchObject({ kind: 'spawned', agentId: 'linux-1' });
    fleet.checkInvariants();
    await fleet.clock.advance(20_000);
    expect(fleet.backends.linux!.agent('linux-1')).toMatchObject({ state: 'busy', jobId: 'job-1' });
    fleet.checkInvariants();
    await fleet.clock.advance(10 * 60_000);
    expect(fleet.backends.linux!.jobsCompleted.map((j) => j.jobId)).toEqual(['job-1']);
    // The warm pool started linux-2 at the first maintenance pass (5 s); idle
    // agents go after ten idle minutes, except the one the warm pool's target
    // (size 1) keeps: linux-2 goes, linux-1 stays as the warm agent.
    expect(fleet.events.filter((e) => e.kind === 'idle').map((e) => e.agentId)).toEqual([
      'linux-1',
    ]);
    await fleet.clock.advance(11 * 60_000);
    expect(fleet.manager.getStatus().counters.idleDestroyed).toBe(1);
    expect(fleet.backends.linux!.callsOf('destroy').map((c) => c.agentId)).toEqual(['linux-2']);
    expect(fleet.trackedAgents()).toEqual({ linux: ['linux-1'] });
    fleet.checkInvariants();
    await fleet.shutdown();
    expect(fleet.backends.linux!.running()).toEqual([]);
    expect(await fleet.ledger.store.read('host')?.reservations).toEqual([]);
  });

  it('a spawn that never registers is pruned after the registration timeout', async () => {
    // Maintenance passes come every 5 s plus up to 10% jitter (from the seeded
    // random): a window of 5.5 s after the timeout holds one for every seed.
    // (A 5 s window held one only for some jitter sequences.)
    const timeoutMs = 5 * 60_000;
    const window = 5000 * 1.1;
    for (const seed of [1, 2, 3, 7, 42, 1234, 99_999, 0xffff_ffff]) {
      const fleet = createTestFleet(config, {
        seed,
        manager: { registrationTimeoutMs: timeoutMs, maintenanceIntervalMs: 5000 },
      });
      await fleet.manager.requestScale({ jobId: 'job-1', labels: ['mac'] });
      await fleet.clock.advance(timeoutMs - 1);
      expect(
        fleet.events.map((e) => e.kind),
        `seed ${seed}`,
      ).not.toContain('pruned');
      await fleet.clock.advance(window + 1);
      const pruned = fleet.events.filter((e) => e.kind === 'pruned');
      expect(
        pruned.map((e) => e.agentId),
        `seed ${seed}`,
      ).toEqual(['mac-1']);
      expect(fleet.backends.mac!.callsOf('destroy').map((c) => c.agentId)).toEqual(['mac-1']);
      // The linux warm agent, or the one that replaced it if it was pruned too.
      expect(fleet.manager.getStatus().globalActiveCount, `seed ${seed}`).toBe(1);
      fleet.checkInvariants();
      await fleet.shutdown();
    }
  });

  it('checkInvariants names a row without an agent and an agent without its row', async () => {
    const fleet = createTestFleet(config, { startManager: false });
    await fleet.manager.requestScale({ jobId: 'job-1', labels: ['linux'] });
    fleet.checkInvariants();
    // Someone releases the agent's row behind the manager's back...
    await fleet.ledger.release('host', 'linux-1');
    // ...and a row appears for an agent the manager never started.
    await fleet.ledger.reserve('host', 'ghost', 1, 0);
    let error: unknown;
    try {
      fleet.checkInvariants();
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(FleetInvariantError);
    expect((error as FleetInvariantError).violations).toEqual([
      'pool host: row for ghost (1 cores, 0 bytes) but the manager tracks no such agent in this pool',
      'agent linux-1 (pool host): tracked by the manager, but it has no row',
      'pool host: the manager says it holds 2 cores / 4294967296 bytes, its rows sum to 1 cores / 0 bytes',
      'pool host: the row of linux-1 was released while the agent still ran on backend linux (at 2026-01-05T09:00:00.000Z)',
    ]);
    expect((error as Error).message).toMatch(
      /^Fleet invariants broken at 2026-01-05T09:00:00.000Z \(4\):\n {2}- pool host: row for ghost/,
    );
  });

  it('checkInvariants remembers a row released while its agent ran, even once the agent is gone', async () => {
    const fleet = createTestFleet(config, { startManager: false });
    await fleet.manager.requestScale({ jobId: 'job-1', labels: ['linux'] });
    const linux = fleet.backends.linux!;
    // A release that waits for nothing: the agent still runs when its row goes.
    await fleet.ledger.release('host', 'linux-1');
    await linux.crash('linux-1'); // then it goes, and the manager forgets it
    await fleet.clock.advance(60 * 60_000);
    expect(() => fleet.checkInvariants()).toThrow(
      /the row of linux-1 was released while the agent still ran on backend linux \(at 2026-01-05T09:00:00.000Z\)/,
    );
    // Releasing a row whose agent is gone, or a row that is not there, is fine.
    const quiet = createTestFleet(config, { startManager: false });
    await quiet.manager.requestScale({ jobId: 'job-1', labels: ['linux'] });
    await quiet.backends.linux!.crash('linux-1');
    await quiet.ledger.release('host', 'linux-1');
    await quiet.ledger.release('host', 'nobody');
    quiet.checkInvariants();
    // releaseAllForInstance while an agent runs is caught too.
    const all = createTestFleet(config, { startManager: false });
    await all.manager.requestScale({ jobId: 'job-1', labels: ['linux'] });
    await all.ledger.releaseAllForInstance();
    expect(() => all.checkInvariants()).toThrow(
      /the row of linux-1 was released while the agent still ran/,
    );
  });

  it('above a lowered maxAgents agents may stay until drained, but none may be added', async () => {
    const fleet = createTestFleet(config, { startManager: false });
    for (const job of ['j1', 'j2', 'j3'])
      await fleet.manager.requestScale({ jobId: job, labels: ['linux'] });
    fleet.checkInvariants();
    const lowered = structuredClone(config);
    lowered.scalers[0]!.maxAgents = 1;
    expect((await fleet.manager.reload(lowered)).ok).toBe(true);
    fleet.checkInvariants(); // 3 above a limit of 1: they may stay
    await fleet.backends.linux!.crash('linux-1');
    fleet.checkInvariants(); // 2
    // A broken manager would add one back: the count above the limit grew.
    const raised = structuredClone(config);
    await fleet.manager.reload(raised);
    await fleet.manager.requestScale({ jobId: 'j4', labels: ['linux'] });
    await fleet.manager.reload(lowered);
    expect(() => fleet.checkInvariants()).toThrow(
      /scaler linux: 3 agents tracked, maxAgents 1 \(above the lowered limit it may only shrink: 2 at the last check\)/,
    );
  });

  it('checkInvariants sees a pool over its cap because of another replica, and a job bound twice', async () => {
    const store = new MemoryPoolStore();
    const fleet = createTestFleet(config, { store, startManager: false });
    const a = await fleet.manager.requestScale({ jobId: 'job-1', labels: ['mac'] });
    const b = await fleet.manager.requestScale({ jobId: 'job-2', labels: ['mac'] });
    expect([a.kind, b.kind]).toEqual(['spawned', 'spawned']);
    fleet.backends.mac!.register('mac-1');
    fleet.backends.mac!.register('mac-2');
    fleet.backends.mac!.runJob('mac-1', 'job-1', 60_000);
    fleet.backends.mac!.runJob('mac-2', 'job-1', 60_000);
    // A broken peer writes past the cap (a ledger with another cap would be refused).
    const doc = store.read('host') ?? {
      version: 1 as const,
      cap: { maxCpu: 8, maxMemoryBytes: 16 * 2 ** 30 },
      reservations: [],
    };
    doc.reservations.push({
      instanceId: 'peer',
      pid: 1,
      bootId: store.bootId,
      agentId: 'huge',
      cpus: 9,
      memBytes: 0,
      reservedAt: 0,
    });
    store.write('host', doc);
    expect(() => fleet.checkInvariants()).toThrow(FleetInvariantError);
    try {
      fleet.checkInvariants();
    } catch (error) {
      expect((error as FleetInvariantError).violations).toEqual([
        'pool host CPU (all instances): 9 cores held, cap 8',
        'job job-1 is bound to mac-1 and mac-2',
      ]);
    }
    // The peer is a replica too: its own ledger sees the same store.
    const peer = new MemoryPoolLedger({ instanceId: 'peer-2', store, clock: fleet.clock });
    peer.registerPool('host', { maxCpu: 8, maxMemoryBytes: 16 * 2 ** 30 });
    expect((await peer.reserve('host', 'x', 1, 0)).ok).toBe(false);
  });

  it('a seed makes the jitter, and so every firing, repeat exactly; the default seed too', async () => {
    const run = async (options: { seed?: number }) => {
      const fleet = createTestFleet(config, {
        ...options,
        backend: { registerAfterMs: 20_000, jobDurationMs: 60_000 },
      });
      const dues: number[][] = [];
      await fleet.manager.requestScale({ jobId: 'job-1', labels: ['linux'] });
      for (let i = 0; i < 12; i++) {
        await fleet.clock.advance(10_000);
        dues.push(fleet.clock.pending().map((t) => t.dueAt));
      }
      await fleet.shutdown();
      return dues;
    };
    const seven = await run({ seed: 7 });
    expect(await run({ seed: 7 })).toEqual(seven);
    expect(await run({})).toEqual(await run({ seed: 1 }));
    // Another seed jitters maintenance differently (its timer is due at another instant).
    expect(await run({ seed: 8 })).not.toEqual(seven);
    for (const bad of [-1, 1.5, 2 ** 32, Number.NaN]) {
      expect(() => createTestFleet(config, { seed: bad })).toThrow(/`seed`/);
    }
  });

  it('refuses unknown options and backends for scalers not in the config', () => {
    expect(() => createTestFleet(config, { clock: 1 } as never)).toThrow(
      /Unknown createTestFleet option/,
    );
    expect(() => createTestFleet(config, { backends: { windows: {} } })).toThrow(/windows/);
    expect(() => createTestFleet({ ...config, globalMaxAgents: -1 })).toThrow(/globalMaxAgents/);
  });
});
