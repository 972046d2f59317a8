/**
 * A complete small controller on ScalerManager, keeping no copy of its agents:
 *
 * - a job queue (the only state the controller keeps is its jobs);
 * - two scalers on one `ProcessBackend` (a shared backend object), with a
 *   machine pool on a real MachineLedger in a temp directory;
 * - agents that are detached processes (examples/quickstart-agent.mjs, output in
 *   a log file per agent) and register over a loopback HTTP server (a warm agent
 *   holds its request open until it is given a job), run one job and exit: the
 *   one-shot pattern, `maxJobsPerAgent: 1`. The backend reports an agent that
 *   exits on its own (`onExit`), so a job whose agent died does not stay running;
 * - warm capacity: a warm pool of two on the small scaler;
 * - the dispatch loop: `claimIdleAgent` first (a warm agent takes the job at
 *   once), else `requestScale`; agents, states and "who runs what" come from
 *   the manager (`listAgents`, `getAgent`, the registration answer);
 * - SIGINT: stop dispatching, `shutdownAll()` (every agent's process group is
 *   stopped and waited for, every pool row released), close the ledger, exit 130.
 *
 * It exits 0 by itself once its queue has drained. With CONTROLLER_LEDGER_DIR
 * set, it uses (and leaves) that ledger directory, so a test can check it is empty.
 *
 * Run: npx tsx examples/11-controller.ts
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { text } from 'node:stream/consumers';
import { MachineLedger } from 'scaler-primitives/ledger';
import {
  type ScaleResult,
  type ScalerConfigInput,
  type ScalerEvent,
  ScalerManager,
} from 'scaler-primitives/manager';
import { type ProcessAgentExit, ProcessBackend } from 'scaler-primitives/process';

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

const work = mkdtempSync(join(tmpdir(), 'controller-example-'));
const keepDir = process.env.CONTROLLER_LEDGER_DIR;
const dir = keepDir ?? join(work, 'ledger');

/** What an agent posts to the dispatcher. */
interface AgentMessage {
  agentId: string;
  labels?: string[];
  jobId?: string;
}

/** Registered agents waiting for a job: each holds its `/register` request open. */
const waitingAgents = new Map<string, (job: { jobId: string; ms: number } | null) => void>();

// Agents are detached processes, so they reach the dispatcher over HTTP on a
// loopback port, not over a pipe to this process.
const server = createServer(async (request, response) => {
  try {
    const message = JSON.parse(await text(request)) as AgentMessage;
    const reply = (value: unknown) =>
      response.setHeader('content-type', 'application/json').end(JSON.stringify(value));
    if (request.url === '/register') {
      waitingAgents.set(message.agentId, reply);
      response.once('close', () => {
        if (waitingAgents.get(message.agentId) === reply) waitingAgents.delete(message.agentId);
      });
      onRegister(message);
    } else if (request.url === '/done') {
      onDone(message);
      reply(null);
    } else response.writeHead(404).end();
  } catch (error) {
    console.error(`dispatcher: ${request.url}: ${String(error)}`);
    response.writeHead(400).end();
  }
});
await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));

// One backend object serves both scalers, so the manager calls its `shutdown()` once.
const backend = new ProcessBackend({
  dir: join(work, 'agents'),
  // The agent imports scaler-primitives/fence: from a clone it needs the same
  // loader as this program (tsx); from the installed package, none.
  command: [
    process.execPath,
    ...process.execArgv,
    join(import.meta.dirname, 'quickstart-agent.mjs'),
  ],
  // The backend adds SCALER_AGENT_ID, SCALER_LABELS and SCALER_LEASE (for the agent's fence).
  env: { DISPATCHER_URL: `http://127.0.0.1:${(server.address() as AddressInfo).port}` },
  graceMs: 2000,
  onExit: (exit) => onAgentExit(exit),
});

// ------------------------------------------------------------------ the manager

const ledger = new MachineLedger({ instanceId: 'controller-example', dir });
const manager = new ScalerManager({
  config,
  backends: [
    { name: 'small', backend },
    { name: 'large', backend },
  ],
  ledgers: { [POOL]: ledger },
  maintenanceIntervalMs: 300,
  demandHoldMs: 1000,
  onEvent: (event: ScalerEvent) => {
    if (event.kind === 'spawned') {
      const agent = manager.getAgent(event.agentId);
      log(
        `spawned ${event.agentId} pid ${agent?.context.pid}${agent?.warm ? ' (warm)' : ` for ${agent?.jobId}`}`,
      );
    }
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
  const give = waitingAgents.get(agentId);
  waitingAgents.delete(agentId);
  give?.({ jobId: job.id, ms: job.ms }); // answers the agent's /register
}

function onRegister({ agentId, labels }: AgentMessage): void {
  const answer = manager.onAgentRegistered(agentId, labels ?? []);
  const job = jobById(answer?.boundJobId);
  if (job !== undefined && job.state === 'waiting') {
    manager.correlateAgentToJob(agentId, job.id, job.id);
    start(job, agentId);
  } else void pump(); // idle (warm): maybe a job waits for it
}

function onDone({ agentId, jobId }: AgentMessage): void {
  const job = jobById(jobId);
  if (job !== undefined) job.state = 'done';
  manager.onJobComplete(agentId); // one-shot: the manager retires it
  log(`${jobId} done`);
  void pump();
}

/** The backend saw an agent exit on its own: a job it was running fails, and its capacity frees. */
function onAgentExit({ agentId, exitCode, signal }: ProcessAgentExit): void {
  const job = jobById(manager.getAgent(agentId)?.jobId);
  if (job?.state === 'running') {
    job.state = 'failed';
    job.why = `agent exited (${exitCode === null ? (signal ?? 'status unknown') : `code ${exitCode}`})`;
    log(`${job.id} failed: ${job.why}`);
  }
  void manager.onAgentDisconnected(agentId).then(() => pump());
}

// ------------------------------------------------------------------ run and shut down

async function shutdown(code: number): Promise<never> {
  stopping = true;
  await manager.shutdownAll(); // stops every agent's process group (backend.shutdown())
  for (const give of waitingAgents.values()) give(null);
  server.close();
  await ledger.close();
  const leftover = (await backend.list()).length;
  rmSync(work, { recursive: true, force: true }); // the backend's records and the agents' logs
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
