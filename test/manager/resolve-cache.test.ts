import type { ScalerConfigInput } from 'scaler-primitives/manager';
import { createTestFleet } from 'scaler-primitives/testing';
import { describe, expect, it } from 'vitest';

// The manager reads the config's resource layers once per config and label
// set: these check that the answers still follow the config, and that what a
// caller gets back is its own copy.
function configWith(
  labelSetResources: Record<string, unknown>,
  extra: Partial<ScalerConfigInput> = {},
): ScalerConfigInput {
  return {
    globalMaxAgents: 4,
    machinePools: { host: { maxCpu: 16, maxMemory: '32Gi' } },
    scalers: [
      {
        name: 'linux',
        type: 'container',
        maxAgents: 4,
        machinePool: 'host',
        labelSets: [{ labels: ['linux'], resources: labelSetResources }],
      },
    ],
    ...extra,
  } as ScalerConfigInput;
}

describe('resolved resources follow the config', () => {
  it('a reload that changes a label set resolves new spawns with the new resources', async () => {
    const fleet = createTestFleet(configWith({ cpus: 2, memory: '4Gi' }));
    const first = await fleet.manager.requestScale({ jobId: 'job-1', labels: ['linux'] });
    expect(first).toMatchObject({
      kind: 'spawned',
      resources: { requests: { cpus: 2, memBytes: 4 * 2 ** 30 } },
    });
    const reloaded = await fleet.manager.reload(configWith({ cpus: 3, memory: '1Gi' }));
    expect(reloaded.ok).toBe(true);
    const second = await fleet.manager.requestScale({ jobId: 'job-2', labels: ['linux'] });
    expect(second).toMatchObject({
      kind: 'spawned',
      resources: { requests: { cpus: 3, memBytes: 2 ** 30 }, limits: { cpus: 3 } },
    });
    fleet.checkInvariants();
    await fleet.shutdown();
  });

  it('a reload that changes only the global defaults reaches a label set that declares nothing', async () => {
    const fleet = createTestFleet(
      configWith({}, { defaults: { resources: { requests: { cpus: 1, memory: '1Gi' } } } }),
    );
    const first = await fleet.manager.requestScale({ jobId: 'job-1', labels: ['linux'] });
    expect(first).toMatchObject({ resources: { requests: { cpus: 1, memBytes: 2 ** 30 } } });
    const reloaded = await fleet.manager.reload(
      configWith({}, { defaults: { resources: { requests: { cpus: 2, memory: '2Gi' } } } }),
    );
    expect(reloaded.ok).toBe(true);
    const second = await fleet.manager.requestScale({ jobId: 'job-2', labels: ['linux'] });
    expect(second).toMatchObject({ resources: { requests: { cpus: 2, memBytes: 2 * 2 ** 30 } } });
    await fleet.shutdown();
  });

  it("a job's own resources are read on every call, and a reused object is read afresh", async () => {
    const fleet = createTestFleet(configWith({ cpus: 1, memory: '1Gi' }));
    const job: { requests: { cpus: number | string } } = { requests: { cpus: 2 } };
    const first = await fleet.manager.requestScale({
      jobId: 'job-1',
      labels: ['linux'],
      resources: job,
    });
    expect(first).toMatchObject({ resources: { requests: { cpus: 2, memBytes: 2 ** 30 } } });
    job.requests.cpus = 3;
    const second = await fleet.manager.requestScale({
      jobId: 'job-2',
      labels: ['linux'],
      resources: job,
    });
    expect(second).toMatchObject({ resources: { requests: { cpus: 3, memBytes: 2 ** 30 } } });
    job.requests.cpus = 'two';
    await expect(
      fleet.manager.requestScale({ jobId: 'job-3', labels: ['linux'], resources: job }),
    ).rejects.toThrow(/cpu/i);
    await fleet.shutdown();
  });

  it('what a spawn answers is a copy: changing it changes neither the agent nor the next spawn', async () => {
    const config = configWith({ cpus: 2, memory: '4Gi', 'example.com/gpu': 1 });
    config.machinePools = { host: { maxCpu: 16, maxExtended: { 'example.com/gpu': 4 } } };
    config.scalers[0]!.resourceCap = { maxExtended: { 'example.com/gpu': 4 } };
    const fleet = createTestFleet(config);
    const first = await fleet.manager.requestScale({ jobId: 'job-1', labels: ['linux'] });
    if (first.kind !== 'spawned') throw new Error(`expected a spawn, got ${first.kind}`);
    first.resources.requests.cpus = 99;
    (first.resources.requests.extended as Record<string, number>)['example.com/gpu'] = 7;
    (first.resources.limits.extended as Record<string, number>)['example.com/gpu'] = 7;
    const second = await fleet.manager.requestScale({ jobId: 'job-2', labels: ['linux'] });
    expect(second).toMatchObject({
      kind: 'spawned',
      resources: {
        requests: { cpus: 2, extended: { 'example.com/gpu': 1 } },
        limits: { extended: { 'example.com/gpu': 1 } },
      },
    });
    const agent = fleet.manager.listAgents().find((a) => a.agentId === first.agentId);
    expect(agent?.resources.requests).toMatchObject({
      cpus: 2,
      extended: { 'example.com/gpu': 1 },
    });
    fleet.checkInvariants();
    await fleet.shutdown();
  });

  it('a label set that never fits is refused the same way on every call', async () => {
    const fleet = createTestFleet(configWith({ cpus: 32, memory: '1Gi' }));
    for (const jobId of ['job-1', 'job-2', 'job-3']) {
      const result = await fleet.manager.requestScale({ jobId: jobId, labels: ['linux'] });
      expect(result).toMatchObject({
        kind: 'never-fits',
        limit: { limit: 'pool-cap', dimension: 'cpu', requested: 32, max: 16, neverFits: true },
      });
      if (result.kind === 'never-fits') (result.limit as { max?: number }).max = 1;
    }
    await fleet.shutdown();
  });
});
