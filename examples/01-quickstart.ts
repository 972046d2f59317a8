/**
 * The whole thing in one process tree, in about ten seconds, without root:
 *
 * - a tiny dispatcher with a queue of CI jobs,
 * - a `ScalerManager` with two scalers (different label sets, caps and agent limits)
 *   that share one machine pool through a `MachineLedger` in a temp directory,
 * - a real backend, `ProcessBackend`: every agent is a detached process
 *   (examples/quickstart-agent.mjs) with its output in a log file; it registers
 *   with the dispatcher over a loopback HTTP server, runs its job (a short sleep)
 *   and exits.
 *
 * It prints progress while it runs (queued / spawning / running / done, usage
 * against caps) and a summary table at the end.
 *
 * Run: npm run demo   (or: npx tsx examples/01-quickstart.ts; with the package installed:
 *      npx tsx node_modules/scaler-primitives/examples/01-quickstart.ts)
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { text } from 'node:stream/consumers';
import { MachineLedger, type ScaleResult, ScalerManager } from 'scaler-primitives';
import { type ProcessAgentExit, ProcessBackend } from 'scaler-primitives/process';
import { formatCpu, formatMemory, type ResourceRequest } from 'scaler-primitives/resources';

const started = Date.now();
const elapsed = () => `${((Date.now() - started) / 1000).toFixed(1).padStart(5)}s`;

// ---------------------------------------------------------------- configuration

const config = {
  globalMaxAgents: 5,
  resourceCap: { maxCpu: 6, maxMemory: '8Gi' },
  machinePools: { 'this-host': { maxCpu: 5, maxMemory: '8Gi' } },
  scalers: [
    {
      name: 'linux-small',
      type: 'process',
      maxAgents: 3,
      resourceCap: { maxCpu: 3 },
      machinePool: 'this-host',
      labelSets: [{ labels: ['linux', 'small'], resources: { cpus: 1, memory: '1Gi' } }],
    },
    {
      name: 'linux-large',
      type: 'process',
      maxAgents: 2,
      // Only jobs that ask for "large" land here: small jobs never take a big agent.
      mandatoryLabels: ['large'],
      machinePool: 'this-host',
      labelSets: [{ labels: ['linux', 'large'], resources: { cpus: 2, memory: '3Gi' } }],
    },
  ],
};

interface Job {
  id: string;
  labels: string[];
  resources?: ResourceRequest;
  ms: number;
  state: 'queued' | 'spawning' | 'running' | 'done' | 'failed';
  scaler?: string;
  agentId?: string;
  why?: string;
  queuedAt: number;
  startedAt?: number;
  doneAt?: number;
}

const jobSpecs: Array<Pick<Job, 'id' | 'labels' | 'resources' | 'ms'>> = [
  { id: 'lint', labels: ['linux'], ms: 600 },
  { id: 'unit-1', labels: ['linux'], ms: 1200 },
  { id: 'unit-2', labels: ['linux'], ms: 1200 },
  { id: 'unit-3', labels: ['linux'], ms: 1200 },
  { id: 'build', labels: ['linux', 'large'], ms: 1800 },
  { id: 'e2e', labels: ['linux', 'large'], ms: 1500 },
  { id: 'docs', labels: ['linux', 'small'], ms: 500 },
  { id: 'package', labels: ['linux', 'large'], ms: 900 },
  { id: 'audit', labels: ['linux'], ms: 700 },
  { id: 'bench', labels: ['linux', 'large'], resources: { requests: { cpus: 16 } }, ms: 1000 },
  { id: 'msi', labels: ['windows'], ms: 1000 },
];
const jobs: Job[] = jobSpecs.map((spec) => ({ ...spec, state: 'queued', queuedAt: Date.now() }));

// ---------------------------------------------------------------- the backend

const work = mkdtempSync(join(tmpdir(), 'scaler-primitives-demo-'));
const ledgerDir = join(work, 'ledger');

// Agents are detached processes (they would outlive a restart of this program),
// so they reach the dispatcher over HTTP on a loopback port, not over a pipe.
const server = createServer(async (request, response) => {
  try {
    const message = JSON.parse(await text(request)) as AgentMessage;
    const answer =
      request.url === '/register'
        ? dispatcher.onRegister(message)
        : request.url === '/done'
          ? dispatcher.onDone(message)
          : undefined;
    if (answer === undefined) response.writeHead(404).end();
    else response.setHeader('content-type', 'application/json').end(JSON.stringify(answer));
  } catch (error) {
    console.error(`dispatcher: ${request.url}: ${String(error)}`);
    response.writeHead(400).end();
  }
});
await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
const dispatcherUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

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
  env: { DISPATCHER_URL: dispatcherUrl },
  graceMs: 2000,
  onExit: (exit) => dispatcher.onAgentExit(exit),
});

// ---------------------------------------------------------------- the manager

const ledger = new MachineLedger({ instanceId: 'demo-orchestrator', dir: ledgerDir });
const manager = new ScalerManager({
  config,
  backends: [
    { name: 'linux-small', backend },
    { name: 'linux-large', backend },
  ],
  ledgers: { 'this-host': ledger },
});
manager.start();

const peak = new Map<string, { agents: number; cpus: number }>();

// ---------------------------------------------------------------- the dispatcher

const dispatcher = {
  pumping: false,
  again: false,

  /** Ask the manager for an agent for every queued job; retry later what is at capacity. */
  async pump(): Promise<void> {
    if (this.pumping) {
      this.again = true;
      return;
    }
    this.pumping = true;
    try {
      do {
        this.again = false;
        for (const job of jobs.filter((j) => j.state === 'queued')) {
          const result = await manager.requestScale({
            jobId: job.id,
            labels: job.labels,
            resources: job.resources,
          });
          this.handle(job, result);
        }
      } while (this.again);
    } finally {
      this.pumping = false;
    }
  },

  handle(job: Job, result: ScaleResult): void {
    switch (result.kind) {
      case 'spawned':
        job.state = 'spawning';
        job.scaler = result.scaler;
        job.agentId = result.agentId;
        progress(`${job.id} -> spawning ${result.agentId}`);
        break;
      case 'at-capacity': {
        // Stays queued: an agent leaving wakes the pump.
        const why = describeLimit(result.limit);
        if (why !== job.why) progress(`${job.id} waits: ${why}`);
        job.why = why;
        break;
      }
      case 'never-fits':
        job.state = 'failed';
        job.why = `never fits: ${describeLimit(result.limit)}`;
        progress(`${job.id} -> failed (${job.why})`);
        break;
      case 'no-match':
        job.state = 'failed';
        job.why = `no match: ${result.reasons.map((r) => `${r.scaler} ${r.reason}${r.missing ? ` ${r.missing.join(',')}` : ''}`).join('; ')}`;
        progress(`${job.id} -> failed (${job.why})`);
        break;
      case 'spawn-failed':
        // Stays queued; everything was rolled back, so simply try again shortly.
        job.why = `spawn failed: ${String(result.error)}`;
        progress(`${job.id} -> ${job.why}; retrying`);
        setTimeout(() => void this.pump(), 500);
        break;
      case 'already-spawning':
        break;
    }
  },

  /** An agent registered: its answer is the job the manager bound it to (null: none, it exits). */
  onRegister({ agentId, labels }: AgentMessage): { jobId: string; ms: number } | null {
    const answer = manager.onAgentRegistered(agentId, labels ?? []);
    const job = jobs.find((j) => j.id === answer?.boundJobId);
    if (!job) return null;
    manager.correlateAgentToJob(agentId, 'run-1', job.id);
    job.state = 'running';
    job.agentId = agentId;
    job.startedAt = Date.now();
    progress(`${job.id} -> running on ${agentId}`);
    return { jobId: job.id, ms: job.ms };
  },

  onDone({ agentId, jobId }: AgentMessage): null {
    const job = jobs.find((j) => j.id === jobId);
    if (job) {
      manager.onJobComplete(agentId);
      job.state = 'done';
      job.doneAt = Date.now();
      progress(`${job.id} -> done`);
    }
    return null;
  },

  /** The backend saw an agent exit on its own: a job it had not finished fails, and capacity frees. */
  onAgentExit({ agentId, exitCode, signal }: ProcessAgentExit): void {
    const job = jobs.find(
      (j) => j.agentId === agentId && (j.state === 'spawning' || j.state === 'running'),
    );
    if (job) {
      job.state = 'failed';
      job.why = `agent ${agentId} exited (${exitCode === null ? (signal ?? 'status unknown') : `code ${exitCode}`}) before finishing`;
      progress(`${job.id} -> failed (${job.why})`);
    }
    void manager.onAgentDisconnected(agentId).then(() => this.pump());
  },
};

