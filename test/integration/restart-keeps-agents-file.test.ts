/**
 * Done means for issue 38, file half: a controller process (ScalerManager, a
 * MachineLedger with a 3 s lease, a FileStateStore, and a backend whose four
 * agents are real processes fencing themselves with `watchLeaseFromEnv()`) fills
 * a 4-CPU pool, and a peer process keeps trying to reserve in it.
 *
 * - SIGKILLed and restarted (same instanceId) at once, well within half a
 *   lease: the restarted controller continues the lease its agents watch, so
 *   all four still run three leases after the kill, their rows are adopted
 *   under the same lease, and the peer is granted nothing.
 * - Restarted only after two leases: all four agents have stopped themselves
 *   before the peer's first grant, and the restart makes a new lease.
 * - A second controller started while the first one lives is refused
 *   (`ERR_LEDGER_INSTANCE_IN_USE`) and touches nothing: the agents run on.
 *
 * The restarted controller is started before the kill and waits for a file,
 * so the time to load node and the modules (seconds on a loaded machine) is
 * not part of the restart delay the test chooses.
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { pidAlive } from '../helpers/pid.js';
import { type FixtureProcess, startFixture, stopFixture } from '../helpers/processes.js';

const LEASE_MS = 2000;

interface LogLine {
  t: number;
  event: string;
  agent?: string;
  pid?: number;
  why?: string;
}

let work: string;
let paths: { ledgerDir: string; stateDir: string; agentsDir: string; log: string; go: string };
const running: FixtureProcess[] = [];

beforeEach(() => {
  work = mkdtempSync(join(tmpdir(), 'restart-keeps-agents-'));
  paths = {
    ledgerDir: join(work, 'ledger'),
    stateDir: join(work, 'state'),
    agentsDir: join(work, 'agents'),
    log: join(work, 'log'),
    go: join(work, 'go'),
  };
  for (const d of [paths.ledgerDir, paths.stateDir, paths.agentsDir]) {
    mkdirSync(d, { mode: 0o700 });
  }
  writeFileSync(paths.log, '');
});

afterEach(async () => {
  await Promise.all(running.splice(0).map((p) => stopFixture(p)));
  // Each agent leads its own process group.
  for (const line of readLog()) {
    if (line.event !== 'start' || line.pid === undefined) continue;
    try {
      process.kill(-line.pid, 'SIGKILL');
    } catch {
      // Gone.
    }
  }
  rmSync(work, { recursive: true, force: true });
});

function readLog(): LogLine[] {
  return readFileSync(paths.log, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((line) => JSON.parse(line) as LogLine);
}

function host(phase: 'fill' | 'restart'): FixtureProcess {
  const fixture = startFixture('restart-keeps-agents-host.ts', [
    JSON.stringify({ phase, ...paths, leaseTtlMs: LEASE_MS }),
  ]);
  running.push(fixture);
  return fixture;
}

function peer(): FixtureProcess {
  const fixture = startFixture('restart-peer.ts', [
    JSON.stringify({ dir: paths.ledgerDir, log: paths.log, leaseTtlMs: LEASE_MS }),
  ]);
  running.push(fixture);
  return fixture;
}

async function until(what: string, predicate: () => boolean, timeoutMs = 60_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!predicate()) {
    if (Date.now() > end) {
      throw new Error(`timed out waiting for ${what}; log:\n${readFileSync(paths.log, 'utf8')}`);
    }
    await sleep(20);
  }
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const agentStarts = () => readLog().filter((l) => l.event === 'start');

/** A controller with four running fenced agents, a peer trying for the pool, and the restart waiting. */
async function fillContendAndStage() {
  const first = host('fill');
  const ready = await first.waitFor('ready', 60_000);
  await until('four agents running', () => agentStarts().length === 4);
  peer();
  await until('the peer trying', () => readLog().some((l) => l.event === 'peer-start'));
  const restart = host('restart');
  await restart.waitFor('loaded', 60_000);
  // The peer renews its own lease for a lease and a margin: it could judge by now.
  await sleep(LEASE_MS + 1000);
  expect(readLog().filter((l) => l.event === 'granted')).toEqual([]);
  return { first, ready, restart };
}

