/**
 * What the manager's tests share, on the public test kit: a fleet driven by hand
 * (no maintenance or reconcile timer started; jitter fixed at the middle) and the
 * usual config, one scaler `vm` on one pool `host`.
 */
import type { ScalerConfigInput, ScalerManagerOptions } from '../../src/manager/index.js';
import { createTestFleet, type FleetBackendOptions } from '../../src/testing/index.js';

/** One scaler `vm` (4 agents of 1 CPU) on a pool `host` of `maxCpu` CPUs. */
export function vmOnHost(maxCpu: number, type = 'firecracker'): ScalerConfigInput {
  return {
    globalMaxAgents: 10,
    machinePools: { host: { maxCpu } },
    scalers: [
      {
        name: 'vm',
        type,
        maxAgents: 4,
        machinePool: 'host',
        labelSets: [{ labels: ['linux'], resources: { cpus: 1 } }],
      },
    ],
  };
}

/**
 * A test fleet the test drives by hand: `backend` is the scaler `vm`'s, `rows()`
 * the agent ids holding rows in `pool` now.
 */
export function handFleet(
  config: ScalerConfigInput,
  options: {
    manager?: Partial<Omit<ScalerManagerOptions, 'ledgers'>>;
    backend?: FleetBackendOptions;
    start?: NonNullable<Parameters<typeof createTestFleet>[1]>['start'];
  } = {},
) {
  const made = createTestFleet(config, {
    ...(options.start === undefined ? {} : { start: options.start }),
    ...(options.backend === undefined ? {} : { backend: options.backend }),
    startManager: false,
    manager: { random: () => 0.5, ...options.manager },
  });
  const rows = (pool = 'host') => made.ledger.inspect(pool).live.map((row) => row.agentId);
  return { ...made, backend: made.backends.vm!, rows };
}
