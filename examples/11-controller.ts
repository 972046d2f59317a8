/**
 * A complete small controller on ScalerManager, keeping no copy of its agents:
 *
 * - a job queue (the only state the controller keeps is its jobs);
 * - two scalers on one process backend (a shared backend object), with a
 *   machine pool on a real MachineLedger in a temp directory;
 * - child-process agents (examples/quickstart-agent.mjs) that register over IPC,
 *   run one job and exit: the one-shot pattern, `maxJobsPerAgent: 1`;
 * - warm capacity: a warm pool of two on the small scaler;
 * - the dispatch loop: `claimIdleAgent` first (a warm agent takes the job at
 *   once), else `requestScale`; agents, states and "who runs what" come from
 *   the manager (`listAgents`, `getAgent`, the registration answer);
 * - SIGINT: stop dispatching, `shutdownAll()` (every child is killed and waited
 *   for, every pool row released), close the ledger, exit 130.
 *
 * It exits 0 by itself once its queue has drained. With CONTROLLER_LEDGER_DIR
 * set, it uses (and leaves) that ledger directory, so a test can check it is empty.
 *
 * Run: npx tsx examples/11-controller.ts
 */
import { type ChildProcess, fork } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { leaseEnv } from 'scaler-primitives/fence';
import { MachineLedger } from 'scaler-primitives/ledger';
import {
  type ScaleResult,
  type ScalerBackend,
  type ScalerConfigInput,
  type ScalerEvent,
  ScalerManager,
} from 'scaler-primitives/manager';

const started = Date.now();
const log = (line: string) =>
  console.log(`${((Date.now() - started) / 1000).toFixed(1).padStart(5)}s  ${line}`);

// ------------------------------------------------------------------ configuration

const POOL = 'this-host';
const config: ScalerConfigInput = {
  globalMaxAgents: 5,
  machinePools: { [POOL]: { maxCpu: 4, maxMemory: '8Gi' } },
  scalers: [
    {
      name: 'small',
      type: 'process',
      maxAgents: 4,
      maxJobsPerAgent: 1, // one-shot: the agent exits after its job
      machinePool: POOL,
      warmPool: { size: 2, idleTimeoutSeconds: 60 },
      labelSets: [{ labels: ['linux', 'small'], resources: { cpus: 0.5, memory: '512Mi' } }],
    },
    {
      name: 'large',
      type: 'process',
      maxAgents: 2,
      maxJobsPerAgent: 1,
      mandatoryLabels: ['large'],
      machinePool: POOL,
      labelSets: [{ labels: ['linux', 'large'], resources: { cpus: 2, memory: '2Gi' } }],
    },
  ],
};

// ------------------------------------------------------------------ the job queue

interface Job {
  id: string;
  labels: string[];
  ms: number;
  state: 'waiting' | 'running' | 'done' | 'failed';
  why?: string;
}

const jobs: Job[] = [
  ['lint', ['linux'], 400],
  ['unit-1', ['linux'], 900],
  ['unit-2', ['linux'], 900],
  ['unit-3', ['linux', 'small'], 700],
  ['build', ['linux', 'large'], 1200],
  ['e2e', ['linux', 'large'], 1000],
  ['docs', ['linux'], 300],
  ['audit', ['linux'], 500],
  ['package', ['linux', 'large'], 600],
  ['notify', ['linux'], 200],
  ['msi', ['windows'], 500],
].map(([id, labels, ms]) => ({
  id: id as string,
  labels: labels as string[],
  ms: ms as number,
  state: 'waiting' as const,
}));
const jobById = (id: string | undefined) => jobs.find((j) => j.id === id);

// ------------------------------------------------------------------ the backend

// The backend owns its processes (that is its job, not agent bookkeeping): one
// object serves both scalers, so `shutdown()` is called once for both.
const agentScript = join(import.meta.dirname, 'quickstart-agent.mjs');
const children = new Map<string, ChildProcess>();

function exited(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => child.once('exit', () => resolve()));
}

async function stop(agentId: string): Promise<void> {
  const child = children.get(agentId);
  if (child === undefined) return;
  child.kill('SIGTERM');
  const killer = setTimeout(() => child.kill('SIGKILL'), 2000);
  await exited(child);
  clearTimeout(killer);
}

const processes: ScalerBackend = {
  async spawn(request) {
    const child = fork(agentScript, [], {
      // The agent imports scaler-primitives/fence: from a clone it needs the same
      // loader as this program (tsx); from the installed package, none.
      execArgv: process.execArgv,
      env: {
        ...process.env,
        // Every lease of the controller the agent's rows are held under, for
        // the agent's fence (SCALER_LEASE): it stops at the first that lapses.
        ...leaseEnv(request.leases),
        AGENT_ID: request.agentId,
        AGENT_LABELS: JSON.stringify(request.labels),
      },
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    });
    children.set(request.agentId, child);
    child.on('message', (message) => onAgentMessage(request.agentId, message));
    child.on('exit', () => {
      children.delete(request.agentId);
      void manager.onAgentDisconnected(request.agentId).then(() => pump());
    });
    await new Promise<void>((resolve, reject) => {
      child.once('spawn', resolve);
      child.once('error', reject);
    });
    log(
      `spawned ${request.agentId} pid ${child.pid}${request.warm ? ' (warm)' : ` for ${request.jobId}`}`,
    );
  },
  destroy: stop,
  async list() {
    return [...children.keys()];
  },
  async shutdown() {
    await Promise.all([...children.keys()].map(stop));
  },
};

