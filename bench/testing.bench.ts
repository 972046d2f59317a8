/**
 * Wall time to simulate 24 hours of a 20-agent fleet on the TestClock
 * (createTestFleet: ScalerManager + FakeBackend + MemoryPoolLedger): jobs arrive
 * every minute during the working day, agents register after 20 s and run
 * 10-minute jobs (waiting jobs are asked for again every minute), a warm pool of 2 is kept, idle agents go after 10 minutes,
 * maintenance runs every 5 s and checkInvariants after every simulated minute.
 */
import type { ScalerConfigInput } from '../src/manager/index.js';
import { createTestFleet } from '../src/testing/index.js';
import { type BenchTable, fmt } from './lib.js';

const AGENTS = 20;
const MINUTE = 60_000;

const config: ScalerConfigInput = {
  globalMaxAgents: AGENTS,
  machinePools: { host: { maxCpu: 2 * AGENTS, maxMemory: `${4 * AGENTS}Gi` } },
  scalers: [
    {
      name: 'linux',
      type: 'container',
      maxAgents: AGENTS,
      machinePool: 'host',
      labelSets: [{ labels: ['linux'], resources: { cpus: 2, memory: '4Gi' } }],
      warmPool: { size: 2, idleTimeoutSeconds: 600 },
    },
  ],
};

async function simulateDay(settleTurns: number) {
  const fleet = createTestFleet(config, {
    start: '2026-01-05T00:00:00Z',
    clockOptions: { settleTurns },
    backend: { registerAfterMs: 20_000, jobDurationMs: 10 * MINUTE },
  });
  const waiting: string[] = [];
  let next = 0;
  let checks = 0;
  const started = performance.now();
  const cpuBefore = process.cpuUsage();
  for (let minute = 0; minute < 24 * 60; minute++) {
    const hour = Math.floor(minute / 60);
    // Working hours: 1.5 jobs a minute (20 agents take about 1.9); nights: one every 10 minutes.
    const arriving = hour >= 8 && hour < 18 ? 1 + (minute % 2) : minute % 10 === 0 ? 1 : 0;
    for (let i = 0; i < arriving; i++) waiting.push(`job-${next++}`);
    for (const jobId of waiting.splice(0)) {
      const result = await fleet.manager.requestScale(['linux'], jobId);
      if (result.kind === 'at-capacity' || result.kind === 'spawn-failed') waiting.push(jobId);
    }
    await fleet.clock.advance(MINUTE);
    fleet.checkInvariants();
    checks++;
  }
  const wallMs = performance.now() - started;
  const cpu = process.cpuUsage(cpuBefore);
  const backend = fleet.backends.linux!;
  const result = {
    wallMs,
    cpuMs: (cpu.user + cpu.system) / 1000,
    jobs: backend.jobsCompleted.length,
    spawns: backend.callsOf('spawn').length,
    destroys: backend.callsOf('destroy').length,
    checks,
    waiting: waiting.length,
  };
  await fleet.shutdown();
  return result;
}

export default async function bench(): Promise<BenchTable[]> {
  const rows: BenchTable['rows'] = [];
  let defaultWall = Number.NaN;
  for (const turns of [1, 0]) {
    const r = await simulateDay(turns);
    if (turns === 1) defaultWall = r.wallMs;
    rows.push({
      scenario: `24 h, ${AGENTS} agents, settleTurns ${turns}${turns === 1 ? ' (default)' : ''}`,
      'wall ms': fmt(r.wallMs, 0),
      // CPU time is less distorted than wall time when other work shares the machine.
      'cpu ms': fmt(r.cpuMs, 0),
      'jobs done': r.jobs,
      spawns: r.spawns,
      destroys: r.destroys,
      'invariant checks': r.checks,
      'jobs still waiting': r.waiting,
    });
  }
  return [
    {
      title: 'testing: a simulated day of a fleet on the TestClock',
      rows,
      notes: [
        `Target: well under 1000 ms of wall time for the day: ${defaultWall < 1000 ? 'met' : 'NOT met'} (${fmt(defaultWall, 0)} ms with the default settleTurns).`,
        'Each timer firing waits settleTurns real event-loop turns so promise chains settle; on a loaded machine a turn costs more.',
      ],
    },
  ];
}
