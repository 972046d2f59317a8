import type { ScalerConfigInput } from 'scaler-primitives/manager';
import { createTestFleet, MemoryPoolLedger, MemoryPoolStore } from 'scaler-primitives/testing';
import { describe, expect, it } from 'vitest';

const config: ScalerConfigInput = {
  globalMaxAgents: 4,
  machinePools: { 'gpu-box': { maxCpu: 8, maxMemory: '16Gi' } },
  scalers: [
    {
      name: 'vm',
      type: 'vm',
      maxAgents: 4,
      machinePool: 'gpu-box',
      labelSets: [{ labels: ['linux'], resources: { cpus: 1, memory: '1Gi' } }],
    },
  ],
};

describe('an event whose data carries an error says the reason in its message', () => {
  it('release-failed names the ledger error', async () => {
    const ledger = new MemoryPoolLedger({ instanceId: 'test-fleet', store: new MemoryPoolStore() });
    const fleet = createTestFleet(config, {
      backend: { registerAfterMs: 1_000, jobDurationMs: 1_000 },
      manager: { ledgers: { 'gpu-box': ledger } },
    });
    await fleet.manager.requestScale({ jobId: 'j-1', labels: ['linux'] });
    await fleet.clock.advance(2_000); // registered, ran j-1, idle
    ledger.release = async () => {
      throw new Error('EROFS: read-only file system');
    };
    void fleet.manager.drain('vm-1'); // settles once a release succeeds: never here
    await fleet.clock.advance(0);
    const failed = fleet.events.filter((e) => e.kind === 'release-failed');
    expect(failed.length).toBeGreaterThan(0);
    expect(failed[0]!.message).toBe(
      'Releasing vm-1 in pool "gpu-box" failed: EROFS: read-only file system',
    );
    expect((failed[0]!.data as { error: Error }).error.message).toBe(
      'EROFS: read-only file system',
    );
  });

  it('destroy-failed and spawn-failed name the backend error', async () => {
    const fleet = createTestFleet(config, {
      backend: { registerAfterMs: 1_000, jobDurationMs: 1_000 },
    });
    fleet.backends.vm!.failNext(1, new Error('cloud quota exceeded'));
    await fleet.manager.requestScale({ jobId: 'j-1', labels: ['linux'] });
    const spawnFailed = fleet.events.find((e) => e.kind === 'spawn-failed');
    expect(spawnFailed?.message).toBe(
      'The backend of scaler vm failed to spawn vm-1: cloud quota exceeded',
    );
    await fleet.manager.requestScale({ jobId: 'j-2', labels: ['linux'] });
    await fleet.clock.advance(2_000); // registered, ran j-2, idle
    const id = fleet.backends.vm!.running()[0]!;
    fleet.backends.vm!.failNext(1, new Error('vm stuck'), 'destroy');
    void fleet.manager.drain(id);
    await fleet.clock.advance(0);
    expect(fleet.events.find((e) => e.kind === 'destroy-failed')?.message).toBe(
      `Destroying ${id} failed: vm stuck`,
    );
    await fleet.shutdown();
  });
});
