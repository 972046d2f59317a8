/**
 * NatsPoolLedger leases against a real nats-server on loopback, with clients cut
 * off by a TCP proxy in front of the server: no grant under a fenced lease
 * (sender and combiner), a write guard whose write the server no longer holds
 * does not block the key, lease events and health, no fencing of peers from an
 * instance's own outage, and the server version check.
 */
import { jetstream } from '@nats-io/jetstream';
import { type KV, Kvm } from '@nats-io/kv';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { isLedgerLeaseExpiredError, isLedgerUnavailableError } from '../../src/errors/ledger.js';
import { CasWriter, isRevisionConflict } from '../../src/ledger/nats/cas.js';
import { decodeCombinerRecord } from '../../src/ledger/nats/combine-wire.js';
import { NatsPoolLedger } from '../../src/ledger/nats/nats-pool-ledger.js';
import { withNatsLedgerHooks } from '../../src/ledger/nats/options.js';
import type { LeaseEvent } from '../../src/ledger/types.js';
import { fenceLeaseKey } from '../helpers/nats-ledger.js';
import { type NatsServer, startNatsServer } from '../helpers/nats-server.js';
import { MetricsHarness, pointValue } from '../helpers/otel.js';
import { hasSystem } from '../helpers/system.js';
import { startTcpProxy, type TcpProxy } from '../helpers/tcp-proxy.js';

const ok = hasSystem(['nats-server'], 'NatsPoolLedger leases against nats-server');
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function until(what: string, check: () => boolean | Promise<boolean>, ms = 10_000) {
  const end = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(20);
  }
}

