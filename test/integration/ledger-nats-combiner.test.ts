/**
 * The cross-process combiner of NatsPoolLedger, against a real nats-server and
 * a real 3-node cluster, with real worker processes: the combiner SIGKILLed or
 * stalled past its lease mid-run, requests it must refuse (not combining, a
 * stale lease, another cap, malformed). Every revision is checked by an
 * independent watcher: never over the cap, never two rows for one agent, never
 * an agent's row back after it left (a call applied twice or late).
 */
import { jetstreamManager } from '@nats-io/jetstream';
import { type KV, Kvm } from '@nats-io/kv';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { decodeCombinerRecord } from '../../src/ledger/nats/combine-wire.js';
import { NatsPoolLedger } from '../../src/ledger/nats/nats-pool-ledger.js';
import {
  fenceLeaseKey,
  fullHistoryBucket,
  natsWorker,
  revisionChecker,
  watchRevisions,
} from '../helpers/nats-ledger.js';
import { type NatsServer, startNatsCluster, startNatsServer } from '../helpers/nats-server.js';
import {
  type FixtureEvent,
  type FixtureProcess,
  finishFixture,
  stopFixture,
} from '../helpers/processes.js';
import { hasSystem } from '../helpers/system.js';

const ok = hasSystem(['nats-server'], 'NatsPoolLedger combiner tests');

