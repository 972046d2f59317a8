import type { ScalerConfigInput } from 'scaler-primitives/manager';
import {
  createTestFleet,
  FleetInvariantError,
  MemoryPoolLedger,
  MemoryPoolStore,
  TestClock,
} from 'scaler-primitives/testing';
import { describe, expect, it } from 'vitest';

// A controller with a ledger per machine pool (say a machine ledger for the
// host and a NATS ledger for the GPU box), tested with a MemoryPoolLedger each.
const config: ScalerConfigInput = {
  globalMaxAgents: 6,
  machinePools: {
    host: { maxCpu: 4, maxMemory: '8Gi' },
    gpu: { maxCpu: 8, maxMemory: '32Gi' },
  },
  scalers: [
    {
      name: 'linux',
      type: 'container',
      maxAgents: 4,
      machinePool: 'host',
      labelSets: [{ labels: ['linux'], resources: { cpus: 1, memory: '1Gi' } }],
    },
    {
      name: 'cuda',
      type: 'vm',
      maxAgents: 2,
      machinePool: 'gpu',
      labelSets: [{ labels: ['cuda'], resources: { cpus: 4, memory: '16Gi' } }],
    },
  ],
};

function gpuLedger(): MemoryPoolLedger {
  // Its own store and replica id: nothing shared with the fleet's ledger.
  return new MemoryPoolLedger({
    instanceId: 'gpu-controller',
    store: new MemoryPoolStore(),
    clock: new TestClock('2026-01-05T09:00:00Z'),
  });
}

describe('createTestFleet with manager.ledgers (a ledger per pool)', () => {
  it('writes each pool to its own ledger and checks both', async () => {
    const gpu = gpuLedger();
    const fleet = createTestFleet(config, {
      backend: { registerAfterMs: 1_000 },
      manager: { ledgers: { gpu } },
    });
    expect(Object.keys(fleet.ledgers).sort()).toEqual(['gpu', 'host']);
    expect(fleet.ledgers.gpu!.instanceId).toBe('gpu-controller');
    await fleet.manager.requestScale({ jobId: 'j-1', labels: ['linux'] });
    await fleet.manager.requestScale({ jobId: 'j-2', labels: ['cuda'] });
    await fleet.clock.advance(1_000);
    fleet.checkInvariants();
    expect(gpu.inspect('gpu').live.map((r) => [r.agentId, r.instanceId])).toEqual([
      ['cuda-1', 'gpu-controller'],
    ]);
    expect(fleet.ledger.inspect('host').live.map((r) => r.agentId)).toEqual(['linux-1']);
    expect(fleet.ledger.store.pools()).not.toContain('gpu');
    await fleet.shutdown();
    expect(gpu.inspect('gpu').live).toEqual([]);
  });

  it('reports what goes wrong on the given ledger', async () => {
    const gpu = gpuLedger();
    const fleet = createTestFleet(config, {
      backend: { registerAfterMs: 1_000 },
      manager: { ledgers: { gpu } },
    });
    await fleet.manager.requestScale({ jobId: 'j-1', labels: ['cuda'] });
    await fleet.clock.advance(1_000);
    fleet.checkInvariants();
    // The row of a running agent released behind the manager's back.
    await gpu.release('gpu', 'cuda-1');
    let caught: unknown;
    try {
      fleet.checkInvariants();
    } catch (error) {
      caught = error;
    }
    expect(caught).toBeInstanceOf(FleetInvariantError);
    expect((caught as FleetInvariantError).violations).toContain(
      'agent cuda-1 (pool gpu): tracked by the manager, but it has no row',
    );
    await fleet.shutdown();
  });

  it('notes a release through fleet.ledgers while the agent still runs', async () => {
    const gpu = gpuLedger();
    const fleet = createTestFleet(config, {
      backend: { registerAfterMs: 1_000 },
      manager: { ledgers: { gpu } },
    });
    await fleet.manager.requestScale({ jobId: 'j-1', labels: ['cuda'] });
    await fleet.clock.advance(1_000);
    await fleet.ledgers.gpu!.release('gpu', 'cuda-1');
    await gpu.reserve('gpu', 'cuda-1', 4, 16 * 2 ** 30); // written back: only the release is left to see
    expect(() => fleet.checkInvariants()).toThrow(
      /pool gpu: the row of cuda-1 was released while the agent still ran on backend cuda/,
    );
    await fleet.shutdown();
  });

  it('refuses a ledger that is not a MemoryPoolLedger, naming the pool', () => {
    expect(() =>
      createTestFleet(config, {
        // biome-ignore lint/suspicious/noExplicitAny: a bad input on purpose
        manager: { ledgers: { gpu: {} as any } },
      }),
    ).toThrow(/`manager\.ledgers\.gpu` to be a MemoryPoolLedger/);
  });
});
