/**
 * A test of reality, not of books (issue 31): controllers whose agents are
 * separate processes, sharing one 2-CPU pool through MachineLedger in one
 * directory. Every agent logs when it starts and stops; each controller logs
 * every agent it spawns before the agent can run. Controller A fills the pool;
 * controller B keeps trying to reserve the same pool. Then A is SIGSTOPped
 * past its lease, or SIGKILLed and restarted after twice its lease. From the
 * log alone: the agents running at any instant never need more than the pool
 * holds, because A's agents fence themselves (scaler-primitives/fence) before
 * B may take their rows. A control run with unfenced agents shows the same
 * stall over-committing, so the check can fail. On NATS (when nats-server is
 * installed): controller A reaches the server through a TCP route the test
 * cuts, so A alone is cut off; its agents read the heartbeat key over their
 * own connections (natsHeartbeatReader) and stop before B is granted.
 *
 * Peers reap A's rows once its lease file's mtime is older than `leaseTtlMs`
 * (later still once the margin rules land); the fence fires `stopBeforeMs`
 * (a quarter of the lease by default) before mtime + `leaseTtlMs`.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server, type Socket, connect as tcpConnect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { type NatsServer, startNatsServer } from '../helpers/nats-server.js';
import { hasSystem } from '../helpers/system.js';

const controllerScript = join(import.meta.dirname, '../fixtures/fence-controller.ts');
const LEASE_TTL_MS = 2000;
const MAX_CPU = 2;

interface LogLine {
  t: number;
  event: string;
  agent?: string;
  controller?: string;
  instanceId?: string;
  pid?: number;
  cpus?: number;
  why?: string;
}

let work: string;
let log: string;
let ledgerDir: string;
const controllers: ChildProcess[] = [];

beforeEach(() => {
  work = mkdtempSync(join(tmpdir(), 'fence-reality-'));
  ledgerDir = join(work, 'ledger');
  mkdirSync(ledgerDir, { mode: 0o700 });
  log = join(work, 'log');
  writeFileSync(log, '');
});

afterEach(async () => {
  for (const controller of controllers.splice(0)) {
    if (controller.exitCode === null && controller.signalCode === null) {
      controller.kill('SIGCONT');
      controller.kill('SIGKILL');
    }
  }
  // Every agent any controller spawned leads its own process group.
  for (const line of readLog()) {
    if (line.event !== 'spawned' || line.pid === undefined) continue;
    try {
      process.kill(-line.pid, 'SIGKILL');
    } catch {
      // Gone.
    }
  }
  rmSync(work, { recursive: true, force: true });
});

function readLog(): LogLine[] {
  return readFileSync(log, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((line) => JSON.parse(line) as LogLine);
}

interface ControllerOptions {
  fence?: boolean;
  maxAgents?: number;
  nats?: { servers: string; bucket: string };
  agentNatsUrl?: string;
}

function startController(instanceId: string, options: ControllerOptions = {}): ChildProcess {
  const child = spawn(
    process.execPath,
    [
      '--import',
      'tsx',
      controllerScript,
      JSON.stringify({
        dir: ledgerDir,
        pool: 'gpu-host',
        maxCpu: MAX_CPU,
        instanceId,
        leaseTtlMs: LEASE_TTL_MS,
        log,
        fence: options.fence ?? true,
        maxAgents: options.maxAgents,
        nats: options.nats,
        agentNatsUrl: options.agentNatsUrl,
      }),
    ],
    { stdio: ['ignore', 'ignore', 'inherit'] },
  );
  controllers.push(child);
  return child;
}

async function until(what: string, predicate: (lines: LogLine[]) => boolean, timeoutMs = 30_000) {
  const end = Date.now() + timeoutMs;
  for (;;) {
    if (predicate(readLog())) return;
    if (Date.now() > end) {
      throw new Error(`timed out waiting for ${what}; log:\n${readFileSync(log, 'utf8')}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Agents of `instanceId` that logged `start`. */
const startedBy = (lines: LogLine[], instanceId: string) =>
  lines.filter((l) => l.event === 'start' && l.agent?.startsWith(`${instanceId}-`));

/**
 * The most CPUs that agents held at one instant up to `end`: each agent from
 * the moment its controller logged `spawned` until it logged `stop` (or
 * `end`). At equal times a start counts before a stop.
 */
