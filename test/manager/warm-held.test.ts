import type { ScalerConfigInput, ScalerEvent, WarmPoolHold } from 'scaler-primitives/manager';
import { createTestFleet, type TestFleet } from 'scaler-primitives/testing';
import { describe, expect, it } from 'vitest';

const config: ScalerConfigInput = {
  globalMaxAgents: 1,
  scalers: [
    {
      name: 'warm',
      type: 'container',
      maxAgents: 2,
      warmPool: { size: 1 },
      labelSets: [{ labels: ['w'] }],
    },
    { name: 'cold', type: 'container', maxAgents: 2, labelSets: [{ labels: ['c'] }] },
  ],
};

const heldEvents = (fleet: TestFleet, kind = 'warm-pool-held'): ScalerEvent[] =>
  fleet.events.filter((e) => e.kind === kind && e.scaler === 'warm');
const held = (fleet: TestFleet): WarmPoolHold | undefined =>
  fleet.manager.getStatus().scalers.find((b) => b.name === 'warm')?.warmPool?.held;

describe('explained warm pool', () => {
  it('says why it holds back (demand hold, then a full limit) and until when, then that it resumed', async () => {
    const fleet = createTestFleet(config, {
      startManager: false,
      backend: { registerAfterMs: 100 },
    });
    const { manager, clock } = fleet;
    const cold = (await manager.requestScale({ jobId: 'job-1', labels: ['c'] })) as {
      agentId: string;
    };
    await clock.advance(100); // registered, busy with job-1
    expect((await manager.requestScale({ jobId: 'job-2', labels: ['c'] })).kind).toBe(
      'at-capacity',
    );
    const refusedAt = clock.now();

    await manager.maintain();
    await manager.maintain(); // a second pass does not repeat the event
    expect(heldEvents(fleet)).toHaveLength(1);
    const event = heldEvents(fleet)[0]!;
    expect(event.agentId).toBe('');
    expect(event.message).toMatch(
      /held at 0\/1: A job was refused for capacity at the orchestrator/,
    );
    expect(event.data).toMatchObject({
      reason: 'demand',
      ready: 0,
      target: 1,
      until: refusedAt + 10_000,
    });
    expect(held(fleet)).toMatchObject({
      reason: 'demand',
      since: refusedAt,
      until: refusedAt + 10_000,
    });
    expect(manager.listAgents({ scaler: 'warm' })).toEqual([]);

    // The demand hold lifts; globalMaxAgents (1, held by the busy cold agent) refuses the warm spawn.
    await clock.advance(10_000);
    await manager.maintain();
    expect(heldEvents(fleet)).toHaveLength(2);
    expect(held(fleet)).toMatchObject({
      reason: 'capacity',
      message: 'global-max-agents is full (1/1)',
      limit: { limit: 'global-max-agents', used: 1, max: 1, scaler: 'warm' },
    });
    expect(held(fleet)!.until).toBeUndefined();

    // The cold agent goes: the pool refills, and says so.
    await manager.onAgentDisconnected(cold.agentId);
    await manager.maintain();
    expect(manager.listAgents({ scaler: 'warm' })).toHaveLength(1);
    expect(held(fleet)).toBeUndefined();
    expect(heldEvents(fleet, 'warm-pool-resumed').map((e) => e.data)).toEqual([
      { reason: 'capacity' },
    ]);
    fleet.checkInvariants();
    await fleet.shutdown();
  });

  it('says so while spawns for jobs are in flight at the scaler', async () => {
    const fleet = createTestFleet({ ...config, globalMaxAgents: 4 }, { startManager: false });
    const { manager, backends } = fleet;
    backends.warm!.script({ latencyMs: 5000 });
    const spawn = manager.requestScale({ jobId: 'job-1', labels: ['w'] });
    await manager.maintain();
    expect(held(fleet)).toMatchObject({ reason: 'job-spawns', ready: 0, target: 1 });
    expect(heldEvents(fleet)[0]!.message).toMatch(
      /1 spawn\(s\) for waiting jobs are in flight at warm/,
    );
    await fleet.clock.advance(5000);
    expect((await spawn).kind).toBe('spawned');
    await fleet.shutdown();
  });

  it('says when a schedule lowers the pool, until the schedule changes', async () => {
    const scheduled: ScalerConfigInput = {
      globalMaxAgents: 4,
      scalers: [
        {
          name: 'warm',
          type: 'container',
          maxAgents: 4,
          warmPool: { size: 2, schedules: [{ cron: '* 9-17 * * *', size: 0 }] },
          labelSets: [{ labels: ['w'] }],
        },
      ],
    };
    const fleet = createTestFleet(scheduled, {
      start: '2026-01-05T09:30:00Z',
      startManager: false,
    });
    const { manager } = fleet;
    await manager.maintain();
    expect(held(fleet)).toMatchObject({
      reason: 'schedule',
      ready: 0,
      target: 2,
      until: Date.parse('2026-01-05T18:00:00Z'),
    });
    expect(heldEvents(fleet)[0]!.message).toMatch(
      /Schedule 0 of warm sets the warm pool to 0 \(size 2\)/,
    );
    expect(manager.listAgents()).toEqual([]);
    await fleet.clock.advanceTo('2026-01-05T18:00:00Z');
    await manager.maintain();
    expect(held(fleet)).toBeUndefined();
    expect(heldEvents(fleet, 'warm-pool-resumed').map((e) => e.data)).toEqual([
      { reason: 'schedule' },
    ]);
    expect(manager.listAgents({ scaler: 'warm' })).toHaveLength(2);
    await fleet.shutdown();
  });
});
