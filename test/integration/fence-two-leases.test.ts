/**
 * An agent with rows on two ledgers depends on both leases, for real: a
 * controller process runs ScalerManager over a file pool (`MachineLedger` on
 * a tmpfs the test mounts) and a NATS pool (`NatsPoolLedger` on a real
 * nats-server, reached through a TCP route the test can cut), with
 * `policies: { leaseLost: 'report' }` and a backend whose `destroy` does not stop
 * anything: only the agent's fence can stop it. The agent is a separate
 * process that fences itself with the one-call NATS fence
 * (`watchLeasesFromEnv`, scaler-primitives/fence/nats).
 *
 * - Only the NATS lease lapses (the controller's route to the server is cut;
 *   its file lease is renewed on): the agent stops itself, naming the NATS lease.
 * - Only the file lease lapses (the tmpfs is remounted read-only, so the lease
 *   file's mtime stops; the NATS lease is renewed on): it stops, naming the file.
 *
 * Both before the instant a peer may take the lapsed lease's rows (its last
 * renewal + lease + margin), and after running untouched for two leases while
 * both were renewed. Before this release an agent was handed one lease (the
 * earliest deadline), so one of the two cases ran on unfenced.
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { type NatsServer, startNatsServer } from '../helpers/nats-server.js';
import { type FixtureEvent, type FixtureProcess, startFixture } from '../helpers/processes.js';
import { hasSystem } from '../helpers/system.js';
import { startTcpProxy, type TcpProxy } from '../helpers/tcp-proxy.js';

const SUITE = 'fence over two leases (tmpfs mount, nats-server)';
const LEASE_MS = 2000;

// Root is needed to mount; a root without the capability (a container) cannot
// either: probe once. Under SCALER_PRIMITIVES_REQUIRE_SYSTEM=1 a missing one fails.
const canRun = (() => {
  if (!hasSystem(['root', 'nats-server'], SUITE)) return false;
  const probe = mkdtempSync(join(tmpdir(), 'fence-two-leases-probe-'));
  try {
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=1m', 'tmpfs', probe], { stdio: 'ignore' });
    execFileSync('umount', [probe], { stdio: 'ignore' });
    return true;
  } catch (error) {
    const line = `${SUITE}: \`mount -t tmpfs\` failed (${(error as Error).message.split('\n')[0]})`;
    if (process.env.SCALER_PRIMITIVES_REQUIRE_SYSTEM === '1') {
      throw new Error(`SCALER_PRIMITIVES_REQUIRE_SYSTEM=1 but ${line}`);
    }
    console.warn(`skipped: ${line}`);
    return false;
  } finally {
    rmSync(probe, { recursive: true, force: true });
  }
})();

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const mount = (...args: string[]) => execFileSync('mount', args, { stdio: 'pipe' });

describe.runIf(canRun)(SUITE, () => {
  let server: NatsServer;
  let mnt: string;
  let n = 0;
  let route: TcpProxy | undefined;
  let controller: FixtureProcess | undefined;

  beforeAll(async () => {
    server = await startNatsServer();
    mnt = mkdtempSync(join(tmpdir(), 'fence-two-leases-'));
    mount('-t', 'tmpfs', '-o', 'size=8m,mode=0755', 'tmpfs', mnt);
  });

  afterEach(async () => {
    if (controller !== undefined) {
      // The agent leads its own process group; it may still run if a case failed.
      for (const e of controller.events) {
        if (e.event !== 'spawned' || typeof e.pid !== 'number') continue;
        try {
          process.kill(-e.pid, 'SIGKILL');
        } catch {
          // Gone: the fence stopped it.
        }
      }
      controller.child.kill('SIGKILL');
      await controller.exited;
      controller = undefined;
    }
    await route?.close();
    route = undefined;
    mount('-o', 'remount,rw', mnt);
  });

  afterAll(async () => {
    try {
      execFileSync('umount', [mnt], { stdio: 'pipe' });
    } catch {
      execFileSync('umount', ['-l', mnt], { stdio: 'pipe' });
    }
    rmSync(mnt, { recursive: true, force: true });
    await server?.stop();
  });

  /** Start a controller whose one agent holds rows in both pools; wait until the agent is fenced. */
  async function start() {
    n++;
    route = await startTcpProxy(server.port);
    const fileDir = join(mnt, `ledger-${n}`);
    mkdirSync(fileDir, { mode: 0o700 });
    controller = startFixture('fence-two-leases-controller.ts', [
      JSON.stringify({
        instanceId: `ctl-${n}`,
        fileDir,
        natsServers: route.url,
        bucket: `fence-two-leases-${n}`,
        leaseMs: LEASE_MS,
        agentNatsUrl: server.url,
      }),
    ]);
    const ready = await controller.waitFor('ready', 30_000);
    expect(ready.result).toBe('spawned');
    const spawned = await controller.waitFor('spawned');
    const fenced = await controller.waitFor('agent-fenced', 30_000);
    // The agent was handed both leases and watches both.
    const locations = [ready.fileLease, ready.natsLease];
    expect((spawned.leases as Array<{ location: unknown }>).map((l) => l.location)).toEqual(
      expect.arrayContaining(locations),
    );
    expect(spawned.leases).toHaveLength(2);
    expect(fenced.leases).toEqual(expect.arrayContaining(locations));
    // Both leases renewed: the agent runs on for two leases.
    await sleep(2 * LEASE_MS);
    expect(eventsOf('agent-stop')).toEqual([]);
    expect(eventsOf('agent-exit')).toEqual([]);
    return { ready, spawned };
  }

  const eventsOf = (name: string): FixtureEvent[] =>
    controller?.events.filter((e) => e.event === name) ?? [];

  async function untilAgentExit(timeoutMs = 20_000): Promise<FixtureEvent> {
    const end = Date.now() + timeoutMs;
    while (eventsOf('agent-exit').length === 0) {
      if (Date.now() > end) {
        throw new Error(
          `the agent still runs ${timeoutMs} ms after its lease lapsed; events: ${JSON.stringify(controller?.events)}; stderr: ${controller?.stderr()}`,
        );
      }
      await sleep(25);
    }
    return eventsOf('agent-exit')[0]!;
  }

  /** The agent stopped itself for `lease`, hard, and before a peer could take its rows. */
  function expectFencedBy(lease: unknown, lapsedAt: number, marginMs: number) {
    const stops = eventsOf('agent-stop');
    expect(stops.map((e) => [e.why, e.lease])).toEqual([['deadline', lease]]);
    const exit = eventsOf('agent-exit')[0]!;
    expect(exit.signal).toBe('SIGKILL');
    // Peers may take the lapsed lease's rows from its last renewal (at or
    // before lapsedAt) + lease + margin: the agent was gone before that.
    expect(stops[0]!.t as number).toBeLessThan(lapsedAt + LEASE_MS + marginMs);
    // The manager did not stop it (policy `report`; destroy only logs).
    expect(eventsOf('destroy')).toEqual([]);
    // The controller itself runs on.
    expect(controller!.child.exitCode).toBeNull();
  }

  it('only the NATS lease lapses (the controller cut off from the server): the agent stops itself', async () => {
    const { ready, spawned } = await start();
    const cutAt = Date.now();
    route!.cut();
    await untilAgentExit();
    const natsMargin = (spawned.leases as Array<{ location: unknown; marginMs: number }>).find(
      (l) => JSON.stringify(l.location) === JSON.stringify(ready.natsLease),
    )!.marginMs;
    expectFencedBy(ready.natsLease, cutAt, natsMargin);
    // Only the NATS pool's lease was ever at risk: the file lease stayed renewed.
    const risks = eventsOf('event').filter((e) => e.kind === 'lease-at-risk');
    expect(risks.length).toBeGreaterThan(0);
    for (const risk of risks) expect(risk.pools).toEqual(['shared']);
  }, 60_000);

  it('only the file lease lapses (its tmpfs read-only): the agent stops itself', async () => {
    const { ready, spawned } = await start();
    const roAt = Date.now();
    mount('-o', 'remount,ro', mnt);
    await untilAgentExit();
    const fileMargin = (spawned.leases as Array<{ location: unknown; marginMs: number }>).find(
      (l) => JSON.stringify(l.location) === JSON.stringify(ready.fileLease),
    )!.marginMs;
    expectFencedBy(ready.fileLease, roAt, fileMargin);
    const risks = eventsOf('event').filter((e) => e.kind === 'lease-at-risk');
    expect(risks.length).toBeGreaterThan(0);
    for (const risk of risks) expect(risk.pools).toEqual(['local']);
  }, 60_000);
});