/** What an agent posts to the dispatcher. */
interface AgentMessage {
  agentId: string;
  labels?: string[];
  jobId?: string;
}

function describeLimit(limit: Extract<ScaleResult, { kind: 'at-capacity' }>['limit']): string {
  switch (limit.limit) {
    case 'global-max-agents':
    case 'scaler-max-agents':
      return `${limit.limit} ${limit.used}/${limit.max}`;
    case 'spawn-rate':
    case 'backing-off':
      return `${limit.limit}, retry in ${limit.retryAfterMs} ms`;
    case 'reservation-lost':
      return `${limit.limit} in pool ${limit.pool}`;
    case 'lease-at-risk':
      return `${limit.limit} in pool ${limit.pool} (lease ${limit.health})`;
    case 'scaler-limit-range':
    case 'global-limit-range':
      return `${limit.limit}: ${limit.message}`;
    default: {
      const f =
        limit.dimension === 'cpu'
          ? formatCpu
          : limit.dimension === 'memory'
            ? formatMemory
            : String;
      const where = limit.limit === 'pool-cap' ? `pool ${limit.pool}` : limit.limit;
      if (limit.neverFits)
        return `${where} ${limit.dimension} ${f(limit.requested)} > ${f(limit.max)}`;
      return `${where} ${limit.dimension} ${f(limit.used)} used + ${f(limit.requested)} > ${f(limit.max)}`;
    }
  }
}

