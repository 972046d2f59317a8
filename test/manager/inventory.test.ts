import type { ScalerConfigInput } from 'scaler-primitives/manager';
import { createTestFleet } from 'scaler-primitives/testing';
import { describe, expect, it } from 'vitest';
import { InvalidInputError } from '../../src/errors/input.js';

const config: ScalerConfigInput = {
  globalMaxAgents: 10,
  machinePools: { host: { maxCpu: '16', maxMemory: '32Gi' } },
  scalers: [
    {
      name: 'small',
      type: 'container',
      maxAgents: 4,
      machinePool: 'host',
      labelSets: [{ labels: ['linux', 'small'], resources: { cpus: '1', memory: '1Gi' } }],
    },
    {
      name: 'large',
      type: 'vm',
      maxAgents: 2,
      labelSets: [{ labels: ['linux', 'large'], resources: { cpus: '4', memory: '8Gi' } }],
    },
  ],
};

describe('agent inventory (listAgents, getAgent)', () => {
  it('follows every agent through the state machine, with its facts', async () => {
    const fleet = createTestFleet(config, { startManager: false });
    const { manager, clock, backends } = fleet;
    const t0 = clock.now();
    const spawned = await manager.requestScale({ jobId: 'job-1', labels: ['small'] });
    expect(spawned.kind).toBe('spawned');
    const id = (spawned as { agentId: string }).agentId;

    let agent = manager.getAgent(id)!;
    expect(agent).toMatchObject({
      agentId: id,
      scaler: 'small',
      state: 'spawning',
      jobId: 'job-1',
      warm: false,
      pool: 'host',
      spawnedAt: t0,
      jobsRun: 0,
      lastJob: false,
    });
    expect(agent.registeredAt).toBeUndefined();
    expect(agent.labels).toContain('linux');
    expect(agent.resources.requests).toMatchObject({ cpus: 1, memBytes: 1024 ** 3 });

    await clock.advance(1000);
    expect(backends.small!.register(id)?.boundJobId).toBe('job-1');
    agent = manager.getAgent(id)!;
    expect(agent.state).toBe('busy');
    expect(agent.registeredAt).toBe(t0 + 1000);

    backends.small!.runJob(id, 'job-1', 5000);
    await clock.advance(5000);
    agent = manager.getAgent(id)!;
    expect(agent).toMatchObject({ state: 'idle', jobsRun: 1, idleSince: t0 + 6000 });
    expect(agent.jobId).toBeUndefined();

    const gone = manager.drain(id);
    expect(manager.getAgent(id)?.state).toBe('destroying');
    await gone;
    expect(manager.getAgent(id)).toBeUndefined();
    expect(manager.listAgents()).toEqual([]);
    fleet.checkInvariants();
    await fleet.shutdown();
  });

  it('answers frozen snapshots that do not change with the agent', async () => {
    const fleet = createTestFleet(config, { startManager: false });
    const { manager, backends } = fleet;
    const { agentId } = (await manager.requestScale({ jobId: 'job-1', labels: ['small'] })) as {
      agentId: string;
    };
    const before = manager.getAgent(agentId)!;
    backends.small!.register(agentId);
    expect(before.state).toBe('spawning');
    expect(Object.isFrozen(before)).toBe(true);
    expect(Object.isFrozen(before.labels)).toBe(true);
    expect(Object.isFrozen(before.resources.requests)).toBe(true);
    expect(() => {
      (before as { state: string }).state = 'idle';
    }).toThrow(TypeError);
    expect(() => (before.labels as string[]).push('x')).toThrow(TypeError);
    // The manager's own books are untouched by anything done to a snapshot.
    expect(manager.getAgent(agentId)!.labels).toEqual(before.labels);
    await fleet.shutdown();
  });

  it('filters by scaler, state and labels, alone and together', async () => {
    const fleet = createTestFleet(config, { startManager: false });
    const { manager, backends } = fleet;
    const a = (await manager.requestScale({ jobId: 'job-a', labels: ['small'] })) as {
      agentId: string;
    };
    const b = (await manager.requestScale({ jobId: 'job-b', labels: ['small'] })) as {
      agentId: string;
    };
    const c = (await manager.requestScale({ jobId: 'job-c', labels: ['large'] })) as {
      agentId: string;
    };
    backends.small!.register(a.agentId);
    backends.small!.runJob(a.agentId, 'job-a', 1000);
    await fleet.clock.advance(1000); // a idle, b spawning, c spawning

    const ids = (list: { agentId: string }[]) => list.map((x) => x.agentId).sort();
    expect(ids(manager.listAgents())).toEqual([a, b, c].map((x) => x.agentId).sort());
    expect(ids(manager.listAgents({ scaler: 'small' }))).toEqual([a.agentId, b.agentId].sort());
    expect(ids(manager.listAgents({ scaler: ['large'] }))).toEqual([c.agentId]);
    expect(ids(manager.listAgents({ state: 'idle' }))).toEqual([a.agentId]);
    expect(ids(manager.listAgents({ state: ['spawning'] }))).toEqual([b.agentId, c.agentId].sort());
    expect(ids(manager.listAgents({ labels: ['large'] }))).toEqual([c.agentId]);
    expect(
      ids(manager.listAgents({ labels: ['linux'], state: 'spawning', scaler: 'small' })),
    ).toEqual([b.agentId]);
    expect(manager.listAgents({ labels: ['linux', 'windows'] })).toEqual([]);
    expect(manager.listAgents({ scaler: 'nope' })).toEqual([]);
    await fleet.shutdown();
  });

  it('refuses malformed filters and ids with clear errors', () => {
    const fleet = createTestFleet(config, { startManager: false });
    const { manager } = fleet;
    expect(() => manager.listAgents({ sclaer: 'small' } as never)).toThrow(
      /Unknown agent filter `sclaer`/,
    );
    expect(() => manager.listAgents({ state: 'gone' as never })).toThrow(
      /filter.state.*spawning, idle, busy, draining, destroying, got `gone`/,
    );
    expect(() => manager.listAgents({ scaler: 3 as never })).toThrow(TypeError);
    expect(() => manager.listAgents('idle' as never)).toThrow(/Expected `filter` to be an object/);
    expect(() => manager.listAgents({ labels: ['x'.repeat(300)] })).toThrow(InvalidInputError);
    expect(() => manager.getAgent('')).toThrow(TypeError);
    expect(() => manager.getAgent('a'.repeat(300))).toThrow(InvalidInputError);
    expect(manager.getAgent('never-spawned')).toBeUndefined();
  });

  it('marks a one-shot agent as on its last job once it has one', async () => {
    const oneShot: ScalerConfigInput = {
      globalMaxAgents: 4,
      scalers: [
        {
          name: 'once',
          type: 'process',
          maxAgents: 4,
          maxJobsPerAgent: 1,
          labelSets: [{ labels: ['linux'] }],
        },
      ],
    };
    const fleet = createTestFleet(oneShot, { startManager: false });
    const { manager, backends } = fleet;
    const { agentId } = (await manager.requestScale({ jobId: 'job-1', labels: ['linux'] })) as {
      agentId: string;
    };
    expect(manager.getAgent(agentId)!.lastJob).toBe(true); // spawned for a job: that job is its last
    backends.once!.register(agentId);
    expect(manager.getAgent(agentId)).toMatchObject({ state: 'busy', lastJob: true });
    await fleet.shutdown();
  });
});
