// Issue 22, "one meaning of not declared", through the manager: a label set that
// declares only CPU spawns with no memory limit (not 0), its request counts 0
// memory against the pool (an unset limit is not a 0 request, and not a cap),
// the spawn request's limits always make valid caps, and a limit range's `max`
// refuses a job whose limit would be unset.

import { capsFromResources, encodeAgentCaps } from 'scaler-primitives/agent-caps';
import type { SpawnRequest } from 'scaler-primitives/manager';
import { createTestFleet } from 'scaler-primitives/testing';
import { describe, expect, it } from 'vitest';

const GiB = 2 ** 30;

function fleet() {
  return createTestFleet({
    globalMaxAgents: 10,
    machinePools: { host: { maxCpu: '8', maxMemory: '4Gi' } },
    scalers: [
      {
        name: 'cpu-only',
        type: 'container',
        maxAgents: 10,
        machinePool: 'host',
        labelSets: [{ labels: ['linux', 'cpu'], resources: { cpus: 2 } }],
      },
      {
        name: 'capped',
        type: 'container',
        maxAgents: 10,
        limits: { memory: { max: '2Gi' } },
        labelSets: [{ labels: ['linux', 'capped'], resources: { cpus: 1 } }],
      },
    ],
  });
}

describe('unset limits in the manager', () => {
  it('a CPU-only label set spawns with a CPU limit, no memory limit, and caps that encode', async () => {
    const f = fleet();
    const result = await f.manager.requestScale({ jobId: 'j1', labels: ['linux', 'cpu'] });
    expect(result).toMatchObject({ kind: 'spawned', resources: { limits: { cpus: 2 } } });
    const spawn = f.backends['cpu-only']!.callsOf('spawn')[0]!.args[0] as SpawnRequest;
    expect(spawn.resources).toEqual({ requests: { cpus: 2, memBytes: 0 }, limits: { cpus: 2 } });
    expect('memBytes' in spawn.resources.limits).toBe(false);
    const caps = capsFromResources(spawn.resources.limits);
    expect(caps).toEqual({ cpuQuota: '200%' });
    expect(new TextDecoder().decode(encodeAgentCaps(caps))).toBe('{"cpu_quota":"200%"}');
    f.checkInvariants();
    await f.shutdown();
  });

  it('caps math: the pool counts a 0 memory request, so the CPU cap alone decides', async () => {
    const f = fleet();
    for (const id of ['j1', 'j2', 'j3', 'j4']) {
      expect((await f.manager.requestScale({ jobId: id, labels: ['linux', 'cpu'] })).kind).toBe(
        'spawned',
      );
    }
    // 4 x 2 cores fill the 8-core pool; 0 bytes of memory are held against its 4 GiB.
    const refused = await f.manager.requestScale({ jobId: 'j5', labels: ['linux', 'cpu'] });
    expect(refused).toMatchObject({
      kind: 'at-capacity',
      limit: { limit: 'pool-cap', dimension: 'cpu' },
    });
    expect(f.manager.getStatus().pools[0]!.usage).toEqual({ cpus: 8, memBytes: 0 });
    f.checkInvariants();
    await f.shutdown();
  });

  it("a limit range's max refuses a job with no memory limit, and admits one that declares it", async () => {
    const f = fleet();
    expect(
      await f.manager.requestScale({ jobId: 'no-limit', labels: ['linux', 'capped'] }),
    ).toMatchObject({
      kind: 'never-fits',
      limit: {
        limit: 'scaler-limit-range',
        resource: 'memory',
        rule: 'max',
        side: 'limits',
        value: Number.POSITIVE_INFINITY,
      },
    });
    expect(
      await f.manager.requestScale({
        jobId: 'with-limit',
        labels: ['linux', 'capped'],
        resources: {
          limits: { memory: '1Gi' },
        },
      }),
    ).toMatchObject({
      kind: 'spawned',
      resources: { requests: { cpus: 1, memBytes: GiB }, limits: { cpus: 1, memBytes: GiB } },
    });
    await f.shutdown();
  });
});