function progress(what: string): void {
  const status = manager.getStatus();
  const count = (state: Job['state']) => jobs.filter((j) => j.state === state).length;
  for (const b of status.scalers) {
    const p = peak.get(b.name) ?? { agents: 0, cpus: 0 };
    peak.set(b.name, {
      agents: Math.max(p.agents, b.activeCount),
      cpus: Math.max(p.cpus, b.usage.cpus),
    });
  }
  const cap = status.globalResourceCap!;
  const pool = status.pools[0]!;
  console.log(
    `${elapsed()}  ${what.padEnd(52)} queued ${count('queued')} spawning ${count('spawning')} running ${count('running')} done ${count('done')} failed ${count('failed')} | agents ${status.globalActiveCount}/${status.globalMaxAgents} cpu ${formatCpu(status.globalUsage.cpus)}/${formatCpu(cap.maxCpu!)} mem ${formatMemory(status.globalUsage.memBytes)}/${formatMemory(cap.maxMemoryBytes!)} | pool cpu ${formatCpu(pool.usage.cpus)}/${formatCpu(pool.cap.maxCpu!)}`,
  );
}

// ---------------------------------------------------------------- run

console.log(
  `Demo: ${jobs.length} jobs, scalers linux-small (max 3 agents, 3 CPU) and linux-large (max 2, "large" jobs only), pool "this-host" (5 CPU) in ${ledgerDir}\n`,
);
await dispatcher.pump();
const deadline = Date.now() + 50_000;
while (jobs.some((j) => j.state !== 'done' && j.state !== 'failed') && Date.now() < deadline) {
  await new Promise((resolve) => setTimeout(resolve, 50));
}
await manager.shutdownAll(); // stops every agent still running (backend.shutdown())
server.close();
const poolAfter = await ledger.getUsage('this-host');
await ledger.close();
rmSync(work, { recursive: true, force: true });

// ---------------------------------------------------------------- summary

console.log('\nSummary');
const rows = [['job', 'labels', 'scaler', 'result', 'waited', 'ran', 'why']];
for (const job of jobs) {
  rows.push([
    job.id,
    job.labels.join(','),
    job.scaler ?? '-',
    job.state,
    job.startedAt ? `${((job.startedAt - job.queuedAt) / 1000).toFixed(1)}s` : '-',
    job.startedAt && job.doneAt ? `${((job.doneAt - job.startedAt) / 1000).toFixed(1)}s` : '-',
    job.state === 'failed' ? (job.why ?? '') : '',
  ]);
}
printTable(rows);
console.log('');
const status = manager.getStatus();
const scalerRows = [['scaler', 'jobs run', 'peak agents / max', 'peak cpu / cap']];
for (const s of config.scalers) {
  const p = peak.get(s.name) ?? { agents: 0, cpus: 0 };
  scalerRows.push([
    s.name,
    String(jobs.filter((j) => j.scaler === s.name && j.state === 'done').length),
    `${p.agents} / ${s.maxAgents}`,
    `${formatCpu(p.cpus)} / ${s.resourceCap ? formatCpu(s.resourceCap.maxCpu) : '-'}`,
  ]);
}
printTable(scalerRows);
const done = jobs.filter((j) => j.state === 'done').length;
const failed = jobs.filter((j) => j.state === 'failed').length;
console.log(
  `\n${done} done, ${failed} failed fast, ${jobs.length - done - failed} unfinished; cold starts ${status.counters.coldStarts}; after shutdown: ${status.globalActiveCount} agents tracked, pool holds ${formatCpu(poolAfter.cpus)} CPU and ${formatMemory(poolAfter.memBytes)} memory; ${((Date.now() - started) / 1000).toFixed(1)}s`,
);
if (jobs.length - done - failed > 0) process.exitCode = 1;

function printTable(table: string[][]): void {
  const widths = table[0]!.map((_, i) => Math.max(...table.map((row) => row[i]!.length)));
  for (const [n, row] of table.entries()) {
    console.log(
      row
        .map((cell, i) => cell.padEnd(widths[i]!))
        .join('  ')
        .trimEnd(),
    );
    if (n === 0) console.log(widths.map((w) => '-'.repeat(w)).join('  '));
  }
}
