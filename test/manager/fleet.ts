/** A manager over a fake backend, a fake pool ledger and a fake clock, with the pool-row invariant checked. */
import {
  type ScalerConfigInput,
  type ScalerEvent,
  ScalerManager,
  type ScalerManagerOptions,
} from '../../src/manager/index.js';
import { FakeClock } from './fake-clock.js';
import { FakeBackend, FakeLedger } from './fakes.js';

export const config: ScalerConfigInput = {
  globalMaxAgents: 10,
  machinePools: { host: { maxCpu: 4 } },
  scalers: [
    {
      name: 'vm',
      type: 'firecracker',
      maxAgents: 4,
      machinePool: 'host',
      labelSets: [{ labels: ['linux'], resources: { cpus: 1 } }],
    },
  ],
};

export function fleet(options: Partial<ScalerManagerOptions> = {}) {
  const backend = new FakeBackend();
  const other = new FakeBackend();
  const ledger = new FakeLedger();
  const clock = new FakeClock();
  const events: ScalerEvent[] = [];
  const violations: string[] = [];
  const release = ledger.release.bind(ledger);
  // The invariant: a pool row goes back only once its agent cannot run.
  ledger.release = async (pool, agentId) => {
    if (backend.mayRun(agentId)) violations.push(`row of ${agentId} released while it may run`);
    return release(pool, agentId);
  };
  let n = 0;
  const manager = new ScalerManager({
    config,
    backends: [
      { name: 'vm', backend },
      { name: 'other', backend: other },
    ],
    ledger,
    clock,
    onEvent: (e) => events.push(e),
    generateAgentId: (scaler) => `${scaler}-${++n}`,
    random: () => 0.5,
    ...options,
  });
  return { manager, backend, other, ledger, clock, events, violations };
}
