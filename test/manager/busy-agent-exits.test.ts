// What docs/manager.md "Writing a controller" says of agents that exit before
// their result is read, and of correlateAgentToJob after boundJobId.
import type { ScalerConfigInput, ScalerEvent } from 'scaler-primitives/manager';
import { createTestFleet } from 'scaler-primitives/testing';
import { describe, expect, it } from 'vitest';

const config: ScalerConfigInput = {
  globalMaxAgents: 4,
  scalers: [
    {
      name: 'vm',
      type: 'vm',
      maxAgents: 4,
      labelSets: [{ labels: ['linux'], resources: { cpus: 1 } }],
    },
  ],
};

function fleet() {
  const routed: Array<{ runId: string; jobId: string; event: ScalerEvent }> = [];
  const made = createTestFleet(config, {
    // Agents register when the test says so, and run no job by themselves.
    manager: { onScalerEvent: (runId, jobId, event) => routed.push({ runId, jobId, event }) },
  });
  return { ...made, vm: made.backends.vm!, routed };
}

describe('Writing a controller: boundJobId and correlateAgentToJob', () => {
  it('boundJobId binds the agent; correlateAgentToJob only routes its events to the job', async () => {
    const f = fleet();
    await f.manager.requestScale({ jobId: 'j-1', labels: ['linux'] });
    const answer = f.vm.register('vm-1');
    expect(answer?.boundJobId).toBe('j-1');
    expect(f.manager.getAgent('vm-1')).toMatchObject({ state: 'busy', jobId: 'j-1' });
    expect(f.routed).toEqual([]); // bound, but its events reach onEvent only
    f.manager.correlateAgentToJob('vm-1', 'run-7', 'j-1');
    expect(f.manager.getAgent('vm-1')).toMatchObject({ state: 'busy', jobId: 'j-1' });
    // The events buffered since the spawn, then `busy`, now reach onScalerEvent.
    expect(f.routed.map((r) => [r.runId, r.jobId, r.event.kind])).toContainEqual([
      'run-7',
      'j-1',
      'registered',
    ]);
    expect(f.routed.at(-1)?.event.kind).toBe('busy');
    await f.shutdown();
  });
});

describe('Writing a controller: a busy agent that exits before its result is read', () => {
  it('reconcile() forgets it with a `gone` event; the job is the host`s to fail or requeue', async () => {
    const f = fleet();
    await f.manager.requestScale({ jobId: 'j-1', labels: ['linux'] });
    await f.manager.requestScale({ jobId: 'j-2', labels: ['linux'] });
    f.vm.register('vm-1');
    f.vm.register('vm-2');
    f.manager.correlateAgentToJob('vm-1', 'run-1', 'j-1');
    // Both exit while busy; nobody calls onJobComplete or onAgentDisconnected.
    await f.vm.crash('vm-1', { disconnect: false });
    await f.vm.crash('vm-2', { disconnect: false });
    expect(f.manager.getAgent('vm-1')).toMatchObject({ state: 'busy', jobId: 'j-1' });
    const result = await f.manager.reconcile();
    expect(result.released.sort()).toEqual(['vm-1', 'vm-2']);
    expect(f.manager.getAgent('vm-1')).toBeUndefined();
    expect(f.manager.getAgent('vm-2')).toBeUndefined();
    const gone = f.events.filter((e) => e.kind === 'gone').map((e) => e.agentId);
    expect(gone.sort()).toEqual(['vm-1', 'vm-2']);
    // The correlated one's `gone` names its job; the other's names only the agent.
    expect(f.routed.filter((r) => r.event.kind === 'gone')).toEqual([
      expect.objectContaining({ runId: 'run-1', jobId: 'j-1' }),
    ]);
    // The manager never completes or requeues a job: no `idle`, the jobs are not bound anywhere.
    expect(f.events.some((e) => e.kind === 'idle')).toBe(false);
    expect(f.manager.listAgents()).toEqual([]);
    f.checkInvariants();
    await f.shutdown();
  });

  it('onAgentDisconnected, when the host hears the exit, does the same at once', async () => {
    const f = fleet();
    await f.manager.requestScale({ jobId: 'j-1', labels: ['linux'] });
    f.vm.register('vm-1');
    await f.vm.crash('vm-1'); // calls onAgentDisconnected
    expect(f.manager.getAgent('vm-1')).toBeUndefined();
    expect(f.events.map((e) => e.kind)).toContain('disconnected');
    expect((await f.manager.reconcile()).released).toEqual([]);
    await f.shutdown();
  });
});
