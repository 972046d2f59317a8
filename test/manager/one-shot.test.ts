import type { ScalerConfigInput } from 'scaler-primitives/manager';
import { createTestFleet } from 'scaler-primitives/testing';
import { describe, expect, it } from 'vitest';

// The one-shot pattern: every agent runs one job, then exits (`maxJobsPerAgent: 1`).
const oneShot: ScalerConfigInput = {
  globalMaxAgents: 10,
  scalers: [
    {
      name: 'once',
      type: 'process',
      maxAgents: 10,
      maxJobsPerAgent: 1,
      warmPool: { size: 2 },
      labelSets: [{ labels: ['linux'] }],
    },
  ],
};

describe('one-shot agents (maxJobsPerAgent: 1)', () => {
  it('an agent that will exit after its job never counts as warm capacity', async () => {
    const fleet = createTestFleet(oneShot, {
      startManager: false,
      backend: { registerAfterMs: 1000 },
    });
    const { manager, clock } = fleet;
    await manager.maintain();
    await clock.advance(1000);
    expect(manager.getStatus().warmPoolCount).toBe(2);
    const claim = manager.claimIdleAgent({ jobId: 'job-1', labels: ['linux'] });
    expect(claim.kind).toBe('claimed');
    const first = claim.kind === 'claimed' ? claim.agent : undefined;
    expect(first).toMatchObject({ state: 'busy', lastJob: true });
    expect(manager.getStatus().warmPoolCount).toBe(1);

    // The pool refills around the busy one-shot agent: it is not capacity.
    await manager.maintain();
    expect(manager.getStatus().warmPoolCount).toBe(2);
    await clock.advance(1000);
    expect(manager.listAgents({ state: 'idle' })).toHaveLength(2);

    // Its job ends: it is destroyed, never idle, never claimable.
    const idleEvents = () =>
      fleet.events.filter((e) => e.kind === 'idle' && e.agentId === first!.agentId).length;
    manager.onJobComplete(first!.agentId);
    expect(idleEvents()).toBe(1); // the job hears its agent is done...
    expect(manager.getAgent(first!.agentId)?.state ?? 'gone').not.toBe('idle'); // ...but it is not idle
    expect(manager.listAgents({ state: 'idle' }).map((a) => a.agentId)).not.toContain(
      first!.agentId,
    );
    expect(manager.getStatus().warmPoolCount).toBe(2);
    await clock.advance(0);
    expect(manager.getAgent(first!.agentId)).toBeUndefined();
    expect(
      fleet.events.find((e) => e.kind === 'destroyed' && e.agentId === first!.agentId)?.data,
    ).toEqual({ reason: 'max-jobs' });
    fleet.checkInvariants();
    await fleet.shutdown();
  });

  it('an agent spawning with a job given to it before it registered is not warm capacity', async () => {
    const fleet = createTestFleet(oneShot, { startManager: false });
    const { manager } = fleet;
    await manager.maintain(); // two warm spawns in flight, not registered
    expect(manager.getStatus().warmPoolCount).toBe(2);
    const [w] = manager.listAgents({ state: 'spawning' });
    manager.correlateAgentToJob(w!.agentId, 'run-1', 'job-1');
    expect(manager.getAgent(w!.agentId)).toMatchObject({ jobId: 'job-1', lastJob: true });
    expect(manager.getStatus().warmPoolCount).toBe(1);
    await manager.maintain();
    expect(manager.getStatus().warmPoolCount).toBe(2);
    expect(manager.listAgents()).toHaveLength(3);
    await fleet.shutdown();
  });

  it('an agent registering for a job a warm agent already took takes the next waiting job, or is idle', async () => {
    const config: ScalerConfigInput = {
      ...oneShot,
      scalers: [{ ...oneShot.scalers[0]!, warmPool: { size: 1 } }],
    };
    const fleet = createTestFleet(config, {
      startManager: false,
      backend: { registerAfterMs: 1000 },
    });
    const { manager, clock } = fleet;
    await manager.maintain();
    await clock.advance(1000); // one warm agent idle
    const [warm] = manager.listAgents({ state: 'idle' });

    // job-1 and job-2 arrive while the host scales for both (cold spawns, registering later).
    const s1 = (await manager.requestScale({ jobId: 'job-1', labels: ['linux'] })) as {
      agentId: string;
    };
    const s2 = (await manager.requestScale({ jobId: 'job-2', labels: ['linux'] })) as {
      agentId: string;
    };
    // The warm agent takes job-1 first.
    expect(manager.claimIdleAgent({ jobId: 'job-1', labels: ['linux'] })).toMatchObject({
      kind: 'claimed',
      agent: { agentId: warm!.agentId },
      replaced: s1.agentId,
    });
    // s1, whose job is gone, counts as warm capacity again (it has run nothing yet).
    expect(manager.getStatus().warmPoolCount).toBe(1);
    await clock.advance(1000); // s1 and s2 register, s1 first
    const registered = fleet.events.filter((e) => e.kind === 'registered').map((e) => e.agentId);
    expect(registered.slice(-2)).toEqual([s1.agentId, s2.agentId]);
    // s1 took job-2 (it waited on s2's spawn); s2 found nothing waiting and is idle.
    expect(manager.getAgent(s1.agentId)).toMatchObject({
      state: 'busy',
      jobId: 'job-2',
      lastJob: true,
    });
    expect(manager.getAgent(s2.agentId)).toMatchObject({ state: 'idle', lastJob: false });
    expect(manager.getStatus().warmPoolCount).toBe(1);
    fleet.checkInvariants();
    await fleet.shutdown();
  });
});
