import {
  parseScalerConfig,
  type ScalerConfigInput,
  validateScalerConfig,
} from 'scaler-primitives/manager';
import { createTestFleet } from 'scaler-primitives/testing';
import { describe, expect, it } from 'vitest';

const GiB = 2 ** 30;

function config(convention?: 'binary' | 'kubernetes'): ScalerConfigInput {
  return {
    ...(convention === undefined ? {} : { quantityConvention: convention }),
    globalMaxAgents: 8,
    resourceCap: { maxMemory: '100G' },
    limits: { memory: { max: '4G' } },
    machinePools: { host: { maxCpu: '8000m', maxMemory: '3G' } },
    scalers: [
      {
        name: 'vm',
        type: 'vm',
        maxAgents: 8,
        machinePool: 'host',
        labelSets: [{ labels: ['linux'], resources: { cpus: '500m', memory: '1.5G' } }],
      },
    ],
  };
}

describe('quantityConvention in the manager config', () => {
  it('binary (the default) is unchanged: "1.5G" is 1.5 GiB', () => {
    for (const parsed of [parseScalerConfig(config()), parseScalerConfig(config('binary'))]) {
      expect(parsed.machinePools.host!.maxMemoryBytes).toBe(3 * GiB);
      expect(parsed.scalers[0]!.labelSets[0]!.resources?.requests?.memory).toBe(1.5 * GiB);
      expect(parsed.resourceCap?.maxMemoryBytes).toBe(100 * GiB);
      expect(parsed.limits?.memory?.max).toBe(4 * GiB);
    }
    expect(parseScalerConfig(config())).not.toHaveProperty('quantityConvention');
  });

  it('kubernetes: "1.5G" is 1.5e9 bytes, "Gi" still 2^30, everywhere in the config', () => {
    const parsed = parseScalerConfig(config('kubernetes'));
    expect(parsed.quantityConvention).toBe('kubernetes');
    expect(parsed.machinePools.host!.maxMemoryBytes).toBe(3e9);
    expect(parsed.machinePools.host!.maxCpu).toBe(8);
    expect(parsed.scalers[0]!.labelSets[0]!.resources?.requests).toMatchObject({
      cpus: 0.5,
      memory: 1.5e9,
    });
    expect(parsed.resourceCap?.maxMemoryBytes).toBe(100e9);
    expect(parsed.limits?.memory?.max).toBe(4e9);
    const gi = parseScalerConfig({
      ...config('kubernetes'),
      machinePools: { host: { maxCpu: 8, maxMemory: '3Gi' } },
    });
    expect(gi.machinePools.host!.maxMemoryBytes).toBe(3 * GiB);
  });

  it('kubernetes: a job`s own resources read the same way, and two 1.5G agents fill a 3G pool', async () => {
    const fleet = createTestFleet(config('kubernetes'), { backend: { registerAfterMs: 1_000 } });
    await fleet.manager.requestScale({ jobId: 'a', labels: ['linux'] });
    expect(
      await fleet.manager.requestScale({
        jobId: 'b',
        labels: ['linux'],
        resources: { requests: { memory: '1.5G' } },
      }),
    ).toMatchObject({ kind: 'spawned', agentId: 'vm-2' });
    expect(fleet.manager.getAgent('vm-2')?.resources.requests.memBytes).toBe(1.5e9);
    // 3e9 bytes held: the pool is full (in binary, 3G would have room for a third 1.5e9).
    expect(await fleet.manager.requestScale({ jobId: 'c', labels: ['linux'] })).toMatchObject({
      kind: 'at-capacity',
    });
    await fleet.clock.advance(1_000);
    fleet.checkInvariants();
    await fleet.shutdown();
  });

  it('refuses an unknown convention, naming the accepted ones', () => {
    const result = validateScalerConfig({ ...config(), quantityConvention: 'si' });
    expect(result.ok).toBe(false);
    expect(result.errors[0]).toMatchObject({ path: ['quantityConvention'] });
    expect(result.errors[0]!.message).toMatch(/binary.*kubernetes/);
  });
});
