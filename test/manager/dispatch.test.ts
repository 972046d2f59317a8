import type { ClaimResult, ScalerConfigInput } from 'scaler-primitives/manager';
import { createTestFleet, type TestFleet } from 'scaler-primitives/testing';
import { describe, expect, it } from 'vitest';
import { InvalidInputError } from '../../src/errors/input.js';

function warmConfig(size: number, extra: Partial<ScalerConfigInput> = {}): ScalerConfigInput {
  return {
    globalMaxAgents: 40,
    scalers: [
      {
        name: 'linux',
        type: 'container',
        maxAgents: 40,
        warmPool: { size },
        labelSets: [{ labels: ['linux', 'x64'], resources: { cpus: '2', memory: '4Gi' } }],
      },
      {
        name: 'gated',
        type: 'vm',
        maxAgents: 4,
        mandatoryLabels: ['secure'],
        warmPool: { size: 1 },
        labelSets: [{ labels: ['secure', 'linux'] }],
      },
    ],
    ...extra,
  };
}

/** A fleet whose warm pools are full and registered. */
async function warmFleet(size: number): Promise<TestFleet> {
  const fleet = createTestFleet(warmConfig(size), {
    startManager: false,
    backend: { registerAfterMs: 1000 },
  });
  await fleet.manager.maintain();
  await fleet.clock.advance(1000);
  expect(fleet.manager.listAgents({ state: 'idle' })).toHaveLength(size + 1);
  return fleet;
}

