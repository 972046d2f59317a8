/**
 * A host restart, for real: a host process runs ScalerManager with a
 * MachineLedger and a FileStateStore; its agents are separate processes that
 * fence themselves on the host's lease (`watchLeaseFromEnv`: an agent stops
 * itself before a lease nobody renews runs out). The host is killed with
 * SIGKILL while one agent runs a job and another is being drained; a new host
 * process starts on the same directories within the lease, continues the same
 * lease (so the agents' fences stay satisfied), recovers, and prints the fleet
 * it found: the same agents, still running, in the same states, bound to the
 * same jobs, each holding exactly one pool row (now the new process's).
 *
 * No root needed: everything lives in a throwaway directory.
 *
 * Run: npx tsx examples/09-restart.ts
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { leaseEnv, stopAgentProcess, watchLeaseFromEnv } from 'scaler-primitives/fence';
import { MachineLedger } from 'scaler-primitives/ledger';
import { FileStateStore, type ScalerBackend, ScalerManager } from 'scaler-primitives/manager';

const [role, root] = process.argv.slice(2);

if (role === undefined) {
  // The operator's side: start a host, kill it mid-job, start another.
  const dir = mkdtempSync(join(tmpdir(), 'restart-example-'));
  mkdirSync(join(dir, 'agents'));
  try {
    const first = startHost('first', dir);
    const ready = await line(first, 'ready');
    console.log(
      `host ${first.pid}: ${ready.busy} runs job-build, ${ready.draining} drains after job-test (lease ${ready.leaseId})`,
    );
    first.kill('SIGKILL');
    await new Promise((resolve) => first.once('exit', resolve));
    console.log(`host ${first.pid} killed with SIGKILL (no shutdown): its agents keep running`);
    const second = startHost('second', dir);
    const recovered = await line(second, 'recovered');
    const continued = recovered.leaseId === ready.leaseId ? 'continued' : 'did not continue';
    console.log(
      `host ${second.pid} recovered in ${recovered.tookMs} ms and ${continued} lease ${ready.leaseId}:`,
    );
    for (const agent of recovered.fleet as Array<{
      agentId: string;
      state: string;
      job?: string;
      rowPid: number;
      running: boolean;
    }>) {
      console.log(
        `  ${agent.agentId}  ${agent.state.padEnd(8)}  job ${agent.job ?? '-'}  pool row held by pid ${agent.rowPid}  ${agent.running ? 'still running' : 'STOPPED'}`,
      );
    }
    const done = await line(second, 'done');
    console.log(
      `after the draining agent's job completed and shutdown: ${done.rows} rows, ${done.running} agents running`,
    );
    await new Promise((resolve) => second.once('exit', resolve));
  } finally {
    for (const name of readdirSync(join(dir, 'agents'))) {
      try {
        process.kill(Number(readFileSync(join(dir, 'agents', name), 'utf8')), 'SIGKILL');
      } catch {
        // Gone already.
      }
    }
    rmSync(dir, { recursive: true, force: true });
  }
} else if (role === 'agent') {
  // An agent: it stops itself before its controller's lease runs out unrenewed.
  watchLeaseFromEnv({ required: true, onExpire: stopAgentProcess });
  setInterval(() => {}, 1 << 30);
} else {
  await host(role, root!);
}

function startHost(name: string, dir: string): ChildProcess {
  return spawn(process.execPath, [...process.execArgv, process.argv[1]!, name, dir], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
}

function line(child: ChildProcess, event: string): Promise<Record<string, unknown>> {
  return new Promise((resolve, reject) => {
    const lines = createInterface({ input: child.stdout! });
    lines.on('line', (text) => {
      const parsed = JSON.parse(text) as Record<string, unknown>;
      if (parsed.event === event) {
        lines.close();
        resolve(parsed);
      }
    });
    child.once('exit', () => reject(new Error(`the host exited before "${event}"`)));
  });
}

// One host process: the manager, its ledger and state store, agents as processes.
async function host(name: string, dir: string): Promise<void> {
  const say = (event: string, data: Record<string, unknown> = {}) =>
    process.stdout.write(`${JSON.stringify({ event, ...data })}\n`);
  const agents = join(dir, 'agents');
  const backend: ScalerBackend = {
    async spawn(request) {
      // The agent watches the lease its pool row is held under (SpawnRequest.lease).
      const env = { ...process.env, ...(request.lease ? leaseEnv(request.lease) : {}) };
      const agent = spawn(process.execPath, [...process.execArgv, process.argv[1]!, 'agent'], {
        detached: true,
        stdio: 'ignore',
        env,
      });
      agent.unref();
      writeFileSync(join(agents, request.agentId), String(agent.pid));
    },
    async destroy(agentId) {
      try {
        process.kill(Number(readFileSync(join(agents, agentId), 'utf8')), 'SIGKILL');
      } catch {
        // Gone already.
      }
      rmSync(join(agents, agentId), { force: true });
    },
    async list() {
      return readdirSync(agents);
    },
  };
  // The same ledger instance id across restarts: the new process continues the
  // old lease (within its deadline) and takes the old rows over.
  const ledger = new MachineLedger({ instanceId: 'example-host', dir: join(dir, 'ledger') });
  let n = 0;
  const manager = new ScalerManager({
    config: {
      globalMaxAgents: 4,
      machinePools: { host: { maxCpu: 4 } },
      scalers: [
        {
          name: 'proc',
          type: 'process',
          maxAgents: 4,
          machinePool: 'host',
          labelSets: [{ labels: ['linux'], resources: { cpus: 1 } }],
        },
      ],
    },
    backends: [{ name: 'proc', backend }],
    ledgers: { host: ledger },
    stateStore: new FileStateStore({ dir: join(dir, 'state') }),
    generateAgentId: () => `agent-${name}-${++n}`,
  });

  if (name === 'first') {
    const ids: string[] = [];
    for (const job of ['job-build', 'job-test']) {
      const result = await manager.requestScale({ jobId: job, labels: ['linux'] });
      if (result.kind !== 'spawned') throw new Error(`${job}: ${result.kind}`);
      manager.onAgentRegistered(result.agentId, ['linux']);
      manager.correlateAgentToJob(result.agentId, `run-${job}`, job);
      ids.push(result.agentId);
    }
    void manager.drain(ids[1]!);
    await new Promise((resolve) => setTimeout(resolve, 100)); // the draining state is committed
    say('ready', { busy: ids[0], draining: ids[1], leaseId: ledger.leaseId });
    setInterval(() => {}, 1000); // wait to be killed
    return;
  }

  const started = performance.now();
  const result = await manager.recoverState();
  const tookMs = Math.round(performance.now() - started);
  const rows = new Map((await ledger.list('host')).map((row) => [row.agentId, row.pid]));
  const status = manager.getStatus().scalers[0]!;
  const fleet = result.recovered.map((agentId) => ({
    agentId,
    // Registered and not draining: with a job bound it is busy (this example has no idle agent).
    state: status.draining.includes(agentId) ? 'draining' : 'busy',
    job: manager.onAgentRegistered(agentId, ['linux'])?.boundJobId,
    rowPid: rows.get(agentId),
    running: isRunning(Number(readFileSync(join(agents, agentId), 'utf8'))),
  }));
  say('recovered', { tookMs, fleet, leaseId: ledger.leaseId });
  const draining = status.draining[0]!;
  const gone = manager.drain(draining);
  manager.onJobComplete(draining);
  await gone;
  await manager.shutdownAll();
  say('done', {
    rows: (await ledger.list('host')).length,
    running: (await backend.list!()).length,
  });
  await ledger.close();
}

function isRunning(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}