describe.runIf(ok)('NatsPoolLedger leases', () => {
  let server: NatsServer;
  let nc: NatsConnection;
  let kv: KV;
  const open: NatsPoolLedger[] = [];
  const proxies: TcpProxy[] = [];
  let serial = 0;
  const poolName = () => `lease-p${serial++}`;

  // Version warnings are emitted once per process: collect them from the start.
  const warnings: Error[] = [];
  const onWarning = (w: Error) => warnings.push(w);

  beforeAll(async () => {
    process.on('warning', onWarning);
    server = await startNatsServer();
    nc = await connect({ servers: server.url });
    kv = await new Kvm(nc).create('scaler-pools', { history: 1, allow_direct: false });
  });
  afterEach(async () => {
    for (const p of proxies) p.heal();
    await Promise.all(open.splice(0).map((l) => l.close().catch(() => {})));
    await Promise.all(proxies.splice(0).map((p) => p.close()));
  });
  afterAll(async () => {
    process.off('warning', onWarning);
    await nc?.close();
    await server?.stop();
  });

  async function ledger(
    instanceId: string,
    extra: { leaseMs?: number; timeoutMs?: number; viaProxy?: TcpProxy } = {},
  ) {
    const { viaProxy, ...rest } = extra;
    const l = await NatsPoolLedger.connect(
      withNatsLedgerHooks(
        { servers: viaProxy?.url ?? server.url, instanceId, ...rest },
        { onForward: () => forwarded.push(instanceId) },
      ),
    );
    open.push(l);
    return l;
  }
  const forwarded: string[] = [];
  async function proxy() {
    const p = await startTcpProxy(server.port);
    proxies.push(p);
    return p;
  }
  const rows = async (pool: string) =>
    (
      (await kv.get(`pool.${pool}`))?.json<{ reservations: Array<{ agentId: string }> }>()
        .reservations ?? []
    ).map((r) => r.agentId);

  it('a write guard whose write the server does not hold blocks the key for seconds, not the duplicate window', async () => {
    const pool = poolName();
    const a = await ledger('a', { timeoutMs: 8000 });
    a.registerPool(pool, { maxCpu: 4 });
    expect(await a.reserve(pool, 'a-1', 1, 0)).toEqual({ ok: true });
    const base = (await kv.get(`pool.${pool}`))!.revision;
    // A message holding the guard id of the next write from `base`, but not on the
    // pool key: what the server's dedupe table holds after it lost that write.
    const js = jetstream(nc);
    await js.publish('$KV.scaler-pools.orphan', 'x', { msgID: `pool.${pool}@${base}` });
    const started = performance.now();
    expect(await a.reserve(pool, 'a-2', 1, 0)).toEqual({ ok: true });
    expect(performance.now() - started).toBeLessThan(3000);
    expect(await rows(pool)).toEqual(['a-1', 'a-2']);

    // Writers that meet the same orphan pick the same new guard: one of them wins.
    const key = 'orphan-race';
    const first = await kv.put(key, 'base');
    await js.publish('$KV.scaler-pools.orphan2', 'x', { msgID: `${key}@${first}` });
    const lastRevision = async (k: string) => (await kv.get(k))?.revision ?? 0;
    const writers = Array.from(
      { length: 6 },
      () => new CasWriter(js, 'scaler-pools', lastRevision),
    );
    const round1 = await Promise.allSettled(writers.map((w, i) => w.write(key, `w${i}`, first)));
    expect(round1.every((r) => r.status === 'rejected' && isRevisionConflict(r.reason))).toBe(true);
    const round2 = await Promise.allSettled(writers.map((w, i) => w.write(key, `w${i}`, first)));
    const won = round2.filter((r) => r.status === 'fulfilled');
    expect(won).toHaveLength(1);
    expect((await kv.get(key))!.revision).toBe((won[0] as PromiseFulfilledResult<number>).value);
  });

  it('the combiner refuses a forwarded row whose sender lease has ended', async () => {
    const pool = poolName();
    const a = await ledger('a', { leaseMs: 3000 });
    const b = await ledger('b', { leaseMs: 3000 });
    a.registerPool(pool, { maxCpu: 4 });
    b.registerPool(pool, { maxCpu: 4 });
    expect(await a.reserve(pool, 'a-1', 1, 0)).toEqual({ ok: true });
    const record = decodeCombinerRecord(
      (await kv.get(`leader.${pool}`))!.string(),
      'scaler-pools',
    )!;
    expect(record.leaseId).toBe(a.leaseId);
    const row = (agentId: string, leaseId: string) => ({
      instanceId: 'b',
      pid: 1,
      bootId: 'x',
      agentId,
      cpus: 1,
      memBytes: 0,
      reservedAt: 1,
      leaseId,
    });
    const ask = async (ops: unknown[]) =>
      JSON.parse(
        new TextDecoder().decode(
          (
            await nc.request(
              record.subject,
              JSON.stringify({ v: 1, pool, cap: { maxCpu: 4 }, ops }),
              {
                timeout: 5000,
              },
            )
          ).data,
        ),
      ) as { kind: string; reason?: string };
    // b's lease is live: its row is applied.
    expect(await ask([{ kind: 'reserve', row: row('b-1', b.leaseId) }])).toMatchObject({
      kind: 'answers',
    });
    // b's lease fenced (as a peer does): a row sent under it is refused, nothing written.
    const fenced = b.leaseId;
    await fenceLeaseKey(kv, fenced);
    // The combiner learns of the fence from its watch on the heartbeat keys,
    // which may deliver it after a request sent right away (a real fence
    // follows an expiry, which the combiner judges without the watch). Wait
    // until it knows: its reap removes b-1, a row under the ended lease.
    await until('the combiner to judge the fenced lease ended', async () => {
      await a.reapStale(pool);
      return !(await rows(pool)).includes('b-1');
    });
    expect(await ask([{ kind: 'reserve', row: row('b-2', fenced) }])).toMatchObject({
      kind: 'direct',
      reason: expect.stringMatching(/sender's lease has ended/),
    });
    expect(await rows(pool)).not.toContain('b-2');
  });

  it('a sender cut off past its lease gets LedgerLeaseExpiredError, never a grant under the fenced lease', async () => {
    const pool = poolName();
    const p = await proxy();
    const a = await ledger('a', { leaseMs: 1500, timeoutMs: 8000 });
    const b = await ledger('b', { leaseMs: 1500, timeoutMs: 8000, viaProxy: p });
    a.registerPool(pool, { maxCpu: 4 });
    b.registerPool(pool, { maxCpu: 4 });
    a.start(200);
    expect(await a.reserve(pool, 'a-1', 1, 0)).toEqual({ ok: true });
    expect(await b.reserve(pool, 'b-1', 1, 0)).toEqual({ ok: true });
    const old = b.leaseId;
    const events: LeaseEvent[] = [];
    b.onLeaseEvent((e) => events.push(e));
    p.cut();
    // a (healthy) fences b after its lease plus the margin.
    await until('b fenced', async () => {
      const e = await kv.get(`lease.${old}`);
      return e?.string().includes('fenced') === true;
    });
    await until('b-1 reaped', async () => !(await rows(pool)).includes('b-1'));
    // b, still cut off, tries to reserve; the network comes back a second later.
    forwarded.length = 0;
    const call = b.reserve(pool, 'b-2', 1, 0).then(
      (r) => r,
      (e: unknown) => e,
    );
    await sleep(1000);
    p.heal();
    const answer = await call;
    expect(isLedgerLeaseExpiredError(answer), String(answer)).toBe(true);
    expect(forwarded).toEqual([]);
    expect(await rows(pool)).not.toContain('b-2');
    expect(events.map((e) => e.type)).toContain('lease-lost');
    const lost = events.find((e) => e.type === 'lease-lost')!;
    expect(lost.lease.leaseId).toBe(old);
    await until('b renewed', () => events.some((e) => e.type === 'lease-renewed'));
    const renewed = events.find((e) => e.type === 'lease-renewed')!;
    expect(renewed.lease.leaseId).not.toBe(old);
    expect(renewed.lease.leaseId).toBe(b.leaseId);
    // The next call works under the new lease.
    expect(await b.reserve(pool, 'b-3', 1, 0)).toEqual({ ok: true });
    a.stop();
  });

  it('lease() and events follow the timeline: held, at-risk at 2/3, lost at the deadline, renewed after', async () => {
    const p = await proxy();
    const leaseMs = 1500;
    const b = await ledger('b', { leaseMs, viaProxy: p });
    const info = b.lease();
    expect(info).toMatchObject({
      health: 'held',
      leaseId: b.leaseId,
      leaseMs,
      marginMs: 750,
      location: { kind: 'nats', bucket: 'scaler-pools', key: `lease.${b.leaseId}` },
    });
    expect(info.deadline).toBe(info.confirmedAt! + leaseMs);
    expect(info.confirmedAt!).toBeLessThanOrEqual(Date.now());
    const events: Array<{ type: string; at: number; lease: LeaseEvent['lease'] }> = [];
    const off = b.onLeaseEvent((e) =>
      events.push({ type: e.type, at: Date.now(), lease: e.lease }),
    );
    b.onLeaseEvent(() => {
      throw new Error('a listener that throws is ignored');
    });
    p.cut();
    const cutAt = Date.now();
    await until('lease-lost', () => events.some((e) => e.type === 'lease-lost'), 5000);
    const [risk, lost] = events;
    expect(risk!.type).toBe('lease-at-risk');
    expect(lost!.type).toBe('lease-lost');
    // At the instants the timeline names, from the last confirmation (not from a call).
    const confirmedAt = lost!.lease.confirmedAt!;
    expect(risk!.at).toBeGreaterThanOrEqual(confirmedAt + (2 * leaseMs) / 3);
    expect(risk!.at).toBeLessThan(confirmedAt + (2 * leaseMs) / 3 + 400);
    expect(lost!.at).toBeGreaterThanOrEqual(confirmedAt + leaseMs);
    expect(lost!.at).toBeLessThan(confirmedAt + leaseMs + 400);
    expect(confirmedAt).toBeLessThanOrEqual(cutAt);
    expect(b.lease().health).toBe('lost');
    p.heal();
    await until('lease-renewed', () => events.some((e) => e.type === 'lease-renewed'), 8000);
    expect(events.map((e) => e.type)).toEqual(['lease-at-risk', 'lease-lost', 'lease-renewed']);
    // Not fenced (nobody judged it): the same lease goes on.
    expect(events[2]!.lease.leaseId).toBe(info.leaseId);
    expect(b.lease().health).toBe('held');
    off();
    expect(() => b.onLeaseEvent('nope' as never)).toThrow(TypeError);
  });

  it('counts each lease event in scaler.ledger.lease.events', async () => {
    const p = await proxy();
    const metrics = new MetricsHarness();
    try {
      const b = await NatsPoolLedger.connect({
        servers: p.url,
        instanceId: 'otel',
        leaseMs: 900,
        meterProvider: metrics.provider,
      });
      open.push(b);
      const seen: string[] = [];
      b.onLeaseEvent((e) => seen.push(e.type));
      p.cut();
      await until('lease-lost', () => seen.includes('lease-lost'), 5000);
      p.heal();
      await until('lease-renewed', () => seen.includes('lease-renewed'), 8000);
      const m = await metrics.collect();
      const count = (type: string) =>
        pointValue(m, 'scaler.ledger.lease.events', {
          'scaler.ledger.backend': 'nats',
          'scaler.lease.event': type,
        });
      expect([count('lease-at-risk'), count('lease-lost'), count('lease-renewed')]).toEqual([
        1, 1, 1,
      ]);
    } finally {
      await metrics.shutdown();
    }
  });

  it('an instance back from its own outage does not fence a peer that could not renew either', async () => {
    const pool = poolName();
    const pa = await proxy();
    const pb = await proxy();
    const leaseMs = 1500; // margin 750: b must be healthy for 2250 ms before it may fence
    const a = await ledger('a', { leaseMs, viaProxy: pa });
    const b = await ledger('b', { leaseMs, viaProxy: pb, timeoutMs: 8000 });
    a.registerPool(pool, { maxCpu: 4 });
    b.registerPool(pool, { maxCpu: 4 });
    expect(await a.reserve(pool, 'a-1', 1, 0)).toEqual({ ok: true });
    const aLease = a.leaseId;
    // Both cut off from the server for twice the lease.
    pa.cut();
    pb.cut();
    await sleep(2 * leaseMs);
    // b comes back first; a's heartbeat is older than its lease, but b has itself
    // just come back: it keeps a's rows.
    pb.heal();
    const healedAt = performance.now();
    while (performance.now() - healedAt < 1800) {
      await b.reapStale(pool).catch(() => 0);
      expect(await rows(pool)).toContain('a-1');
      await sleep(100);
    }
    expect((await kv.get(`lease.${aLease}`))!.string()).not.toContain('ended');
    // a stays cut off: once b has been healthy for the lease plus the margin, it fences a.
    await until(
      'b fences a',
      async () => {
        await b.reapStale(pool).catch(() => 0);
        return !(await rows(pool)).includes('a-1');
      },
      6000,
    );
    expect(performance.now() - healedAt).toBeGreaterThan(leaseMs + 750);
    pa.heal();
    const error = await a.reserve(pool, 'a-2', 1, 0).catch((e: unknown) => e);
    expect(isLedgerLeaseExpiredError(error), String(error)).toBe(true);
  });

  it('a call while the lease cannot be confirmed writes nothing and says so', async () => {
    const pool = poolName();
    const p = await proxy();
    const b = await ledger('b', { leaseMs: 6000, timeoutMs: 1500, viaProxy: p });
    b.registerPool(pool, { maxCpu: 4 });
    expect(await b.reserve(pool, 'b-1', 1, 0)).toEqual({ ok: true });
    p.cut();
    await sleep(2100); // past a third of the lease: a write needs a fresh confirmation
    const error = await b.reserve(pool, 'b-2', 1, 0).catch((e: unknown) => e);
    expect(isLedgerUnavailableError(error), String(error)).toBe(true);
    expect((error as Error).message).toMatch(/nothing was written/i);
    p.heal();
    await until(
      'b works again',
      async () => (await b.reserve(pool, 'b-3', 1, 0).catch(() => null))?.ok === true,
    );
    expect(await rows(pool)).toEqual(['b-1', 'b-3']);
  });

  it('says so when the server holds a pool key below a revision it acknowledged', async () => {
    const bucket = 'lost-writes';
    const l = await NatsPoolLedger.connect({ servers: server.url, instanceId: 'lw', bucket });
    open.push(l);
    l.registerPool('p', { maxCpu: 4 });
    for (let i = 0; i < 3; i++) expect(await l.reserve('p', `a-${i}`, 1, 0)).toEqual({ ok: true });
    // The server loses everything it acknowledged: the stream is gone and made again,
    // the pool key back at revision 1 without the grants.
    const jsm = await jetstream(nc).jetstreamManager();
    await jsm.streams.delete(`KV_${bucket}`);
    const again = await new Kvm(nc).create(bucket, { history: 1, allow_direct: false });
    await again.put('pool.p', JSON.stringify({ version: 1, cap: { maxCpu: 4 }, reservations: [] }));
    const before = warnings.length;
    // Its lease key went too: the first call says the lease was lost, the next one reads.
    await l.inspect('p').catch((e: unknown) => expect(isLedgerLeaseExpiredError(e)).toBe(true));
    expect((await l.inspect('p')).live).toEqual([]);
    await sleep(10);
    const lost = warnings
      .slice(before)
      .filter((w) => (w as { code?: string }).code === 'SCALER_NATS_WRITE_LOST');
    expect(lost).toHaveLength(1);
    expect(lost[0]!.message).toMatch(
      /acknowledged revision \d+ of pool\.p .* now holds revision 1/,
    );
  });

  it('does not warn about a single server of any version, nor refuse it', async () => {
    // Older servers lose writes in leader changes: one server has none (docs/ledger.md).
    const l = await ledger('v');
    await sleep(10);
    const ours = warnings.filter(
      (w) => (w as { code?: string }).code === 'SCALER_NATS_SERVER_VERSION',
    );
    expect(ours).toEqual([]);
    const refusing = await NatsPoolLedger.connect({
      servers: server.url,
      instanceId: 'v2',
      serverVersionPolicy: 'refuse',
    });
    await refusing.close();
    expect(l.lease().health).toBe('held');
  });
});