describe('claimIdleAgent', () => {
  it('binds an idle agent that can run the job, and only once per job', async () => {
    const fleet = await warmFleet(2);
    const { manager } = fleet;
    const claim = manager.claimIdleAgent({ jobId: 'job-1', runId: 'run-1', labels: ['linux'] });
    expect(claim.kind).toBe('claimed');
    const agent = (claim as Extract<ClaimResult, { kind: 'claimed' }>).agent;
    expect(agent).toMatchObject({ scaler: 'linux', state: 'busy', jobId: 'job-1' });
    expect(manager.getAgent(agent.agentId)!.state).toBe('busy');
    expect(manager.getStatus().counters.warmHits).toBe(1);
    const busy = fleet.events.find((e) => e.kind === 'busy' && e.agentId === agent.agentId);
    expect(busy?.data).toEqual({ runId: 'run-1', jobId: 'job-1' });

    const again = manager.claimIdleAgent({ jobId: 'job-1', labels: ['linux'] });
    expect(again).toEqual({ kind: 'already-bound', agent: manager.getAgent(agent.agentId) });

    const second = manager.claimIdleAgent({ jobId: 'job-2', labels: ['linux', 'x64'] });
    expect(second.kind).toBe('claimed');
    const third = manager.claimIdleAgent({ jobId: 'job-3', labels: ['linux', 'x64'] });
    // The gated agent is idle but the job does not name `secure`.
    expect(third).toEqual({
      kind: 'no-fit',
      reasons: [{ scaler: 'gated', idle: 1, reason: 'mandatory', missing: ['secure'] }],
    });
    fleet.checkInvariants();
    await fleet.shutdown();
  });

  it('never gives the same agent to two of many concurrent claims', async () => {
    const fleet = await warmFleet(12);
    const { manager } = fleet;
    // 60 dispatch paths, each yielding at different points before and after claiming.
    const claims = await Promise.all(
      Array.from({ length: 60 }, async (_, i) => {
        for (let k = 0; k < i % 5; k++) await Promise.resolve();
        const claim = manager.claimIdleAgent({ jobId: `job-${i}`, labels: ['linux'] });
        await Promise.resolve();
        return claim;
      }),
    );
    const claimed = claims.filter((c) => c.kind === 'claimed');
    expect(claimed).toHaveLength(12);
    const agents = new Set(claimed.map((c) => c.agent.agentId));
    expect(agents.size).toBe(12);
    for (const c of claims) {
      if (c.kind !== 'claimed') {
        expect(c).toEqual({
          kind: 'no-fit',
          reasons: [{ scaler: 'gated', idle: 1, reason: 'mandatory', missing: ['secure'] }],
        });
      }
    }
    expect(manager.listAgents({ scaler: 'linux', state: 'busy' })).toHaveLength(12);
    // Every busy agent runs a different job.
    const jobs = manager.listAgents({ state: 'busy' }).map((a) => a.jobId);
    expect(new Set(jobs).size).toBe(jobs.length);
    fleet.checkInvariants();
    await fleet.shutdown();
  });

  it('concurrent claims of the same job bind one agent', async () => {
    const fleet = await warmFleet(5);
    const claims = await Promise.all(
      Array.from({ length: 10 }, async () => {
        await Promise.resolve();
        return fleet.manager.claimIdleAgent({ jobId: 'job-x', labels: ['linux'] });
      }),
    );
    expect(claims.filter((c) => c.kind === 'claimed')).toHaveLength(1);
    expect(claims.filter((c) => c.kind === 'already-bound')).toHaveLength(9);
    expect(fleet.manager.listAgents({ state: 'busy' })).toHaveLength(1);
    fleet.checkInvariants();
    await fleet.shutdown();
  });

  it('explains why no agent fits: labels, exclusions, resources', async () => {
    const fleet = await warmFleet(1);
    const { manager } = fleet;
    expect(manager.claimIdleAgent({ jobId: 'j1', labels: ['windows'] })).toEqual({
      kind: 'no-fit',
      reasons: [
        { scaler: 'linux', idle: 1, reason: 'labels', missing: ['windows'] },
        { scaler: 'gated', idle: 1, reason: 'mandatory', missing: ['secure'] },
      ],
    });
    expect(
      manager.claimIdleAgent({ jobId: 'j2', labels: ['linux'], excludeLabels: ['x64'] }),
    ).toMatchObject({
      kind: 'no-fit',
      reasons: [{ scaler: 'linux', idle: 1, reason: 'exclude', excluded: ['x64'] }, {}],
    });
    expect(
      manager.claimIdleAgent({
        jobId: 'j3',
        labels: ['linux', 'x64'],
        resources: { requests: { cpus: 8 } },
      }),
    ).toMatchObject({ kind: 'no-fit', reasons: [{ scaler: 'linux', reason: 'resources' }, {}] });
    // Less than the agent has: it fits.
    const small = manager.claimIdleAgent({
      jobId: 'j4',
      labels: ['linux', 'x64'],
      resources: { requests: { cpus: 1, memory: '2Gi' } },
    });
    expect(small.kind).toBe('claimed');
    // The secure job takes the gated agent.
    expect(manager.claimIdleAgent({ jobId: 'j5', labels: ['secure'] })).toMatchObject({
      kind: 'claimed',
      agent: { scaler: 'gated' },
    });
    expect(manager.claimIdleAgent({ jobId: 'j6', labels: ['linux'] })).toEqual({
      kind: 'no-idle-agent',
    });
    fleet.checkInvariants();
    await fleet.shutdown();
  });

  it('takes a job from the agent still spawning for it; that agent then takes the next waiting job', async () => {
    const fleet = createTestFleet(warmConfig(0), { startManager: false });
    const { manager, backends } = fleet;
    const linux = backends.linux!;
    const a = (await manager.requestScale({ jobId: 'job-a', labels: ['linux'] })) as {
      agentId: string;
    };
    const b = (await manager.requestScale({ jobId: 'job-b', labels: ['linux'] })) as {
      agentId: string;
    };
    const c = (await manager.requestScale({ jobId: 'job-c', labels: ['linux'] })) as {
      agentId: string;
    };
    linux.register(a.agentId);
    linux.runJob(a.agentId, 'job-a', 1000);
    await fleet.clock.advance(1000); // a is idle; b and c still spawn for job-b and job-c

    expect(manager.claimIdleAgent({ jobId: 'job-x', labels: ['linux'] }).kind).toBe('claimed');
    manager.onJobComplete(a.agentId);
    // job-b waits on b's spawn, but a is idle now: a takes it, b loses it.
    const claim = manager.claimIdleAgent({ jobId: 'job-b', labels: ['linux'] });
    expect(claim).toMatchObject({
      kind: 'claimed',
      agent: { agentId: a.agentId },
      replaced: b.agentId,
    });
    expect(manager.getAgent(b.agentId)).toMatchObject({ state: 'spawning' });
    expect(manager.getAgent(b.agentId)!.jobId).toBeUndefined();
    const taken = fleet.events.find((e) => e.kind === 'job-taken' && e.agentId === b.agentId);
    expect(taken?.data).toEqual({ jobId: 'job-b', by: a.agentId });
    // requestScale for job-b is no longer answered by b's spawn.
    expect(manager.claimIdleAgent({ jobId: 'job-b', labels: ['linux'] }).kind).toBe(
      'already-bound',
    );

    // b registers first: bound to job-c (waiting on c's spawn), which c then loses.
    const answer = linux.register(b.agentId);
    expect(answer).toEqual({ boundJobId: 'job-c', rebound: true, mandatoryLabels: [] });
    expect(manager.getAgent(b.agentId)).toMatchObject({ state: 'busy', jobId: 'job-c' });
    // c registers: no job waits on a spawn any more, so it is idle.
    expect(linux.register(c.agentId)).toEqual({ mandatoryLabels: [] });
    expect(manager.getAgent(c.agentId)).toMatchObject({ state: 'idle' });
    fleet.checkInvariants();
    await fleet.shutdown();
  });

  it('a job given by correlateAgentToJob also ends a spawn binding: no job runs twice', async () => {
    const fleet = await warmFleet(1);
    const { manager, backends } = fleet;
    const spawned = (await manager.requestScale({ jobId: 'job-1', labels: ['linux'] })) as {
      agentId: string;
    };
    const idle = manager.listAgents({ scaler: 'linux', state: 'idle' })[0]!;
    backends.linux!.runJob(idle.agentId, 'job-1', 10_000); // the host's own dispatch path
    fleet.checkInvariants();
    expect(backends.linux!.register(spawned.agentId)).toEqual({ mandatoryLabels: [] });
    expect(manager.getAgent(spawned.agentId)!.state).toBe('idle');
    fleet.checkInvariants();
    await fleet.shutdown();
  });

  it('answers shutting-down, and refuses malformed jobs', async () => {
    const fleet = await warmFleet(1);
    const { manager } = fleet;
    expect(() =>
      manager.claimIdleAgent({ jobId: 'j', labels: ['linux'], lables: [] } as never),
    ).toThrow(/Unknown claim field `lables`/);
    expect(() => manager.claimIdleAgent({ jobId: '', labels: [] })).toThrow(TypeError);
    expect(() => manager.claimIdleAgent({ jobId: 'j', labels: 'linux' as never })).toThrow(
      TypeError,
    );
    expect(() => manager.claimIdleAgent({ jobId: 'x'.repeat(300), labels: [] })).toThrow(
      InvalidInputError,
    );
    expect(() =>
      manager.claimIdleAgent({ jobId: 'j', labels: [], resources: { cpus: 2 } as never }),
    ).toThrow(InvalidInputError);
    expect(() => manager.claimIdleAgent(null as never)).toThrow(/Expected `job` to be an object/);
    const done = fleet.shutdown();
    expect(manager.claimIdleAgent({ jobId: 'j', labels: ['linux'] })).toEqual({
      kind: 'shutting-down',
    });
    await done;
  });
});
