/**
 * A controller restart keeps its builds, for real, on NatsPoolLedger (issue 38):
 * a controller process (ScalerManager, NatsPoolLedger on a real nats-server,
 * FileStateStore, agents as real processes fencing themselves on the NATS
 * heartbeat key: test/fixtures/restart-nats-controller.ts) runs 4 agents on a
 * 4-slot pool while a peer process (test/fixtures/fence-controller.ts) keeps
 * asking the same pool for agents of its own.
 *
 * - SIGKILLed and restarted (same instance id) within half a lease: the restart
 *   continues the lease its agents watch, so all 4 still run 3 leases later,
 *   and the peer is granted none of their capacity meanwhile.
 * - Restarted after 2 leases: the lease is not continued; all 4 agents stopped
 *   themselves before the peer's first grant.
 * - The old session alive after all (SIGSTOPped while a newcomer on another
 *   "host" took the lease over, then SIGCONTed): it counts its lease lost and
 *   never writes the heartbeat key again.
 *
 * The restarted process is started (and has loaded its modules) before the
 * kill and connects on SIGUSR2, so the restart is timed from that signal.
 */
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type KV, Kvm } from '@nats-io/kv';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { type NatsServer, startNatsServer } from '../helpers/nats-server.js';
import { pidAlive } from '../helpers/pid.js';
import { type FixtureProcess, startFixture, stopFixture } from '../helpers/processes.js';
import { hasSystem } from '../helpers/system.js';

// The agents' fences fire at the latest 2L/3 - L/4 (1.67 s) after a kill: the restart
// must renew before that, which it does in well under a second even on a loaded machine.
const LEASE_MS = 4000;
const SLOTS = 4;
const BUCKET = 'restart-nats';

