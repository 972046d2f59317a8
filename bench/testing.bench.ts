/**
 * Wall time to simulate 24 hours of a 20-agent fleet on the TestClock
 * (createTestFleet: ScalerManager + FakeBackend + MemoryPoolLedger): jobs arrive
 * every minute during the working day, agents register after 20 s and run
 * 10-minute jobs, a warm pool of 2 is kept, idle agents go after 10 minutes,
 * maintenance runs every 5 s and checkInvariants after every simulated minute.
 * Every minute the dispatcher gives waiting jobs to idle agents, as a CI
 * server does, and asks requestScale for the rest. A last row leaves idle
 * agents without work, so waiting jobs pile up and each is asked for again
 * every minute: that measures requestScale more than the clock (the churn
 * day: about 1,000 spawns).
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

async function simulateDay(settleTurns: number, dispatch: boolean) {
  const fleet = createTestFleet(config, {
    start: '2026-01-05T00:00:00Z',
    clockOptions: { settleTurns },
    backend: { registerAfterMs: 20_000, jobDurationMs: 10 * MINUTE },
  });
  const waiting: string[] = [];
  let next = 0;
  let checks = 0;
  let asks = 0;
  const backend = fleet.backends.linux!;
  const started = performance.now();
  const cpuBefore = process.cpuUsage();
  for (let minute = 0; minute < 24 * 60; minute++) {
    const hour = Math.floor(minute / 60);
    // Working hours: 1.5 jobs a minute (20 agents take about 1.9); nights: one every 10 minutes.
    const arriving = hour >= 8 && hour < 18 ? 1 + (minute % 2) : minute % 10 === 0 ? 1 : 0;
    for (let i = 0; i < arriving; i++) waiting.push(`job-${next++}`);
    if (dispatch) {
      for (const agentId of backend.running()) {
        if (waiting.length === 0) break;
        if (backend.agent(agentId)?.state === 'idle') {
          backend.runJob(agentId, waiting.shift()!, 10 * MINUTE);
        }
      }
    }
    for (const jobId of waiting.splice(0)) {
      asks++;
      const result = await fleet.manager.requestScale({ jobId: jobId, labels: ['linux'] });
      if (result.kind === 'at-capacity' || result.kind === 'spawn-failed') waiting.push(jobId);
    }
    await fleet.clock.advance(MINUTE);
    fleet.checkInvariants();
    checks++;
  }
  const wallMs = performance.now() - started;
  const cpu = process.cpuUsage(cpuBefore);
  const result = {
    wallMs,
    cpuMs: (cpu.user + cpu.system) / 1000,
    jobs: backend.jobsCompleted.length,
    spawns: backend.callsOf('spawn').length,
    destroys: backend.callsOf('destroy').length,
    checks,
    asks,
    waiting: waiting.length,
  };
  await fleet.shutdown();
  return result;
}

export default async function bench(): Promise<BenchTable[]> {
  const rows: BenchTable['rows'] = [];
  const walls = new Map<string, number>();
  const scenarios = [
    { key: 'default', turns: 1, dispatch: true, label: 'default day (dispatch, settleTurns 1)' },
    { key: 'churn', turns: 1, dispatch: false, label: 'churn day (no dispatch, ~1,000 spawns)' },
    { key: 'zero', turns: 0, dispatch: true, label: 'default day, settleTurns 0' },
  ];
  for (const { key, turns, dispatch, label } of scenarios) {
    const r = await simulateDay(turns, dispatch);
    walls.set(key, r.wallMs);
    rows.push({
      scenario: `${label}: 24 h, ${AGENTS} agents`,
      'wall ms': fmt(r.wallMs, 0),
      // CPU time is less distorted than wall time when other work shares the machine.
      'cpu ms': fmt(r.cpuMs, 0),
      'jobs done': r.jobs,
      spawns: r.spawns,
      destroys: r.destroys,
      'requestScale calls': r.asks,
      'invariant checks': r.checks,
      'jobs still waiting': r.waiting,
    });
  }
  return [
    {
      title: 'testing: a simulated day of a fleet on the TestClock',
      rows,
      notes: [
        `Target: the default day under 300 ms of wall time: ${walls.get('default')! < 300 ? 'met' : 'NOT met'} (${fmt(walls.get('default')!, 0)} ms; the first row also pays the JIT warm-up).`,
        `Target: the churn day under 500 ms of wall time: ${walls.get('churn')! < 500 ? 'met' : 'NOT met'} (${fmt(walls.get('churn')!, 0)} ms).`,
        'After each timer firing the clock drains the microtask queues and takes a real event-loop turn only while an immediate or an I/O request is pending (none in this simulation).',
        'Churn: without dispatch, idle agents hold capacity until their idle timeout, jobs pile up and every waiting job is asked for again each minute: most of that row is requestScale.',
        'Wall time on a shared machine is noisy: compare the cpu ms column, and quote `uptime` with the figures.',
      ],
    },
  ];
}