function peak(lines: LogLine[], end: number): { cpus: number; at: number; agents: string[] } {
  const changes: Array<{ t: number; delta: number; agent: string }> = [];
  for (const line of lines) {
    if (line.event === 'spawned' && line.t <= end) {
      changes.push({ t: line.t, delta: line.cpus ?? 1, agent: line.agent! });
    }
    if (line.event === 'stop' && line.t <= end) {
      changes.push({ t: line.t, delta: -(line.cpus ?? 1), agent: line.agent! });
    }
  }
  changes.sort((a, b) => a.t - b.t || b.delta - a.delta);
  const running = new Set<string>();
  let best = { cpus: 0, at: 0, agents: [] as string[] };
  let cpus = 0;
  for (const change of changes) {
    cpus += change.delta;
    if (change.delta > 0) running.add(change.agent);
    else running.delete(change.agent);
    if (cpus > best.cpus) best = { cpus, at: change.t, agents: [...running] };
  }
  return best;
}

/** The first `spawned` of `instanceId` at or after `after`. */
const firstSpawn = (lines: LogLine[], instanceId: string, after: number) =>
  lines.find((l) => l.event === 'spawned' && l.instanceId === instanceId && l.t >= after);

/** A fills the pool; B starts and keeps trying. */
async function fillThenContend(
  options: ControllerOptions = {},
  b: ControllerOptions = { nats: options.nats, agentNatsUrl: options.agentNatsUrl },
) {
  // A stops calling once its agents fill the pool, so a stop never lands
  // inside the pool lock (a stall there is the lock's own story: peers wait
  // `staleMs`, which only delays B).
  const a = startController('ctl-a', { ...options, maxAgents: MAX_CPU });
  await until("A's two agents running", (lines) => startedBy(lines, 'ctl-a').length === MAX_CPU);
  startController('ctl-b', b);
  await until('B trying', (lines) =>
    lines.some((l) => l.event === 'controller-start' && l.instanceId === 'ctl-b'),
  );
  await sleep(LEASE_TTL_MS / 2);
  // Nothing granted to B while A renews.
  expect(readLog().filter((l) => l.event === 'spawned' && l.instanceId === 'ctl-b')).toEqual([]);
  return a;
}

describe.sequential('the fence, for real: controllers whose agents are processes', () => {
  it('a controller SIGSTOPped past its lease: its agents stop before a peer is granted their CPUs', async () => {
    const a = await fillThenContend();
    const stoppedAt = Date.now();
    a.kill('SIGSTOP');
    await until("B's two agents", (lines) => startedBy(lines, 'ctl-b').length === MAX_CPU, 20_000);
    await sleep(Math.max(0, stoppedAt + 2 * LEASE_TTL_MS - Date.now()));
    a.kill('SIGCONT');
    await sleep(1500); // A runs again: its rows are gone, B holds the pool
    const end = Date.now();
    const lines = readLog();

    const top = peak(lines, end);
    expect(top.cpus, `at ${top.at}: ${top.agents.join(', ')}`).toBeLessThanOrEqual(MAX_CPU);
    // A's agents fenced themselves within the lease, before B's first grant.
    const aStops = lines.filter((l) => l.event === 'stop' && l.agent?.startsWith('ctl-a-'));
    expect(aStops.map((l) => l.why)).toEqual(['deadline', 'deadline']);
    const bFirst = firstSpawn(lines, 'ctl-b', stoppedAt)!;
    for (const stop of aStops) {
      expect(stop.t).toBeGreaterThan(stoppedAt);
      expect(stop.t).toBeLessThan(stoppedAt + LEASE_TTL_MS);
      expect(stop.t).toBeLessThan(bFirst.t);
    }
    // After SIGCONT, A got nothing back: B holds the pool and its agents run on.
    expect(lines.filter((l) => l.event === 'stop' && l.agent?.startsWith('ctl-b-'))).toEqual([]);
    expect(lines.filter((l) => l.event === 'spawned' && l.instanceId === 'ctl-a')).toHaveLength(2);
  }, 90_000);

  it('a controller SIGKILLed and restarted after twice its lease: its old agents are gone before any peer grant', async () => {
    const a = await fillThenContend();
    const killedAt = Date.now();
    a.kill('SIGKILL');
    await sleep(2 * LEASE_TTL_MS);
    startController('ctl-a'); // the same instance, restarted
    await until("B's two agents", (lines) => startedBy(lines, 'ctl-b').length === MAX_CPU, 20_000);
    await until(
      'A restarted',
      (lines) =>
        lines.filter((l) => l.event === 'controller-start' && l.instanceId === 'ctl-a').length ===
        2,
    );
    await sleep(1500);
    const end = Date.now();
    const lines = readLog();

    const top = peak(lines, end);
    expect(top.cpus, `at ${top.at}: ${top.agents.join(', ')}`).toBeLessThanOrEqual(MAX_CPU);
    // A's old agents fenced themselves within the lease, before any grant
    // after the kill (B's, or the restarted A's).
    const aStops = lines.filter((l) => l.event === 'stop' && l.agent?.startsWith('ctl-a-'));
    expect(aStops.map((l) => l.why)).toEqual(['deadline', 'deadline']);
    const firstGrant = lines.find((l) => l.event === 'spawned' && l.t >= killedAt)!;
    expect(firstGrant).toBeDefined();
    for (const stop of aStops) {
      expect(stop.t).toBeLessThan(killedAt + LEASE_TTL_MS);
      expect(stop.t).toBeLessThan(firstGrant.t);
    }
  }, 90_000);

  it('control: with unfenced agents the same stall over-commits, and the check sees it', async () => {
    const a = await fillThenContend({ fence: false });
    a.kill('SIGSTOP');
    await until("B's two agents", (lines) => startedBy(lines, 'ctl-b').length === MAX_CPU, 20_000);
    const lines = readLog();
    const top = peak(lines, Date.now());
    expect(top.cpus).toBe(2 * MAX_CPU);
    expect(lines.filter((l) => l.event === 'stop')).toEqual([]);
  }, 90_000);
});