interface LogLine {
  t: number;
  event: string;
  agent?: string;
  instanceId?: string;
  pid?: number;
  why?: string;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe.runIf(hasSystem(['nats-server'], 'restart keeps agents on NATS'))(
  'a controller restart on NatsPoolLedger keeps its agents (real processes)',
  () => {
    let server: NatsServer;
    let nc: NatsConnection;
    let kv: KV;
    let work: string;
    let log: string;
    let serial = 0;
    /** Each test has a pool of its own (a killed controller's rows outlive its test). */
    let pool = '';
    const fixtures: FixtureProcess[] = [];

    beforeAll(async () => {
      server = await startNatsServer();
      nc = await connect({ servers: server.url });
      kv = await new Kvm(nc).create(BUCKET, { history: 1, allow_direct: false });
    });
    afterAll(async () => {
      await nc?.close();
      await server?.stop();
    });
    beforeEach(() => {
      pool = `gpu-${serial++}`;
      work = mkdtempSync(join(tmpdir(), 'sp-restart-nats-'));
      mkdirSync(join(work, 'state'));
      mkdirSync(join(work, 'agents'));
      log = join(work, 'log');
      writeFileSync(log, '');
    });
    afterEach(async () => {
      for (const fixture of fixtures.splice(0)) await stopFixture(fixture);
      // Every agent leads its own process group (detached).
      for (const line of readLog()) {
        if (line.event !== 'spawned' || line.pid === undefined) continue;
        for (const target of [-line.pid, line.pid]) {
          try {
            process.kill(target, 'SIGKILL');
          } catch {
            // Gone.
          }
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

    async function until(what: string, check: () => boolean, timeoutMs = 30_000): Promise<void> {
      const end = Date.now() + timeoutMs;
      while (!check()) {
        if (Date.now() > end) {
          throw new Error(`timed out waiting for ${what}; log:\n${readFileSync(log, 'utf8')}`);
        }
        await sleep(25);
      }
    }

    /** A controller process, loaded and waiting for SIGUSR2 to connect. */
    async function controller(
      instanceId: string,
      phase: 'start' | 'restart',
      extra: Record<string, unknown> = {},
    ): Promise<FixtureProcess> {
      const fixture = startFixture('restart-nats-controller.ts', [
        JSON.stringify({
          phase,
          natsUrl: server.url,
          bucket: BUCKET,
          instanceId,
          leaseMs: LEASE_MS,
          stateDir: join(work, 'state'),
          agentsDir: join(work, 'agents'),
          log,
          pool,
          maxCpu: SLOTS,
          agents: SLOTS,
          ...extra,
        }),
      ]);
      fixtures.push(fixture);
      await fixture.waitFor('loaded', 60_000);
      return fixture;
    }

    /** The peer: keeps asking for 1-CPU agents in the same pool (fenced agents of its own). */
    function peer(instanceId: string): FixtureProcess {
      const fixture = startFixture('fence-controller.ts', [
        JSON.stringify({
          dir: work,
          pool,
          maxCpu: SLOTS,
          instanceId,
          leaseTtlMs: LEASE_MS,
          log,
          everyMs: 50,
          maxAgents: SLOTS,
          nats: { servers: server.url, bucket: BUCKET },
          agentNatsUrl: server.url,
        }),
      ]);
      fixtures.push(fixture);
      return fixture;
    }

    const started = (lines: LogLine[], prefix: string) =>
      lines.filter((l) => l.event === 'start' && l.agent?.startsWith(prefix));
    const stopped = (lines: LogLine[], prefix: string) =>
      lines.filter((l) => l.event === 'stop' && l.agent?.startsWith(prefix));
    const peerGrants = (lines: LogLine[], peerId: string) =>
      lines.filter((l) => l.event === 'spawned' && l.instanceId === peerId);

    /**
     * A controller with 4 running agents and a peer contending for the pool,
     * and the restart of the controller loaded beside them (it connects on SIGUSR2).
     */
    async function fourAgentsAndAPeer(instanceId: string, peerId: string) {
      const loading = controller(instanceId, 'restart');
      const first = await controller(instanceId, 'start');
      first.child.kill('SIGUSR2');
      const ready = await first.waitFor('ready', 60_000);
      await until('4 agents running', () => started(readLog(), 'agent-start-').length === SLOTS);
      const agentPids = started(readLog(), 'agent-start-').map((l) => l.pid!);
      peer(peerId);
      await until('the peer trying', () =>
        readLog().some((l) => l.event === 'controller-start' && l.instanceId === peerId),
      );
      return { first, ready, agentPids, restart: await loading };
    }

    it('SIGKILLed and restarted within half a lease: all 4 agents run 3 leases later, the peer gets none of their capacity', async () => {
      const id = `ctl-${serial++}`;
      const peerId = `peer-${serial++}`;
      const { first, ready, agentPids, restart } = await fourAgentsAndAPeer(id, peerId);
      const killedAt = Date.now();
      first.child.kill('SIGKILL');
      await first.exited;
      restart.child.kill('SIGUSR2');
      const recovered = await restart.waitFor('recovered', 30_000);
      // The scenario: the restarted process had connected (taken the lease over) within half a lease.
      expect((recovered.connectedAt as number) - killedAt).toBeLessThan(LEASE_MS / 2);
      const lease = (ready.lease as { leaseId: string }).leaseId;
      // The restart continued the lease its agents watch and adopted their rows.
      expect((recovered.lease as { leaseId: string }).leaseId).toBe(lease);
      expect((recovered.lease as { health: string }).health).toBe('held');
      expect((recovered.recovered as string[]).length).toBe(SLOTS);
      expect((recovered.poolRows as Array<{ how: string }>).map((r) => r.how)).toEqual(
        Array(SLOTS).fill('adopted'),
      );
      expect((recovered.rows as Array<{ leaseId: string }>).every((r) => r.leaseId === lease)).toBe(
        true,
      );
      // 3 leases after the kill: every agent still runs, none stopped, the peer got nothing.
      await sleep(Math.max(0, killedAt + 3 * LEASE_MS - Date.now()));
      const lines = readLog();
      expect(stopped(lines, 'agent-start-')).toEqual([]);
      expect(agentPids.every(pidAlive)).toBe(true);
      expect(peerGrants(lines, peerId)).toEqual([]);
      console.log(
        'restart within the lease: connect took',
        recovered.connectMs,
        'ms, recovered at',
        (recovered.t as number) - killedAt,
        'ms after the kill',
      );
    }, 90_000);

    it('restarted after 2 leases: all 4 agents stopped before any peer grant', async () => {
      const id = `ctl-${serial++}`;
      const peerId = `peer-${serial++}`;
      const { first, ready, restart } = await fourAgentsAndAPeer(id, peerId);
      const killedAt = Date.now();
      first.child.kill('SIGKILL');
      await sleep(2 * LEASE_MS);
      restart.child.kill('SIGUSR2');
      const recovered = await restart.waitFor('recovered', 30_000);
      // Past the deadline: a new lease, nothing to recover (the agents are gone).
      expect((recovered.lease as { leaseId: string }).leaseId).not.toBe(
        (ready.lease as { leaseId: string }).leaseId,
      );
      expect(recovered.recovered).toEqual([]);
      await until('the peer granted', () => peerGrants(readLog(), peerId).length > 0, 30_000);
      const lines = readLog();
      const stops = stopped(lines, 'agent-start-');
      expect(stops.map((l) => l.why)).toEqual(Array(SLOTS).fill('deadline'));
      const firstGrant = peerGrants(lines, peerId)[0]!;
      for (const stop of stops) {
        expect(stop.t).toBeGreaterThan(killedAt);
        expect(stop.t).toBeLessThan(killedAt + LEASE_MS);
        expect(stop.t).toBeLessThan(firstGrant.t);
      }
      console.log(
        'restart after 2 leases: agents stopped',
        stops.map((l) => l.t - killedAt),
        'ms after the kill, first peer grant at',
        firstGrant.t - killedAt,
      );
    }, 90_000);

    it('the old session alive after all (SIGSTOP, a newcomer on another host, SIGCONT): fenced, it never renews again', async () => {
      const id = `ctl-${serial++}`;
      const loading = controller(id, 'restart', {
        bootId: 'another-host',
        policies: { leaseLost: 'report' },
      });
      const old = await controller(id, 'start', { leaseLostPolicy: 'report', agents: 1 });
      old.child.kill('SIGUSR2');
      const ready = await old.waitFor('ready', 60_000);
      const leaseId = (ready.lease as { leaseId: string }).leaseId;
      const key = `lease.${leaseId}`;
      const oldSession = ((await kv.get(key))!.json() as { session: string }).session;
      const newcomer = await loading;
      old.child.kill('SIGSTOP');
      newcomer.child.kill('SIGUSR2');
      const recovered = await newcomer.waitFor('recovered', 30_000);
      expect((recovered.lease as { leaseId: string }).leaseId).toBe(leaseId);
      const newSession = ((await kv.get(key))!.json() as { session: string }).session;
      expect(newSession).not.toBe(oldSession);
      old.child.kill('SIGCONT');
      // The old session's next refresh is refused: it counts its lease lost.
      const lost = await old.waitFor('lease-lost', 2 * LEASE_MS);
      expect((lost.lease as { health: string }).health).toBe('lost');
      // For 2 leases from then on, every heartbeat is the newcomer's, and it keeps renewing.
      const seen = new Set<string>();
      const revisions: number[] = [];
      const end = Date.now() + 2 * LEASE_MS;
      while (Date.now() < end) {
        const entry = await kv.get(key);
        const body = entry!.json() as { session?: string; ended?: string };
        expect(body.ended).toBeUndefined();
        seen.add(body.session!);
        revisions.push(entry!.revision);
        await sleep(50);
      }
      expect([...seen]).toEqual([newSession]);
      expect(revisions.at(-1)!).toBeGreaterThan(revisions[0]!);
      expect(old.events.filter((e) => e.event === 'lease-renewed')).toEqual([]);
      // The agent (adopted by the newcomer) still runs: no session ended the lease.
      expect(recovered.recovered).toHaveLength(1);
      await until('the agent started', () => started(readLog(), 'agent-start-').length === 1);
      expect(stopped(readLog(), 'agent-start-')).toEqual([]);
      expect(readdirSync(join(work, 'agents'))).toHaveLength(1);
    }, 90_000);
  },
);