async function until(check: () => Promise<boolean>, timeoutMs: number, what: string) {
  const deadline = performance.now() + timeoutMs;
  while (!(await check().catch(() => false))) {
    if (performance.now() > deadline) throw new Error(`timed out: ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** The worker that combines `pool` now, by the lease id in its combiner key (`leader.<pool>`). */
async function combinerOf(
  kv: KV,
  pool: string,
  workers: FixtureProcess[],
): Promise<FixtureProcess> {
  let found: FixtureProcess | undefined;
  await until(
    async () => {
      const entry = await kv.get(`leader.${pool}`);
      const record = entry ? decodeCombinerRecord(entry.string(), 'scaler-pools') : undefined;
      found = workers.find((w) => w.events.some((e) => e.leaseId === record?.leaseId));
      return found !== undefined;
    },
    20_000,
    'a worker to combine the pool',
  );
  return found!;
}

/** Let workers churn until the pool key has moved `revisions` times. */
async function churned(kv: KV, pool: string, revisions: number): Promise<number> {
  const first = (await kv.get(`pool.${pool}`).catch(() => null))?.revision ?? 0;
  let last = first;
  await until(
    async () => {
      last = (await kv.get(`pool.${pool}`))?.revision ?? 0;
      return last - first >= revisions;
    },
    60_000,
    `${revisions} revisions of ${pool}`,
  );
  return last;
}

function expectCleanSurvivor(result: FixtureEvent): void {
  expect(result.lost).toEqual([]);
  expect(result.errors).toEqual([]);
  expect(result.granted as number).toBeGreaterThan(0);
}

describe.runIf(ok)('NatsPoolLedger combiner, one server', () => {
  let server: NatsServer;
  let nc: NatsConnection;
  let kv: KV;
  const running: FixtureProcess[] = [];

  beforeAll(async () => {
    server = await startNatsServer();
    nc = await connect({ servers: server.url });
    kv = await new Kvm(nc).create('scaler-pools', { history: 64 });
  });
  afterEach(async () => {
    await Promise.all(running.splice(0).map((p) => stopFixture(p)));
  });
  afterAll(async () => {
    await nc?.close();
    await server?.stop();
  });

  function churners(pool: string, count: number, leaseMs: number) {
    return Array.from({ length: count }, (_, i) =>
      natsWorker(running, {
        servers: [server.url],
        instanceId: `${pool}-${i}`,
        pool,
        cap: { maxCpu: 3 },
        memBytes: 0,
        iterations: 0,
        leaseMs,
        timeoutMs: 30_000,
        reapEveryMs: 300,
      }),
    );
  }

  // 5 churners on `pool` under leases of `leaseMs`, watched; once they churn,
  // the one that combines the pool is SIGKILLed.
  async function killTheCombiner(pool: string, leaseMs: number) {
    const watcher = await watchRevisions(kv, pool, { maxCpu: 3 });
    const workers = churners(pool, 5, leaseMs);
    await Promise.all(workers.map((w) => w.waitFor('ready')));
    await churned(kv, pool, 30);
    const victim = await combinerOf(kv, pool, workers);
    victim.child.kill('SIGKILL');
    await victim.exited;
    return { watcher, survivors: workers.filter((w) => w !== victim) };
  }

  it('a combiner SIGKILLed mid-run: the others go on, nothing over the cap, applied twice or lost', async () => {
    const pool = 'killed-combiner';
    const { watcher, survivors } = await killTheCombiner(pool, 1500);
    // The run goes on, under a new combiner.
    await churned(kv, pool, 30);
    expect(await combinerOf(kv, pool, survivors)).toBeDefined();
    for (const w of survivors) w.child.kill('SIGTERM');
    const results = await Promise.all(survivors.map(finishFixture));
    for (const result of results) expectCleanSurvivor(result);
    // The victim's rows are reaped once its lease ends; nothing else is left.
    const auditor = await NatsPoolLedger.connect({ nc, instanceId: 'auditor', leaseMs: 1500 });
    auditor.registerPool(pool, { maxCpu: 3 });
    await until(
      async () => {
        await auditor.reapStale(pool);
        return (await auditor.list(pool)).length === 0;
      },
      10_000,
      'the pool to end empty',
    );
    await auditor.close();
    await new Promise((r) => setTimeout(r, 200));
    watcher.stop();
    expect(watcher.violations).toEqual([]);
    expect(watcher.maxRows).toBeLessThanOrEqual(3);
    const granted = results.flatMap((r) => r.grantedAgents as string[]);
    expect(granted.filter((agent) => !watcher.agents.has(agent))).toEqual([]);
  });

  it('a combiner SIGKILLed with a long lease: a survivor claims the pool at once, not after the lease', async () => {
    const pool = 'killed-combiner-long-lease';
    // The victim's lease runs 120 s: the pool must get a new combiner long before.
    const { watcher, survivors } = await killTheCombiner(pool, 120_000);
    // `combinerOf` waits up to 20 s for the key to name a survivor.
    expect(await combinerOf(kv, pool, survivors)).toBeDefined();
    await churned(kv, pool, 30);
    for (const w of survivors) w.child.kill('SIGTERM');
    const results = await Promise.all(survivors.map(finishFixture));
    for (const result of results) expectCleanSurvivor(result);
    await new Promise((r) => setTimeout(r, 200));
    watcher.stop();
    expect(watcher.violations).toEqual([]);
    expect(watcher.maxRows).toBeLessThanOrEqual(3);
    const granted = results.flatMap((r) => r.grantedAgents as string[]);
    expect(granted.filter((agent) => !watcher.agents.has(agent))).toEqual([]);
  });

  it('a stale combiner (stalled past its lease) applies nothing late, and its own next call is told', async () => {
    const pool = 'stale-combiner';
    const leaseMs = 1000;
    const watcher = await watchRevisions(kv, pool, { maxCpu: 3 });
    const workers = churners(pool, 4, leaseMs);
    await Promise.all(workers.map((w) => w.waitFor('ready')));
    await churned(kv, pool, 30);
    const stale = await combinerOf(kv, pool, workers);
    stale.child.kill('SIGSTOP');
    const others = workers.filter((w) => w !== stale);
    // Its lease is fenced by a peer, which takes over; the run goes on meanwhile.
    await until(
      async () => (await combinerOf(kv, pool, others)) !== undefined,
      20_000,
      'a new combiner',
    );
    await churned(kv, pool, 30);
    // Back: everything queued to it while it stood still arrives now, and must be refused.
    stale.child.kill('SIGCONT');
    await churned(kv, pool, 30);
    for (const w of workers) w.child.kill('SIGTERM');
    const results = await Promise.all(workers.map(finishFixture));
    const staleResult = results[workers.indexOf(stale)]!;
    for (const [i, result] of results.entries()) {
      if (workers[i] === stale) continue;
      expectCleanSurvivor(result);
    }
    // The stalled one lost its lease: its first call after is told so, and nothing else fails.
    for (const error of staleResult.errors as Array<{ code?: string }>) {
      expect(error.code).toBe('ERR_LEDGER_LEASE_EXPIRED');
    }
    // Only the call the SIGSTOP caught in flight may miss its row: a grant whose
    // holder then stood still past its lease is reaped with that lease (by
    // design), before the worker's own check or release after SIGCONT.
    const lostAgents = new Set((staleResult.lost as string[]).map((a) => a.split(' ')[0]));
    expect(lostAgents.size).toBeLessThanOrEqual(1);
    await new Promise((r) => setTimeout(r, 300));
    watcher.stop();
    expect(watcher.violations).toEqual([]);
    const end = (await kv.get(`pool.${pool}`))!.json<{ reservations: unknown[] }>();
    expect(end.reservations).toEqual([]);
  });

  it('sends the answers of a batch in one socket write with its next KV write', async () => {
    // The combiner's own connection: every frame it sends is recorded as one socket write.
    const own = await connect({ servers: server.url });
    const chunks: string[] = [];
    const transport = (own as unknown as { protocol: { transport: { send(f: Uint8Array): void } } })
      .protocol.transport;
    const send = transport.send.bind(transport);
    transport.send = (frame: Uint8Array) => {
      chunks.push(new TextDecoder().decode(frame));
      send(frame);
    };
    const pool = 'one-write';
    const a = await NatsPoolLedger.connect({ nc: own, instanceId: 'ow-a' });
    const others = await Promise.all(
      ['ow-b', 'ow-c', 'ow-d'].map((instanceId) =>
        NatsPoolLedger.connect({ servers: server.url, instanceId }),
      ),
    );
    try {
      for (const l of [a, ...others]) l.registerPool(pool, { maxCpu: 4 });
      expect(await a.tryReserve(pool, 'ow-a-first', 1, 0)).toBe(true);
      await a.release(pool, 'ow-a-first');
      const before = chunks.length;
      // Every instance reserves and releases in a loop: while the combiner's write is
      // in flight, calls wait for the next one, and the answers of one batch meet the next write.
      await Promise.all(
        [a, ...others].map(async (l, n) => {
          for (let i = 0; i < 40; i++) {
            expect(await l.tryReserve(pool, `ow-${n}-${i}`, 1, 0)).toBe(true);
            expect(await l.release(pool, `ow-${n}-${i}`)).toBe(true);
          }
        }),
      );
      const sent = chunks.slice(before);
      const writes = sent.filter((c) => c.includes(`PUB $KV.scaler-pools.pool.${pool} `));
      const answers = sent.filter((c) => /(^|\r\n)PUB _INBOX\./.test(c));
      expect(writes.length).toBeGreaterThan(0);
      expect(answers.length).toBeGreaterThan(0);
      // Before: the answers left in a socket write of their own, before the next KV write.
      expect(
        answers.filter((c) => c.includes(`PUB $KV.scaler-pools.pool.${pool} `)).length,
      ).toBeGreaterThan(0);
      expect((await a.inspect(pool)).live).toEqual([]);
    } finally {
      await Promise.all([a, ...others].map((l) => l.close()));
      await own.close();
    }
  });

  it("watches the peers' heartbeats only once it judges rows: an instance that only sends its calls does not", async () => {
    const bucket = 'watch-on-judge';
    const pool = 'watched';
    const jsm = await jetstreamManager(nc);
    // The watch consumers on the bucket's heartbeat keys.
    const watchers = async () => {
      let n = 0;
      for await (const info of jsm.consumers.list(`KV_${bucket}`)) {
        if (info.config.filter_subject === `$KV.${bucket}.lease.>`) n++;
      }
      return n;
    };
    const [a, b, c] = await Promise.all(
      ['wj-a', 'wj-b', 'wj-c'].map((instanceId) =>
        NatsPoolLedger.connect({ servers: server.url, instanceId, bucket }),
      ),
    );
    try {
      for (const l of [a!, b!, c!]) l.registerPool(pool, { maxCpu: 3 });
      // None watches before it judges another instance's lease (each did from connect on
      // before): a claims the pool and writes its own row.
      expect(await a!.tryReserve(pool, 'wj-a-1', 1, 0)).toBe(true);
      expect(await watchers()).toBe(0);
      // b and c send their calls to a, the pool's combiner, which judges their leases;
      // they judge nothing.
      for (const [l, name] of [
        [b!, 'b'],
        [c!, 'c'],
      ] as const) {
        expect(await l.tryReserve(pool, `wj-${name}-1`, 1, 0)).toBe(true);
        expect(await l.release(pool, `wj-${name}-1`)).toBe(true);
      }
      expect(await watchers()).toBe(1);
      // A read judges the rows: b now watches too.
      expect((await b!.list(pool)).map((row) => row.agentId)).toEqual(['wj-a-1']);
      expect(await watchers()).toBe(2);
    } finally {
      await Promise.all([a!, b!, c!].map((l) => l.close()));
      await jsm.streams.delete(`KV_${bucket}`);
    }
  });

  it('a sender that becomes the combiner counts a lease closed before it watched as ended at once', async () => {
    const pool = 'closed-before-watch';
    const c = await NatsPoolLedger.connect({ servers: server.url, instanceId: 'cbw-c' });
    const b = await NatsPoolLedger.connect({ servers: server.url, instanceId: 'cbw-b' });
    try {
      c.registerPool(pool, { maxCpu: 3 });
      b.registerPool(pool, { maxCpu: 3 });
      // c combines the pool and holds 2 of 3 CPUs; b sends its calls to c (it has seen
      // c's lease fresh, to route them) and watches nothing.
      expect(await c.tryReserve(pool, 'cbw-c-1', 2, 0)).toBe(true);
      expect(await b.tryReserve(pool, 'cbw-b-1', 1, 0)).toBe(true);
      expect(await b.release(pool, 'cbw-b-1')).toBe(true);
      // c closes without releasing: its lease ends, its row is left behind.
      await c.close();
      // b combines the pool now; c's lease is ended, not fresh as b last saw it: its row goes.
      expect(await b.tryReserve(pool, 'cbw-b-2', 3, 0)).toBe(true);
      expect((await b.list(pool)).map((row) => row.agentId)).toEqual(['cbw-b-2']);
    } finally {
      await c.close();
      await b.close();
    }
  });

  it('a sender whose combiner redirects it reads the combiner lease again (ended while seen fresh)', async () => {
    const pool = 'redirected';
    // a notices its lease ended within half a second; b judges a's heartbeat by b's own
    // 30 s window, and its calls give up after 3 s: without a fresh read of a's lease after
    // the redirect, b would follow a's combiner key until its call's deadline.
    const a = await NatsPoolLedger.connect({
      servers: server.url,
      instanceId: 'rd-a',
      leaseMs: 1500,
    });
    const b = await NatsPoolLedger.connect({
      servers: server.url,
      instanceId: 'rd-b',
      timeoutMs: 3000,
    });
    try {
      a.registerPool(pool, { maxCpu: 2 });
      b.registerPool(pool, { maxCpu: 2 });
      expect(await a.tryReserve(pool, 'rd-a-1', 1, 0)).toBe(true);
      // b has seen a's lease fresh (routing its calls) and watches nothing.
      expect(await b.tryReserve(pool, 'rd-b-1', 1, 0)).toBe(true);
      expect(await b.release(pool, 'rd-b-1')).toBe(true);
      // An operator ends a's lease while its heartbeat is young; a takes a new lease and
      // stops combining, while its combiner key still names the ended one.
      const old = a.leaseId;
      await fenceLeaseKey(kv, old);
      await until(
        async () => {
          await a.getUsage(pool).catch(() => undefined);
          return a.leaseId !== old;
        },
        10_000,
        'a to take a new lease',
      );
      // b is redirected, reads a's lease (ended) and claims the pool: its call is answered.
      expect(await b.tryReserve(pool, 'rd-b-2', 1, 0)).toBe(true);
      const record = decodeCombinerRecord(
        (await kv.get(`leader.${pool}`))!.string(),
        'scaler-pools',
      )!;
      expect(record.leaseId).toBe(b.leaseId);
    } finally {
      await a.close();
      await b.close();
    }
  });

  it('refuses requests it must not apply: not combining, another cap, malformed, after its lease ended', async () => {
    const pool = 'refusals';
    const a = await NatsPoolLedger.connect({ nc, instanceId: 'a', leaseMs: 1000 });
    const b = await NatsPoolLedger.connect({ nc, instanceId: 'b', leaseMs: 1000 });
    try {
      a.registerPool(pool, { maxCpu: 2 });
      b.registerPool(pool, { maxCpu: 2 });
      expect(await a.tryReserve(pool, 'a-1', 1, 0)).toBe(true);
      const record = decodeCombinerRecord(
        (await kv.get(`leader.${pool}`))!.string(),
        'scaler-pools',
      )!;
      expect(record.leaseId).toBe(a.leaseId);
      const row = (agentId: string) => ({
        instanceId: 'x',
        pid: 1,
        bootId: 'b',
        agentId,
        cpus: 1,
        memBytes: 0,
        reservedAt: 1,
        leaseId: b.leaseId,
      });
      const ask = async (body: unknown, subject = record.subject) =>
        JSON.parse(
          new TextDecoder().decode(
            (await nc.request(subject, JSON.stringify(body), { timeout: 5000 })).data,
          ),
        ) as { kind: string; reason?: string; answers?: unknown[] };
      const reserve = (agentId: string) => ({ kind: 'reserve', row: row(agentId) });

      // Combined: a well-formed request is answered.
      expect(await ask({ v: 1, pool, cap: { maxCpu: 2 }, ops: [reserve('x-1')] })).toMatchObject({
        kind: 'answers',
        answers: [{ ok: true, value: { ok: true } }],
      });
      // Another cap: the sender must do it itself (and get its own cap error).
      expect(await ask({ v: 1, pool, cap: { maxCpu: 9 }, ops: [reserve('x-2')] })).toMatchObject({
        kind: 'direct',
      });
      // Malformed: an unknown key in a call, a bad row, an unknown kind, too many calls.
      for (const ops of [
        [{ kind: 'reserve', row: row('x-3'), extra: 1 }],
        [{ kind: 'reserve', row: { ...row('x-3'), cpus: -1 } }],
        [{ kind: 'reserve', row: { ...row('x-3'), leaseId: undefined } }],
        [{ kind: 'drop-table' }],
        Array.from({ length: 1001 }, () => ({ kind: 'reap' })),
      ]) {
        expect(await ask({ v: 1, pool, cap: { maxCpu: 2 }, ops })).toMatchObject({
          kind: 'direct',
          reason: expect.stringMatching(/malformed/),
        });
      }
      // b does not combine the pool: it redirects.
      b.registerPool('other', {});
      await b.reapStale('other');
      const bSubject = decodeCombinerRecord(
        (await kv.get('leader.other'))!.string(),
        'scaler-pools',
      )!;
      expect(
        await ask({ v: 1, pool, cap: { maxCpu: 2 }, ops: [reserve('x-4')] }, bSubject.subject),
      ).toMatchObject({ kind: 'redirect' });

      // a's lease ends (fenced, as a peer does when it judges it expired): a stops combining.
      await fenceLeaseKey(kv, a.leaseId);
      const revisionBefore = (await kv.get(`pool.${pool}`))!.revision;
      // Until a notices, its next commit attempt finds its lease refused by the server.
      const late = await ask({ v: 1, pool, cap: { maxCpu: 2 }, ops: [reserve('x-5')] });
      if (late.kind === 'answers') {
        // a had not yet missed a heartbeat: its lease was confirmed within half the window.
        expect(late.answers).toMatchObject([{ ok: true }]);
      } else {
        expect(['redirect', 'direct']).toContain(late.kind);
      }
      // Once a knows (its next heartbeat fails), it refuses: nothing is applied.
      await until(
        async () => {
          await a.getUsage(pool).catch(() => undefined);
          const reply = await ask({ v: 1, pool, cap: { maxCpu: 2 }, ops: [reserve('x-6')] });
          return reply.kind !== 'answers';
        },
        5000,
        'a to stop combining',
      );
      const rows = (await kv.get(`pool.${pool}`))!.json<{
        reservations: Array<{ agentId: string }>;
      }>();
      expect(rows.reservations.map((r) => r.agentId)).not.toContain('x-6');
      expect((await kv.get(`pool.${pool}`))!.revision).toBeGreaterThanOrEqual(revisionBefore);
      // b now combines the pool (a's lease ended) and its own calls work.
      expect(await b.tryReserve(pool, 'b-1', 0, 0)).toBe(true);
      const now = decodeCombinerRecord((await kv.get(`leader.${pool}`))!.string(), 'scaler-pools')!;
      expect(now.leaseId).toBe(b.leaseId);
    } finally {
      await a.close().catch(() => {});
      await b.close();
    }
  });
});

describe.runIf(ok)('NatsPoolLedger combiner, 3-node cluster', () => {
  const servers: NatsServer[] = [];
  const running: FixtureProcess[] = [];
  let admin: NatsConnection | undefined;

  beforeAll(async () => {
    servers.push(...(await startNatsCluster('combiner')));
  });
  afterAll(async () => {
    await Promise.all(running.splice(0).map((p) => stopFixture(p)));
    await admin?.close();
    await Promise.all(servers.map((s) => s.stop()));
  });

  it('a combiner SIGKILLed mid-run on R3: nothing over the cap, applied twice or lost', async () => {
    admin = await connect({ servers: servers.map((s) => s.url) });
    // The cluster may still be electing its JetStream meta leader: retry until it answers.
    const deadline = performance.now() + 30_000;
    for (;;) {
      try {
        const jsm = await jetstreamManager(admin);
        await jsm.streams.add(fullHistoryBucket('scaler-pools'));
        break;
      } catch (error) {
        if (performance.now() > deadline) throw error;
        await new Promise((r) => setTimeout(r, 200));
      }
    }
    const kv = await new Kvm(admin).open('scaler-pools');
    const pool = 'clustered-combiner';
    const cap = { maxCpu: 3 };
    const workers = Array.from({ length: 5 }, (_, i) =>
      natsWorker(running, {
        servers: servers.map((_, j) => servers[(i + j) % servers.length]!.url),
        instanceId: `c-${i}`,
        pool,
        cap,
        memBytes: 0,
        iterations: 0,
        leaseMs: 2000,
        timeoutMs: 30_000,
        reapEveryMs: 500,
      }),
    );
    await Promise.all(workers.map((w) => w.waitFor('ready')));
    await churned(kv, pool, 30);
    const victim = await combinerOf(kv, pool, workers);
    victim.child.kill('SIGKILL');
    const survivors = workers.filter((w) => w !== victim);
    await churned(kv, pool, 30);
    for (const w of survivors) w.child.kill('SIGTERM');
    const results = await Promise.all(survivors.map(finishFixture));
    for (const result of results) expectCleanSurvivor(result);

    const report = {
      revisions: [] as number[],
      violations: [] as string[],
      maxRows: 0,
      agents: new Set<string>(),
      last: undefined,
    };
    const check = revisionChecker(pool, cap, report);
    for await (const entry of await kv.history({ key: `pool.${pool}` })) check(entry);
    expect(report.violations).toEqual([]);
    expect(report.maxRows).toBeLessThanOrEqual(3);
    const granted = results.flatMap((r) => r.grantedAgents as string[]);
    expect(granted.filter((agent) => !report.agents.has(agent))).toEqual([]);
    const stored = new Set(report.revisions);
    const committed = results.flatMap((r) => r.commits as number[]);
    expect(committed.filter((rev) => !stored.has(rev))).toEqual([]);
  });
});