/**
 * A TCP route to a server that the test can cut: every connection through it
 * is dropped and new ones are refused until `heal()`. Only the controller under
 * test connects through it: it alone is cut off from the servers.
 */
async function cuttableRoute(port: number) {
  const sockets = new Set<Socket>();
  let cut = false;
  const server: Server = createServer((client) => {
    if (cut) {
      client.destroy();
      return;
    }
    const upstream = tcpConnect(port, '127.0.0.1');
    for (const socket of [client, upstream]) {
      sockets.add(socket);
      socket.on('close', () => sockets.delete(socket));
      socket.on('error', () => {});
    }
    client.pipe(upstream).pipe(client);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address() as { port: number };
  return {
    url: `nats://127.0.0.1:${address.port}`,
    cut() {
      cut = true;
      for (const socket of sockets) socket.destroy();
    },
    heal() {
      cut = false;
    },
    close() {
      cut = true;
      for (const socket of sockets) socket.destroy();
      return new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

describe.runIf(hasSystem(['nats-server'], 'fence reality on NATS'))(
  'the fence on NATS: a controller cut off from the servers',
  () => {
    let server: NatsServer;
    beforeEach(async () => {
      server = await startNatsServer();
    });
    afterEach(async () => {
      await server?.stop();
    });

    it('its agents (reading the heartbeat key themselves) stop before a peer is granted their CPUs', async () => {
      const route = await cuttableRoute(server.port);
      try {
        const bucket = 'fence-reality';
        await fillThenContend(
          { nats: { servers: route.url, bucket }, agentNatsUrl: server.url },
          { nats: { servers: server.url, bucket }, agentNatsUrl: server.url },
        );
        const cutAt = Date.now();
        route.cut();
        await until(
          "B's two agents",
          (lines) => startedBy(lines, 'ctl-b').length === MAX_CPU,
          30_000,
        );
        await sleep(Math.max(0, cutAt + 2 * LEASE_TTL_MS - Date.now()));
        route.heal();
        await sleep(1500);
        const end = Date.now();
        const lines = readLog();

        const top = peak(lines, end);
        expect(top.cpus, `at ${top.at}: ${top.agents.join(', ')}`).toBeLessThanOrEqual(MAX_CPU);
        const aStops = lines.filter((l) => l.event === 'stop' && l.agent?.startsWith('ctl-a-'));
        expect(aStops.map((l) => l.why)).toEqual(['deadline', 'deadline']);
        const bFirst = firstSpawn(lines, 'ctl-b', cutAt)!;
        for (const stop of aStops) {
          expect(stop.t).toBeGreaterThan(cutAt);
          expect(stop.t).toBeLessThan(cutAt + LEASE_TTL_MS);
          expect(stop.t).toBeLessThan(bFirst.t);
        }
        console.log(
          'NATS',
          aStops.map((l) => l.t - cutAt),
          bFirst.t - cutAt,
        );
      } finally {
        await route.close();
      }
    }, 120_000);
  },
);
