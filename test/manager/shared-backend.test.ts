import { type ScalerConfigInput, ScalerManager } from 'scaler-primitives/manager';
import { FakeBackend, TestClock } from 'scaler-primitives/testing';
import { describe, expect, it } from 'vitest';

// One backend object (one process supervisor, one cloud account) serving three scalers.
const config: ScalerConfigInput = {
  globalMaxAgents: 10,
  scalers: [
    { name: 'small', type: 'process', maxAgents: 4, labelSets: [{ labels: ['small'] }] },
    { name: 'large', type: 'process', maxAgents: 4, labelSets: [{ labels: ['large'] }] },
    { name: 'gpu', type: 'process', maxAgents: 4, labelSets: [{ labels: ['gpu'] }] },
  ],
};

function setup() {
  const clock = new TestClock('2026-01-05T09:00:00Z');
  const backend = new FakeBackend({ clock, name: 'shared' });
  let n = 0;
  const manager = new ScalerManager({
    config,
    backends: ['small', 'large', 'gpu'].map((name) => ({ name, backend })),
    clock,
    generateAgentId: (scaler) => `${scaler}-${++n}`,
  });
  backend.attach(manager);
  return { clock, backend, manager };
}

async function spawnIdle(manager: ScalerManager, backend: FakeBackend, label: string, job: string) {
  const result = (await manager.requestScale({ jobId: job, labels: [label] })) as {
    agentId: string;
  };
  backend.register(result.agentId);
  backend.runJob(result.agentId, job, Number.POSITIVE_INFINITY);
  backend.completeJob(result.agentId);
  expect(manager.getAgent(result.agentId)?.state).toBe('idle');
  return result.agentId;
}

describe('one backend object serving several scalers', () => {
  it('calls shutdown() once for all of its scalers, and forgets every agent', async () => {
    const { backend, manager } = setup();
    await spawnIdle(manager, backend, 'small', 'j1');
    await spawnIdle(manager, backend, 'large', 'j2');
    await spawnIdle(manager, backend, 'gpu', 'j3');
    expect(backend.running()).toHaveLength(3);
    await manager.shutdownAll();
    expect(backend.callsOf('shutdown')).toHaveLength(1);
    expect(backend.callsOf('destroy')).toHaveLength(0);
    expect(backend.running()).toEqual([]);
    expect(manager.listAgents()).toEqual([]);
  });

  it('calls list() once per reconcile and releases only agents it no longer runs', async () => {
    const { backend, manager } = setup();
    const a = await spawnIdle(manager, backend, 'small', 'j1');
    const b = await spawnIdle(manager, backend, 'large', 'j2');
    const c = await spawnIdle(manager, backend, 'gpu', 'j3');
    await backend.destroy(b); // gone behind the manager's back
    const result = await manager.reconcile();
    expect(backend.callsOf('list')).toHaveLength(1);
    expect(result).toEqual({ released: [b], untracked: [], failed: [] });
    expect(manager.listAgents().map((x) => x.agentId)).toEqual([a, c]);

    backend.failNext(1, new Error('api down'), 'list');
    const failed = await manager.reconcile();
    expect(backend.callsOf('list')).toHaveLength(2);
    expect(failed.failed.map((f) => f.scaler)).toEqual(['small', 'large', 'gpu']);
    expect(failed.released).toEqual([]);
    await manager.shutdownAll();
  });

  it("one scaler's removal or drain never ends another's agents", async () => {
    const { backend, manager } = setup();
    const a = await spawnIdle(manager, backend, 'small', 'j1');
    const b = await spawnIdle(manager, backend, 'large', 'j2');
    const c = await spawnIdle(manager, backend, 'gpu', 'j3');
    // Remove `small` by reload: its idle agent goes at the next pass, the others stay.
    const reloaded = await manager.reload({ ...config, scalers: config.scalers.slice(1) });
    expect(reloaded.ok).toBe(true);
    await manager.maintain();
    expect(backend.callsOf('destroy').map((call) => call.agentId)).toEqual([a]);
    expect(backend.running()).toEqual([b, c]);
    await manager.drainScaler('large');
    expect(backend.callsOf('destroy').map((call) => call.agentId)).toEqual([a, b]);
    expect(backend.running()).toEqual([c]);
    expect(manager.listAgents().map((x) => x.agentId)).toEqual([c]);
    await manager.shutdownAll();
    expect(backend.callsOf('shutdown')).toHaveLength(1);
  });
});
