import type { ScalerConfigInput } from 'scaler-primitives/manager';
import { createTestFleet } from 'scaler-primitives/testing';
import { describe, expect, it } from 'vitest';

const config: ScalerConfigInput = {
  globalMaxAgents: 3,
  scalers: [
    {
      name: 'small',
      type: 'vm',
      maxAgents: 1,
      labelSets: [{ labels: ['small'], resources: { cpus: 1, memory: '1Gi' } }],
    },
    {
      name: 'capped',
      type: 'vm',
      maxAgents: 4,
      resourceCap: { maxCpu: 2 },
      labelSets: [{ labels: ['capped'], resources: { cpus: 2, memory: '1Gi' } }],
    },
  ],
};

describe('generateAgentId runs only for spawns that go ahead', () => {
  it('a request refused by a max or a cap uses no id, so ids do not skip', async () => {
    const asked: string[] = [];
    let n = 0;
    const fleet = createTestFleet(config, {
      backend: { registerAfterMs: 1_000, jobDurationMs: 1_000 },
      manager: {
        generateAgentId: (scaler) => {
          asked.push(scaler);
          n++;
          return `${scaler}-${n}`;
        },
      },
    });
    expect(await fleet.manager.requestScale({ jobId: 'a', labels: ['small'] })).toMatchObject({
      kind: 'spawned',
      agentId: 'small-1',
    });
    // Refused by the scaler's maxAgents, then by its CPU cap.
    expect(await fleet.manager.requestScale({ jobId: 'b', labels: ['small'] })).toMatchObject({
      kind: 'at-capacity',
    });
    expect(await fleet.manager.requestScale({ jobId: 'c', labels: ['capped'] })).toMatchObject({
      kind: 'spawned',
      agentId: 'capped-2',
    });
    expect(await fleet.manager.requestScale({ jobId: 'd', labels: ['capped'] })).toMatchObject({
      kind: 'at-capacity',
    });
    expect(asked).toEqual(['small', 'capped']);
    await fleet.clock.advance(2_000);
    fleet.checkInvariants();
    expect(asked).toEqual(['small', 'capped']);
    await fleet.manager.drain('small-1');
    expect(await fleet.manager.requestScale({ jobId: 'b', labels: ['small'] })).toMatchObject({
      kind: 'spawned',
      agentId: 'small-3',
    });
    expect(asked).toEqual(['small', 'capped', 'small']);
    fleet.checkInvariants();
    await fleet.shutdown();
  });

  it('the fleet default ids count up without gaps across refusals', async () => {
    const fleet = createTestFleet(config, {
      backend: { registerAfterMs: 1_000, jobDurationMs: 1_000 },
    });
    await fleet.manager.requestScale({ jobId: 'a', labels: ['small'] });
    for (let i = 0; i < 3; i++) {
      await fleet.manager.requestScale({ jobId: `x${i}`, labels: ['small'] });
    }
    await fleet.clock.advance(2_000);
    await fleet.manager.drain('small-1');
    expect(await fleet.manager.requestScale({ jobId: 'x0', labels: ['small'] })).toMatchObject({
      kind: 'spawned',
      agentId: 'small-2',
    });
    await fleet.shutdown();
  });
});
