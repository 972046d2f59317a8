/**
 * NatsPoolLedger on a 3-node JetStream cluster on loopback, bucket with 3
 * replicas: the stream leader is SIGKILLed during a contention run; the run
 * completes after leader election, never over-commits and loses no grant.
 */
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { type KV, Kvm } from '@nats-io/kv';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CasWriter, isRevisionConflict } from '../../src/ledger/nats/cas.js';
import { NatsPoolLedger } from '../../src/ledger/nats/index.js';
import { natsWorker, watchRevisions } from '../helpers/nats-ledger.js';
import { freePort, type NatsServer, startNatsServer } from '../helpers/nats-server.js';
import { type FixtureProcess, stopFixture } from '../helpers/processes.js';
import { hasSystem } from '../helpers/system.js';

const GiB = 2 ** 30;
const ok = hasSystem(['nats-server'], 'NatsPoolLedger on a 3-node cluster');

async function retry<T>(fn: () => Promise<T>, timeoutMs: number): Promise<T> {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    try {
      return await fn();
    } catch (error) {
      if (performance.now() > deadline) throw error;
      await new Promise((r) => setTimeout(r, 200));
    }
  }
}

describe.runIf(ok)('NatsPoolLedger on a 3-node cluster', () => {
  const servers: NatsServer[] = [];
  const running: FixtureProcess[] = [];
  let admin: NatsConnection | undefined;

  beforeAll(async () => {
    const routes = [await freePort(), await freePort(), await freePort()];
    servers.push(
      ...(await Promise.all(
        routes.map((port, i) =>
          startNatsServer({ cluster: { name: 'ledger', port, routes, serverName: `n${i}` } }),
        ),
      )),
    );
  });
  afterAll(async () => {
    await Promise.all(running.splice(0).map((p) => stopFixture(p)));
    await admin?.close();
    await Promise.all(servers.map((s) => s.stop()));
  });

  it('connect creates the bucket with the replicas asked for', async () => {
    const ledger = await retry(
      () =>
        NatsPoolLedger.connect({
          servers: servers.map((s) => s.url),
          bucket: 'r3-created',
          instanceId: 'creator',
          replicas: 3,
        }),
      20_000,
    );
    try {
      admin = await connect({ servers: servers.map((s) => s.url) });
      const info = await (await jetstreamManager(admin)).streams.info('KV_r3-created');
      expect(info.config.num_replicas).toBe(3);
      expect(info.config.max_msgs_per_subject).toBe(1);
    } finally {
      await ledger.close();
    }
  });

  it('of 12 concurrent writers from one revision, exactly one wins (nats-server#4320 guard)', async () => {
    const conns = await Promise.all(servers.map((s) => connect({ servers: s.url })));
    try {
      const kv = await retry(() => new Kvm(conns[0]!).create('cas-race', { replicas: 3 }), 20_000);
      const writers = conns.map((nc) => new CasWriter(jetstream(nc), 'cas-race'));
      for (let round = 0; round < 20; round++) {
        const base = await kv.put(`k${round}`, 'base');
        const results = await Promise.allSettled(
          Array.from({ length: 12 }, (_, i) => writers[i % 3]!.write(`k${round}`, `w${i}`, base)),
        );
        const won = results.filter((r) => r.status === 'fulfilled');
        const lost = results.filter((r) => r.status === 'rejected');
        expect(won).toHaveLength(1);
        for (const r of lost)
          expect(isRevisionConflict((r as PromiseRejectedResult).reason)).toBe(true);
        const entry = await kv.get(`k${round}`);
        expect(entry!.revision).toBe((won[0] as PromiseFulfilledResult<number>).value);
      }
    } finally {
      await Promise.all(conns.map((nc) => nc.close()));
    }
  });

  it('survives the stream leader being killed mid-run: no over-commit, no lost grant', async () => {
    admin ??= await connect({ servers: servers.map((s) => s.url) });
    const kv: KV = await retry(
      () => new Kvm(admin!).create('scaler-pools', { replicas: 3, history: 64 }),
      20_000,
    );
    const jsm = await jetstreamManager(admin);
    const leaderName = (await jsm.streams.info('KV_scaler-pools')).cluster?.leader;
    const leaderIndex = servers.findIndex((_, i) => `n${i}` === leaderName);
    expect(leaderIndex).toBeGreaterThanOrEqual(0);
    const victim = servers[leaderIndex]!;
    const others = servers.filter((s) => s !== victim);

    // The watcher talks to a node that stays up.
    const watchConn = await connect({ servers: others.map((s) => s.url) });
    const watchKv = await new Kvm(watchConn).open('scaler-pools');
    const cap = { maxCpu: 3, maxMemoryBytes: 3 * GiB };
    const watcher = await watchRevisions(watchKv, 'clustered', cap);
    try {
      const workers = Array.from({ length: 6 }, (_, i) =>
        natsWorker(running, {
          // Each worker lists the servers in another order, so they spread over the nodes.
          servers: servers.map((_, j) => servers[(i + j) % servers.length]!.url),
          instanceId: `host-${i}`,
          pool: 'clustered',
          cap,
          iterations: 50,
          leaseMs: 10_000,
          timeoutMs: 30_000,
        }),
      );
      // Kill the leader once the run is under way.
      const started = performance.now();
      while (watcher.revisions.length < 40 && performance.now() - started < 30_000) {
        await new Promise((r) => setTimeout(r, 20));
      }
      const beforeKill = watcher.revisions.length;
      await victim.kill();

      const results = await Promise.all(
        workers.map(async (w) => {
          const exit = await w.exited;
          expect(exit, w.stderr()).toEqual({ code: 0, signal: null });
          return w.events.find((e) => e.event === 'done')!;
        }),
      );
      // Let the watcher catch up with the last revision (it may be resuming after the kill).
      const final = (await kv.get('pool.clustered'))!.revision;
      const caughtUp = performance.now() + 20_000;
      while ((watcher.last?.revision ?? 0) < final && performance.now() < caughtUp) {
        await new Promise((r) => setTimeout(r, 50));
      }

      // The run went on after the kill, and nothing failed for good.
      expect(watcher.revisions.length).toBeGreaterThan(beforeKill + 20);
      for (const result of results) {
        expect(result.lost).toEqual([]);
        // Failover can fail a release attempt (the worker retries it); nothing else.
        for (const error of result.errors as Array<{ code?: string }>) {
          expect(error.code).toBe('ERR_LEDGER_UNAVAILABLE');
        }
      }
      const granted = results.reduce((s, r) => s + (r.granted as number), 0);
      expect(granted).toBeGreaterThan(0);
      expect(watcher.violations).toEqual([]);
      expect(watcher.maxRows).toBeLessThanOrEqual(3);
      // Every write a worker saw acknowledged is a revision the watcher saw.
      const seen = new Set(watcher.revisions);
      const committed = results.flatMap((r) => r.commits as number[]);
      expect(committed.filter((rev) => !seen.has(rev))).toEqual([]);
      // Every worker closed (ending its lease); the pool ends empty.
      const auditor = await NatsPoolLedger.connect({
        servers: others.map((s) => s.url),
        instanceId: 'auditor',
      });
      auditor.registerPool('clustered', cap);
      await auditor.reapStale('clustered');
      expect(await auditor.list('clustered')).toEqual([]);
      await auditor.close();
      const end = (await kv.get('pool.clustered'))!.json<{ reservations: unknown[] }>();
      expect(end.reservations).toEqual([]);
    } finally {
      watcher.stop();
      await watchConn.close();
    }
  });
});
