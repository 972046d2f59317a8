/**
 * GPU agents that draw from two pools on two ledgers, all or nothing, with the
 * GPUs assigned by id:
 *
 * - each controller (one per host) has its own pool `local` (this host's CPU
 *   and memory, a MachineLedger) and shares the pool `gpu-box` (4 GPUs, device
 *   ids 0..3) with the other host;
 * - a GPU agent holds a row in both pools (`machinePools: ['gpu-box', 'local']`),
 *   a CPU agent in `local` only; the ledger picks the GPU ids in the write that
 *   records the row, and the backend gets them in `request.devices`: what it
 *   passes as `docker run --gpus device=...` (printed here, nothing is started);
 * - a job that does not fit waits, naming the pool and the resource; it fits
 *   once an agent is gone, on the ids that agent freed.
 *
 * Here the shared pool is a MachineLedger in a temp directory both controllers
 * use, so the example needs no server. Across hosts it is a NatsPoolLedger:
 *
 *   const gpuBox = await NatsPoolLedger.connect({ servers: 'nats://nats:4222', instanceId });
 *   new ScalerManager({ ..., ledgers: { local: localLedger, 'gpu-box': gpuBox } });
 *
 * (`import { NatsPoolLedger } from 'scaler-primitives/ledger/nats'`; every host
 * registers the same cap, device ids included). With NATS_URL set, this example
 * does exactly that against your server (`nats-server -js`).
 *
 * Run: npx tsx examples/14-gpu-pools.ts
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { MachineLedger, type PoolLedger } from 'scaler-primitives/ledger';
import { NatsPoolLedger } from 'scaler-primitives/ledger/nats';
import {
  type ScalerBackend,
  type ScalerConfigInput,
  ScalerManager,
} from 'scaler-primitives/manager';

const GPU = 'nvidia.com/gpu';
const config: ScalerConfigInput = {
  globalMaxAgents: 8,
  machinePools: {
    local: { maxCpu: 8, maxMemory: '32Gi' },
    'gpu-box': { maxExtended: { [GPU]: 4 }, devices: { [GPU]: ['0', '1', '2', '3'] } },
  },
  scalers: [
    {
      name: 'gpu',
      type: 'container',
      maxAgents: 4,
      maxJobsPerAgent: 1,
      mandatoryLabels: ['gpu'], // only jobs that ask for `gpu`
      machinePools: ['gpu-box', 'local'],
      resourceCap: { maxCpu: 8, maxExtended: { [GPU]: 4 } },
      labelSets: [{ labels: ['linux', 'gpu'], resources: { cpus: 2, memory: '8Gi' } }],
    },
    {
      name: 'cpu',
      type: 'container',
      maxAgents: 4,
      maxJobsPerAgent: 1,
      machinePool: 'local',
      labelSets: [{ labels: ['linux'], resources: { cpus: 1, memory: '2Gi' } }],
    },
  ],
};

// What a container backend would run; this one only prints it.
const printer = (host: string): ScalerBackend => ({
  async spawn(request) {
    const ids = request.devices?.[GPU];
    const gpus = ids ? ` --gpus device=${ids.join(',')}` : '';
    const { cpus, memBytes } = request.resources.requests;
    console.log(
      `${host}: docker run --cpus ${cpus} --memory ${memBytes / 2 ** 30}g${gpus} agent  # ${request.agentId}`,
    );
  },
  async destroy() {},
});

// ------------------------------------------------------------------ the ledgers

const temp = mkdtempSync(join(tmpdir(), 'gpu-pools-example-'));
const natsUrl = process.env.NATS_URL;

async function sharedLedger(instanceId: string): Promise<PoolLedger> {
  if (natsUrl === undefined) return new MachineLedger({ instanceId, dir: join(temp, 'shared') });
  return NatsPoolLedger.connect({ servers: natsUrl.split(','), instanceId }).catch(
    (error: Error): never => {
      console.error(
        `Cannot reach a NATS server at ${natsUrl} (${error.message}); start one with \`nats-server -js\` or unset NATS_URL.`,
      );
      rmSync(temp, { recursive: true, force: true });
      process.exit(1);
    },
  );
}

async function controller(host: string) {
  const local = new MachineLedger({ instanceId: host, dir: join(temp, host) });
  const gpuBox = await sharedLedger(host);
  let n = 0;
  const backend = printer(host);
  const manager = new ScalerManager({
    config,
    backends: [
      { name: 'gpu', backend },
      { name: 'cpu', backend },
    ],
    ledgers: { local, 'gpu-box': gpuBox },
    generateAgentId: (scaler) => `${host}-${scaler}-${++n}`,
  });
  const close = async () => {
    await manager.shutdownAll();
    await local.close();
    await gpuBox.close();
  };
  return { host, manager, gpuBox, close };
}

const hosts = [await controller('host-1'), await controller('host-2')];
const [one, two] = hosts as [(typeof hosts)[0], (typeof hosts)[0]];

// ------------------------------------------------------------------ jobs

const gpus = (n: number) => ({ requests: { [GPU]: n } });
const jobs = [
  { on: one, job: 'train-a', labels: ['linux', 'gpu'], resources: gpus(2) },
  { on: two, job: 'infer', labels: ['linux', 'gpu'], resources: gpus(1) },
  { on: one, job: 'lint', labels: ['linux'], resources: undefined },
  { on: two, job: 'train-b', labels: ['linux', 'gpu'], resources: gpus(2) },
];
const spawned = new Map<string, string>();
for (const { on, job, labels, resources } of jobs) {
  const result = await on.manager.requestScale({
    jobId: job,
    labels: labels,
    resources: resources,
  });
  if (result.kind === 'spawned') {
    spawned.set(job, result.agentId);
  } else if (result.kind === 'at-capacity' && result.limit.limit === 'pool-cap') {
    const { pool, dimension, used, max } = result.limit;
    console.log(`${on.host}: ${job} waits: pool ${pool} has ${used} of ${max} ${dimension} in use`);
  } else {
    console.log(`${on.host}: ${job}: ${result.kind}`);
  }
}

console.log('\nagents, their pools and devices:');
for (const { host, manager } of hosts) {
  for (const agent of manager.listAgents()) {
    const ids = agent.devices?.[GPU];
    console.log(
      `  ${host} ${agent.agentId.padEnd(14)} pools ${agent.pools.join('+').padEnd(14)} ${ids ? `${GPU} ${ids.join(',')}` : 'no GPU'}`,
    );
  }
}

// train-a ends (one job per agent: its agent goes, its rows are released in both pools) ...
await one.manager.onAgentDisconnected(spawned.get('train-a')!);
// ... and train-b fits now, on the two ids train-a freed.
const retried = await two.manager.requestScale({
  jobId: 'train-b',
  labels: ['linux', 'gpu'],
  resources: gpus(2),
});
const trainB = retried.kind === 'spawned' ? two.manager.getAgent(retried.agentId) : undefined;
console.log(
  `\nafter train-a ended: train-b ${retried.kind}, ${GPU} ${trainB?.devices?.[GPU]?.join(',')}`,
);

for (const { host, close } of hosts) {
  await close();
  console.log(`${host}: shut down, every row released`);
}
rmSync(temp, { recursive: true, force: true });