// ------------------------------------------------------------------ the manager

const keepDir = process.env.CONTROLLER_LEDGER_DIR;
const dir = keepDir ?? mkdtempSync(join(tmpdir(), 'controller-example-'));
const ledger = new MachineLedger({ instanceId: 'controller-example', dir });
const manager = new ScalerManager({
  config,
  backends: [
    { name: 'small', backend: processes },
    { name: 'large', backend: processes },
  ],
  ledgers: { [POOL]: ledger },
  maintenanceIntervalMs: 300,
  demandHoldMs: 1000,
  onEvent: (event: ScalerEvent) => {
    if (event.kind === 'warm-pool-held' || event.kind === 'job-taken')
      log(`event: ${event.message}`);
  },
});
log(`ledger ${dir}, pool "${POOL}"`);

// ------------------------------------------------------------------ the dispatch loop

let stopping = false;
let pumping: Promise<void> | undefined;
let again = false;

/** Give every waiting job an idle agent, else ask for a new one. One pass at a time. */
function pump(): Promise<void> {
  if (stopping) return Promise.resolve();
  if (pumping !== undefined) {
    again = true;
    return pumping;
  }
  pumping = (async () => {
    do {
      again = false;
      for (const job of jobs.filter((j) => j.state === 'waiting')) {
        if (stopping) return;
        const claim = manager.claimIdleAgent({ jobId: job.id, labels: job.labels });
        if (claim.kind === 'claimed') {
          start(job, claim.agent.agentId);
          continue;
        }
        if (claim.kind === 'shutting-down') return;
        if (claim.kind === 'already-bound' || claim.spawning !== undefined) continue;
        handle(job, await manager.requestScale({ jobId: job.id, labels: job.labels }));
      }
    } while (again && !stopping);
  })().finally(() => {
    pumping = undefined;
  });
  return pumping;
}

function handle(job: Job, result: ScaleResult): void {
  switch (result.kind) {
    case 'spawned':
    case 'already-spawning':
      break; // the agent registers bound to the job (or to another waiting one)
    case 'at-capacity':
    case 'backing-off':
      if (job.why !== result.kind) log(`${job.id} waits (${result.kind})`);
      job.why = result.kind;
      break; // an agent leaving pumps again
    case 'spawn-failed':
      setTimeout(() => void pump(), 200);
      break;
    case 'never-fits':
    case 'no-match':
      job.state = 'failed';
      job.why = result.kind;
      log(`${job.id} failed: ${result.kind}`);
      break;
    case 'shutting-down':
      break;
  }
}

function start(job: Job, agentId: string): void {
  job.state = 'running';
  delete job.why;
  const agent = manager.getAgent(agentId)!;
  log(`${job.id} -> ${agentId} (${agent.scaler}${agent.warm ? ', warm' : ''})`);
  children.get(agentId)?.send({ type: 'run', jobId: job.id, ms: job.ms });
}

function onAgentMessage(agentId: string, message: unknown): void {
  const m = message as { type: string; labels?: string[]; jobId?: string };
  if (m.type === 'register') {
    const answer = manager.onAgentRegistered(agentId, m.labels ?? []);
    const job = jobById(answer?.boundJobId);
    if (job !== undefined && job.state === 'waiting') {
      manager.correlateAgentToJob(agentId, job.id, job.id);
      start(job, agentId);
    } else void pump(); // idle (warm): maybe a job waits for it
  } else if (m.type === 'done') {
    const job = jobById(m.jobId);
    if (job !== undefined) job.state = 'done';
    manager.onJobComplete(agentId); // one-shot: the manager retires it
    log(`${m.jobId} done`);
    void pump();
  }
}

// ------------------------------------------------------------------ run and shut down

async function shutdown(code: number): Promise<never> {
  stopping = true;
  await manager.shutdownAll();
  await ledger.close();
  const leftover = children.size;
  if (keepDir === undefined) rmSync(dir, { recursive: true, force: true });
  log(`shut down: ${leftover} child process(es) left, exit ${code}`);
  process.exit(code);
}

process.once('SIGINT', () => {
  log('SIGINT: shutting down');
  void shutdown(130);
});

manager.start();
await manager.maintain(); // the warm pool fills now
await pump();
const ticker = setInterval(() => void pump(), 250);
while (jobs.some((j) => j.state === 'waiting' || j.state === 'running')) {
  await new Promise((resolve) => setTimeout(resolve, 50));
}
clearInterval(ticker);
const busy = manager.listAgents({ state: ['busy', 'draining'] }).length;
log(
  `queue drained: ${jobs.filter((j) => j.state === 'done').length} done, ${jobs.filter((j) => j.state === 'failed').length} failed, ${busy} busy agent(s)`,
);
for (const job of jobs)
  console.log(`  ${job.id.padEnd(8)} ${job.state}${job.why ? ` (${job.why})` : ''}`);
await shutdown(0);
