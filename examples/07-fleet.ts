/**
 * A fleet run by ScalerManager, in a few seconds:
 *
 * 1. a warm-pool schedule: two idle agents during Berlin working hours, none outside;
 * 2. drain: a busy agent finishes its job, then goes (a busy agent is never destroyed);
 * 3. backoff: a scaler whose cloud fails backs off (exponential, full jitter) while
 *    the other scaler keeps serving, and closes again once an agent registers;
 * 4. shutdown: nothing left running, the machine pool empty.
 *
 * Agents are simulated in-process; the machine pool is a real MachineLedger in a
 * throwaway directory (no root needed). Time is steered through the `clock` option
 * (the system clock with its own `now()`), so the schedule can jump to 08:00.
 *
 * Run: npx tsx examples/07-fleet.ts
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { systemClock } from 'scaler-primitives';
import { MachineLedger } from 'scaler-primitives/ledger';
import {
  type ScalerBackend,
  type ScalerConfigInput,
  ScalerManager,
  type SpawnRequest,
} from 'scaler-primitives/manager';

const dir = mkdtempSync(join(tmpdir(), 'fleet-example-'));
const ledger = new MachineLedger({ instanceId: 'fleet-example', dir });

// Virtual wall time: Monday 2026-03-30, 07:59 in Berlin (05:59Z, summer time).
let now = Date.UTC(2026, 2, 30, 5, 59);
const at = () => new Date(now).toISOString().slice(11, 16);

/** A backend that "boots" agents in-process and lets them register. */
function simulated(name: string): ScalerBackend & { running: Set<string>; failing: boolean } {
  const running = new Set<string>();
  return {
    running,
    failing: false,
    async spawn(request: SpawnRequest) {
      if (this.failing) throw new Error(`${name}: quota exceeded`);
      running.add(request.agentId);
      // The agent boots and registers with the dispatcher a moment later.
      queueMicrotask(() => {
        const answer = manager.onAgentRegistered(request.agentId, request.labels);
        console.log(
          `  ${request.agentId} registered${answer?.boundJobId ? ` for ${answer.boundJobId}` : ' (warm)'}`,
        );
      });
    },
    async destroy(agentId: string) {
      running.delete(agentId);
      console.log(`  ${agentId} destroyed`);
    },
    async list() {
      return [...running];
    },
  };
}

const vm = simulated('vm');
const cloud = simulated('cloud');

const config: ScalerConfigInput = {
  globalMaxAgents: 10,
  machinePools: { host: { maxCpu: 8, maxMemory: '16Gi' } },
  scalers: [
    {
      name: 'cloud',
      type: 'ec2',
      maxAgents: 4,
      labelSets: [{ labels: ['linux'], resources: { cpus: 2, memory: '4Gi' } }],
      spawnBackoff: { failureThreshold: 2, initialMs: 2000, maxMs: 60_000 },
    },
    {
      name: 'vm',
      type: 'firecracker',
      maxAgents: 4,
      machinePool: 'host',
      labelSets: [{ labels: ['linux'], resources: { cpus: 1, memory: '2Gi' } }],
      warmPool: {
        size: 0,
        idleTimeoutSeconds: 600,
        schedules: [{ cron: '* 8-17 * * mon-fri', timezone: 'Europe/Berlin', size: 2 }],
      },
    },
  ],
};

const manager = new ScalerManager({
  config,
  backends: [
    { name: 'vm', backend: vm },
    { name: 'cloud', backend: cloud },
  ],
  ledgers: { host: ledger },
  clock: { ...systemClock, now: () => now },
  random: () => 0.5, // deterministic jitter for the printout
  demandHoldMs: 0,
  onEvent: (e) => {
    if (e.kind.startsWith('backoff-')) console.log(`  event ${e.kind} on ${e.scaler}`);
  },
});
const settle = () => new Promise((resolve) => setTimeout(resolve, 10));

console.log('1. schedule');
let warm = manager.getStatus().scalers.find((b) => b.name === 'vm')!.warmPool!;
console.log(
  `  ${at()}Z: warm target ${warm.size}, next change at ${new Date(warm.nextChangeAt!).toISOString()}`,
);
now = warm.nextChangeAt!;
await manager.maintain();
await settle();
warm = manager.getStatus().scalers.find((b) => b.name === 'vm')!.warmPool!;
console.log(`  ${at()}Z: warm target ${warm.size} (schedule ${warm.activeSchedule} active)`);

console.log('2. drain');
const [first] = [...vm.running];
manager.correlateAgentToJob(first!, 'run-1', 'build-1');
const gone = manager.drain(first!).then(() => console.log(`  ${first} is gone`));
await settle();
const vmStatus = manager.getStatus().scalers.find((b) => b.name === 'vm')!;
console.log(
  `  draining: ${vmStatus.draining.join(', ')}; canRunJob: ${manager.canRunJob(first!, ['linux'])}`,
);
console.log(`  build-1 completes on ${first}`);
manager.onJobComplete(first!);
await gone;

console.log('3. backoff');
cloud.failing = true;
for (const job of ['job-a', 'job-b', 'job-c', 'job-d']) {
  const result = await manager.requestScale({ jobId: job, labels: ['linux'] });
  const detail =
    result.kind === 'spawned'
      ? `${result.agentId} on ${result.scaler}`
      : result.kind === 'spawn-failed'
        ? String((result.error as Error).message)
        : result.kind;
  console.log(`  ${job}: ${result.kind} (${detail})`);
  await settle();
}
const backoff = manager.getStatus().scalers.find((b) => b.name === 'cloud')!.backoff!;
console.log(
  `  cloud backoff: ${backoff.failures} failures, open until +${backoff.until! - now} ms`,
);
cloud.failing = false;
now = backoff.until!;
const retried = await manager.requestScale({ jobId: 'job-e', labels: ['linux'] });
console.log(
  `  after the backoff: ${retried.kind} on ${'backend' in retried ? retried.backend : '-'}`,
);
await settle();

console.log('4. shutdown');
await manager.shutdownAll({ drain: true, timeoutMs: 1000 });
console.log(
  `  running: vm ${vm.running.size}, cloud ${cloud.running.size}; pool rows: ${(await ledger.list('host')).length}`,
);
await ledger.close();
rmSync(dir, { recursive: true, force: true });