describe.sequential('a controller restart on MachineLedger, with real fenced agents', () => {
  it('SIGKILLed and restarted within half a lease: the same lease is continued, all 4 agents run 3 leases later, the peer is granted none of their capacity', async () => {
    const { first, ready, restart } = await fillContendAndStage();
    const killedAt = Date.now();
    first.child.kill('SIGKILL');
    await first.exited;
    writeFileSync(paths.go, '');
    const recovered = await restart.waitFor('recovered', 30_000);
    // The restart this test means: within half a lease of the kill.
    expect(Number(recovered.started) - killedAt).toBeLessThan(LEASE_MS / 2);
    expect(recovered.leaseId).toBe(ready.leaseId);
    expect(recovered.poolRows).toHaveLength(4);
    for (const row of recovered.poolRows as Array<{ how: string }>) expect(row.how).toBe('adopted');

    await sleep(Math.max(0, killedAt + 3 * LEASE_MS - Date.now()));
    const lines = readLog();
    expect(lines.filter((l) => l.event === 'stop')).toEqual([]);
    const starts = lines.filter((l) => l.event === 'start');
    expect(starts).toHaveLength(4);
    for (const start of starts) expect(pidAlive(start.pid!), `agent ${start.agent}`).toBe(true);
    expect(lines.filter((l) => l.event === 'granted')).toEqual([]);
    // Their rows are held under the lease that never lapsed.
    const doc = JSON.parse(readFileSync(join(paths.ledgerDir, 'gpu.json'), 'utf8')) as {
      reservations: Array<{ instanceId: string; leaseId: string; pid: number }>;
    };
    expect(doc.reservations).toHaveLength(4);
    for (const row of doc.reservations) {
      expect(row).toMatchObject({
        instanceId: 'restart-ctl',
        leaseId: ready.leaseId,
        pid: restart.child.pid,
      });
    }
  }, 150_000);

  it('restarted after two leases: all 4 agents stopped themselves before any peer grant, and a new lease is made', async () => {
    const { first, ready, restart } = await fillContendAndStage();
    const killedAt = Date.now();
    first.child.kill('SIGKILL');
    await first.exited;
    await sleep(Math.max(0, killedAt + 2 * LEASE_MS - Date.now()));
    writeFileSync(paths.go, '');
    const recovered = await restart.waitFor('recovered', 30_000);
    expect(recovered.leaseId).not.toBe(ready.leaseId);
    await until('the peer granted the whole pool', () => {
      return readLog().filter((l) => l.event === 'granted').length === 4;
    });
    const lines = readLog();
    const stops = lines.filter((l) => l.event === 'stop');
    expect(stops.map((l) => l.why)).toEqual(['deadline', 'deadline', 'deadline', 'deadline']);
    const firstGrant = lines.find((l) => l.event === 'granted')!;
    for (const stop of stops) {
      expect(stop.t).toBeGreaterThan(killedAt);
      expect(stop.t).toBeLessThan(firstGrant.t);
    }
    for (const start of lines.filter((l) => l.event === 'start')) {
      expect(pidAlive(start.pid!), `agent ${start.agent}`).toBe(false);
    }
  }, 150_000);

  it('a second live controller with the same instanceId is refused by recoverState() and touches nothing', async () => {
    const first = host('fill');
    const ready = await first.waitFor('ready', 60_000);
    await until('four agents running', () => agentStarts().length === 4);
    const second = host('restart');
    await second.waitFor('loaded', 60_000);
    writeFileSync(paths.go, '');
    const failed = await second.waitFor('recover-failed', 30_000);
    expect(failed.code).toBe('ERR_LEDGER_INSTANCE_IN_USE');
    expect(String(failed.message)).toContain('"restart-ctl"');
    expect(String(failed.message)).toContain(`process ${first.child.pid}`);
    await sleep(LEASE_MS);
    const lines = readLog();
    expect(lines.filter((l) => l.event === 'stop')).toEqual([]);
    for (const start of agentStarts()) expect(pidAlive(start.pid!)).toBe(true);
    const doc = JSON.parse(readFileSync(join(paths.ledgerDir, 'gpu.json'), 'utf8')) as {
      reservations: Array<{ leaseId: string; pid: number }>;
    };
    expect(doc.reservations.map((r) => [r.leaseId, r.pid])).toEqual(
      Array.from({ length: 4 }, () => [ready.leaseId, first.child.pid]),
    );
  }, 150_000);
});
