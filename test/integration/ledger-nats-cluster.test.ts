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
import { NatsPoolLedger } from '../../src/ledger/nats/nats-pool-ledger.js';
import { fullHistoryBucket, natsWorker, revisionChecker } from '../helpers/nats-ledger.js';
import { type NatsServer, startNatsCluster } from '../helpers/nats-server.js';
import { type FixtureProcess, finishFixture, stopFixture } from '../helpers/processes.js';
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
  // Process warnings from the first connect on: the version warning is said once per process.
  const warnings: Error[] = [];
  const onWarning = (w: Error) => warnings.push(w);

  beforeAll(async () => {
    process.on('warning', onWarning);
    servers.push(...(await startNatsCluster('ledger')));
  });
  afterAll(async () => {
    process.off('warning', onWarning);
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

  it('warns about a cluster older than 2.11.0 (refuse fails connect, ignore silences it)', async () => {
    const urls = servers.map((s) => s.url);
    const l = await retry(
      () => NatsPoolLedger.connect({ servers: urls, bucket: 'r3-version', instanceId: 'version' }),
      20_000,
    );
    const version = await connect({ servers: urls });
    const serverVersion = version.info!.version;
    await version.close();
    await l.close();
    await new Promise((r) => setTimeout(r, 10));
    const ours = warnings.filter(
      (w) => (w as { code?: string }).code === 'SCALER_NATS_SERVER_VERSION',
    );
    const refused = await NatsPoolLedger.connect({
      servers: urls,
      bucket: 'r3-version',
      instanceId: 'version-refuse',
      serverVersionPolicy: 'refuse',
    }).then(
      (ledger) => ledger.close().then(() => undefined),
      (e: unknown) => e,
    );
    const silent = await retry(
      () =>
        NatsPoolLedger.connect({
          servers: urls,
          bucket: 'r3-version',
          instanceId: 'version-ignore',
          serverVersionPolicy: 'ignore',
        }),
      20_000,
    );
    await silent.close();
    if (!/^2\.(\d|10)\./.test(serverVersion)) {
      expect(ours).toEqual([]);
      expect(refused).toBeUndefined();
      return;
    }
    // Once per process and version, however many ledgers connected.
    expect(ours).toHaveLength(1);
    expect(ours[0]!.message).toContain(`nats-server ${serverVersion} is older than 2.11.0`);
    expect(ours[0]!.message).toContain("serverVersionPolicy: 'ignore'");
    expect(refused).toMatchObject({
      code: 'ERR_NATS_SERVER_VERSION',
      version: serverVersion,
      minimum: '2.11.0',
    });
  });

  it('of 12 concurrent writers from one revision, exactly one wins (nats-server#4320 guard)', async () => {
    const conns = await Promise.all(servers.map((s) => connect({ servers: s.url })));
    try {
      // allow_direct: false, so the check below reads from the stream leader, not from a
      // replica that may not have caught up with the winning write yet.
      const kv = await retry(
        () => new Kvm(conns[0]!).create('cas-race', { replicas: 3, allow_direct: false }),
        20_000,
      );
      const writers = conns.map(
        (nc) =>
          new CasWriter(
            jetstream(nc),
            'cas-race',
            async (key) => (await kv.get(key))?.revision ?? 0,
          ),
      );
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
    const jsm = await jetstreamManager(admin);
    // The bucket keeps every revision (a KV bucket made by hand, unlimited history),
    // so the whole run can be checked after it, whatever the failover did to watches.
    await retry(() => jsm.streams.add(fullHistoryBucket('scaler-pools')), 20_000);
    const kv: KV = await new Kvm(admin).open('scaler-pools');
    const leaderName = (await jsm.streams.info('KV_scaler-pools')).cluster?.leader;
    const leaderIndex = servers.findIndex((_, i) => `n${i}` === leaderName);
    expect(leaderIndex).toBeGreaterThanOrEqual(0);
    const victim = servers[leaderIndex]!;
    const others = servers.filter((s) => s !== victim);
    const cap = { maxCpu: 3, maxMemoryBytes: 3 * GiB };

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
    const polled = new Set<number>();
    const started = performance.now();
    while (polled.size < 20 && performance.now() - started < 30_000) {
      const entry = await kv.get('pool.clustered').catch(() => null);
      if (entry) polled.add(entry.revision);
      await new Promise((r) => setTimeout(r, 20));
    }
    const atKill = Math.max(...polled);
    await victim.kill();

    const results = await Promise.all(workers.map(finishFixture));
    for (const result of results) {
      expect(result.lost).toEqual([]);
      // Failover can fail a release attempt (the worker retries it); nothing else.
      for (const error of result.errors as Array<{ code?: string }>) {
        expect(error.code).toBe('ERR_LEDGER_UNAVAILABLE');
      }
    }
    const granted = results.reduce((s, r) => s + (r.granted as number), 0);
    expect(granted).toBeGreaterThan(0);

    // Every revision the run wrote, read back from the surviving nodes.
    const report = {
      revisions: [] as number[],
      violations: [] as string[],
      maxRows: 0,
      last: undefined,
    };
    const check = revisionChecker('clustered', cap, report);
    const history = await retry(() => kv.history({ key: 'pool.clustered' }), 20_000);
    for await (const entry of history) check(entry);
    expect(report.violations).toEqual([]);
    expect(report.maxRows).toBeLessThanOrEqual(3);
    // The run went on after the kill.
    expect(report.revisions.filter((rev) => rev > atKill).length).toBeGreaterThan(20);
    // Every write a worker saw acknowledged is in the stream.
    const stored = new Set(report.revisions);
    const committed = results.flatMap((r) => r.commits as number[]);
    expect(committed.filter((rev) => !stored.has(rev))).toEqual([]);

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
  });
});
