/**
 * Device ids on NatsPoolLedger against a real nats-server: two or more
 * instances share one pool whose cap lists 4 GPU ids, with and without the
 * cross-process combiner. Grants carry the lowest free ids, the stored rows
 * hold them, adoption keeps or claims them, release and reap free them, and a
 * write (or a forwarded call) whose answer was lost is answered with the ids
 * its row holds. With device ids the ledger needs no NATS subject beyond the
 * least-privilege set of docs/security.md.
 */
import { type KV, Kvm } from '@nats-io/kv';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { NatsPoolLedger } from '../../src/ledger/nats/nats-pool-ledger.js';
import { withNatsLedgerHooks } from '../../src/ledger/nats/options.js';
import type { ReservationRow } from '../../src/ledger/types.js';
import { type NatsServer, startNatsServer } from '../helpers/nats-server.js';
import { hasSystem } from '../helpers/system.js';
import { type AckDropProxy, startAckDropProxy } from './ack-drop-proxy.js';

const ok = hasSystem(['nats-server'], 'NatsPoolLedger device ids against nats-server');

const GPU = 'nvidia.com/gpu';
const cap = { maxCpu: 16, devices: { [GPU]: ['0', '1', '2', '3'] } };
const gpus = (n: number) => ({ extended: { [GPU]: n } });

describe.runIf(ok)('NatsPoolLedger device ids', () => {
  let server: NatsServer;
  let nc: NatsConnection;
  let kv: KV;
  const open: NatsPoolLedger[] = [];
  const conns: NatsConnection[] = [];
  const proxies: AckDropProxy[] = [];
  let serial = 0;

  beforeAll(async () => {
    server = await startNatsServer();
    nc = await connect({ servers: server.url });
    kv = await new Kvm(nc).create('scaler-pools');
  });
  afterEach(async () => {
    await Promise.all(open.splice(0).map((l) => l.close().catch(() => {})));
    await Promise.all(conns.splice(0).map((c) => c.close().catch(() => {})));
    await Promise.all(proxies.splice(0).map((p) => p.close()));
  });
  afterAll(async () => {
    await nc?.close();
    await server?.stop();
  });

  /** A ledger whose own commits and forwarded calls are recorded. */
  async function ledger(
    instanceId: string,
    options: { combine?: boolean; leaseMs?: number; nc?: NatsConnection; bootId?: string } = {},
  ) {
    const commits: number[] = [];
    const forwards: string[] = [];
    const l = await NatsPoolLedger.connect(
      withNatsLedgerHooks(
        {
          ...(options.nc ? { nc: options.nc } : { servers: server.url }),
          instanceId,
          timeoutMs: 15_000,
          ...(options.combine === undefined ? {} : { combine: options.combine }),
          ...(options.leaseMs === undefined ? {} : { leaseMs: options.leaseMs }),
          ...(options.bootId === undefined ? {} : { bootId: options.bootId }),
        },
        {
          afterCommit: (_pool, revision) => commits.push(revision),
          onForward: (pool) => forwards.push(pool),
        },
      ),
    );
    open.push(l);
    return { l, commits, forwards };
  }
  const rows = async (pool: string) =>
    ((await kv.get(`pool.${pool}`))?.json<{ reservations: ReservationRow[] }>().reservations ??
      []) as ReservationRow[];
  const idsOf = async (pool: string) =>
    Object.fromEntries((await rows(pool)).map((r) => [r.agentId, r.devices?.[GPU]]));

  it.each([
    ['combining', true],
    ['not combining', false],
  ])(
    '%s: grants carry the lowest free ids, stored in the row; release frees them',
    async (_label, combine) => {
      const pool = `grants-${serial++}`;
      const a = await ledger('a', { combine });
      const b = await ledger('b', { combine });
      for (const { l } of [a, b]) l.registerPool(pool, cap);

      expect(await a.l.reserve(pool, 'a-1', 1, 0, gpus(1))).toEqual({
        ok: true,
        devices: { [GPU]: ['0'] },
      });
      expect(await b.l.reserve(pool, 'b-1', 1, 0, gpus(2))).toEqual({
        ok: true,
        devices: { [GPU]: ['1', '2'] },
      });
      // A grant of no GPU has no ids; a grant of CPU alone neither.
      expect(await b.l.reserve(pool, 'b-0', 1, 0)).toEqual({ ok: true });
      expect(await a.l.reserve(pool, 'a-2', 1, 0, gpus(2))).toMatchObject({
        ok: false,
        dimension: GPU,
        requested: 2,
        used: 3,
        max: 4,
      });
      expect(await idsOf(pool)).toEqual({ 'a-1': ['0'], 'b-1': ['1', '2'], 'b-0': undefined });
      // Each instance lists the same ids.
      for (const { l } of [a, b]) {
        const listed = Object.fromEntries((await l.list(pool)).map((r) => [r.agentId, r.devices]));
        expect(listed).toEqual({
          'a-1': { [GPU]: ['0'] },
          'b-1': { [GPU]: ['1', '2'] },
          'b-0': undefined,
        });
      }

      expect(await b.l.release(pool, 'b-1')).toBe(true);
      expect(await a.l.reserve(pool, 'a-2', 1, 0, gpus(3))).toEqual({
        ok: true,
        devices: { [GPU]: ['1', '2', '3'] },
      });
      expect(await a.l.release(pool, 'a-1')).toBe(true);
      expect(await b.l.reserve(pool, 'b-2', 1, 0, gpus(1))).toEqual({
        ok: true,
        devices: { [GPU]: ['0'] },
      });
      expect(await idsOf(pool)).toEqual({ 'b-0': undefined, 'a-2': ['1', '2', '3'], 'b-2': ['0'] });

      if (combine) {
        // a claimed the pool's combiner with its first write: b's calls went to it
        // (answered over the wire: b wrote nothing itself).
        expect(b.forwards.length).toBeGreaterThan(0);
        expect(b.commits).toEqual([]);
      } else {
        expect(a.forwards).toEqual([]);
        expect(b.forwards).toEqual([]);
        expect(b.commits.length).toBeGreaterThan(0);
      }
    },
  );

  it.each([
    ['combining', true],
    ['not combining', false],
  ])('%s: concurrent grants from three instances never share an id', async (_label, combine) => {
    const pool = `concurrent-${serial++}`;
    const ledgers = await Promise.all(['x', 'y', 'z'].map((id) => ledger(id, { combine })));
    for (const { l } of ledgers) l.registerPool(pool, cap);
    const answers = await Promise.all(
      ledgers.flatMap(({ l }, i) =>
        [0, 1, 2].map((j) => l.reserve(pool, `${i}-${j}`, 0, 0, gpus(1))),
      ),
    );
    const granted = answers.filter((r) => r.ok);
    expect(granted).toHaveLength(4);
    expect(answers.filter((r) => !r.ok)).toHaveLength(5);
    const ids = granted.flatMap((r) => (r.ok ? (r.devices?.[GPU] ?? []) : []));
    expect(ids.sort()).toEqual(['0', '1', '2', '3']);
    const stored = Object.values(await idsOf(pool)).flat();
    expect(stored.sort()).toEqual(['0', '1', '2', '3']);
  });

  it.each([
    ['combining', true],
    ['not combining', false],
  ])(
    '%s: adoption after a restart keeps the ids, or claims those given',
    async (_label, combine) => {
      const pool = `adopt-${serial++}`;
      const a = await ledger('a', { combine });
      a.l.registerPool(pool, cap);
      // b's first process holds two agents.
      const b1 = await ledger('b', { combine });
      b1.l.registerPool(pool, cap);
      expect(await a.l.reserve(pool, 'a-1', 0, 0, gpus(1))).toMatchObject({ ok: true });
      expect(await b1.l.reserve(pool, 'b-1', 0, 0, gpus(1))).toEqual({
        ok: true,
        devices: { [GPU]: ['1'] },
      });
      expect(await b1.l.reserve(pool, 'b-2', 0, 0, gpus(2))).toEqual({
        ok: true,
        devices: { [GPU]: ['2', '3'] },
      });
      // b restarts: a new process of instance b adopts its agents. (b1 still runs
      // in this test process, so b2 says it is on another host: a live process
      // on this host is refused; b2 continues b1's lease and fences b1.)
      // b-1 says which ids it uses; b-2 does not (its row keeps its own).
      const b2 = await ledger('b', { combine, bootId: 'another-host' });
      b2.l.registerPool(pool, cap);
      expect(
        await b2.l.adopt(pool, [
          { agentId: 'b-1', cpus: 0, memBytes: 0, ...gpus(1), devices: { [GPU]: ['1'] } },
          { agentId: 'b-2', cpus: 0, memBytes: 0, ...gpus(2) },
        ]),
      ).toEqual([
        { ok: true, adopted: true, devices: { [GPU]: ['1'] } },
        { ok: true, adopted: true, devices: { [GPU]: ['2', '3'] } },
      ]);
      const stored = (await rows(pool)).filter((r) => r.instanceId === 'b');
      expect(stored.map((r) => [r.agentId, r.leaseId, r.devices])).toEqual([
        ['b-1', b2.l.leaseId, { [GPU]: ['1'] }],
        ['b-2', b2.l.leaseId, { [GPU]: ['2', '3'] }],
      ]);

      // Rows gone (released meanwhile): adoption reserves again, claiming the ids
      // the agent uses when they are free, refusing when another row holds them,
      // or taking the lowest free ids when it names none.
      expect(await b2.l.release(pool, 'b-1')).toBe(true);
      expect(await b2.l.release(pool, 'b-2')).toBe(true);
      expect(
        await b2.l.adopt(pool, [
          { agentId: 'b-2', cpus: 0, memBytes: 0, ...gpus(1), devices: { [GPU]: ['3'] } },
          { agentId: 'b-3', cpus: 0, memBytes: 0, ...gpus(1), devices: { [GPU]: ['0'] } },
          { agentId: 'b-4', cpus: 0, memBytes: 0, ...gpus(1) },
        ]),
      ).toEqual([
        { ok: true, adopted: false, devices: { [GPU]: ['3'] } },
        { ok: false, pool, dimension: GPU, requested: 1, used: 2, max: 4, neverFits: false },
        { ok: true, adopted: false, devices: { [GPU]: ['1'] } },
      ]);
      expect(await idsOf(pool)).toEqual({ 'a-1': ['0'], 'b-2': ['3'], 'b-4': ['1'] });
      if (combine) {
        expect(b2.forwards.length).toBeGreaterThan(0);
        expect(b2.commits).toEqual([]);
      }
    },
  );

  it.each([
    ['combining', true],
    ['not combining', false],
  ])(
    '%s: the rows of an ended lease are reaped and their ids given out again',
    async (_label, combine) => {
      const pool = `reap-${serial++}`;
      const a = await ledger('a', { combine });
      const c = await ledger('c', { combine });
      for (const { l } of [a, c]) l.registerPool(pool, cap);
      expect(await a.l.reserve(pool, 'a-1', 0, 0, gpus(1))).toMatchObject({ ok: true });
      expect(await c.l.reserve(pool, 'c-1', 0, 0, gpus(3))).toEqual({
        ok: true,
        devices: { [GPU]: ['1', '2', '3'] },
      });
      expect(await a.l.reserve(pool, 'a-2', 0, 0, gpus(1))).toMatchObject({ ok: false });
      // c goes away without releasing: closing ends its lease, its rows stay behind.
      await c.l.close();
      expect(await idsOf(pool)).toEqual({ 'a-1': ['0'], 'c-1': ['1', '2', '3'] });
      expect(await a.l.reapStale(pool)).toBe(1);
      expect(await idsOf(pool)).toEqual({ 'a-1': ['0'] });
      expect(await a.l.reserve(pool, 'a-2', 0, 0, gpus(3))).toEqual({
        ok: true,
        devices: { [GPU]: ['1', '2', '3'] },
      });
      // releaseAllForInstance frees every id of the instance.
      await a.l.releaseAllForInstance();
      expect(await rows(pool)).toEqual([]);
      const d = await ledger('d', { combine });
      d.l.registerPool(pool, cap);
      expect(await d.l.reserve(pool, 'd-1', 0, 0, gpus(4))).toEqual({
        ok: true,
        devices: { [GPU]: ['0', '1', '2', '3'] },
      });
    },
  );

  it('a compare-and-set write whose acknowledgement was lost is answered with its row ids', async () => {
    const pool = `lost-ack-${serial++}`;
    const a = await ledger('a', { combine: false });
    a.l.registerPool(pool, cap);
    expect(await a.l.reserve(pool, 'a-1', 0, 0, gpus(1))).toMatchObject({ ok: true });
    const proxy = await startAckDropProxy(server.port);
    proxies.push(proxy);
    const viaProxy = await connect({ servers: proxy.url, reconnectTimeWait: 50 });
    conns.push(viaProxy);
    const b = await ledger('b', { combine: false, nc: viaProxy });
    b.l.registerPool(pool, cap);
    // The next write of the pool key reaches the server, its answer does not.
    // When the connection is reset, the write has landed (its answer is what was lost).
    const dropped = proxy
      .dropAfter(`$KV.scaler-pools.pool.${pool} `)
      .then(async (hit) => hit && Object.keys(await idsOf(pool)));
    const answer = await b.l.reserve(pool, 'b-1', 0, 0, gpus(2));
    expect(await dropped).toEqual(['a-1', 'b-1']);
    expect(answer).toEqual({ ok: true, devices: { [GPU]: ['1', '2'] } });
    // One row, written once: the retry found it and answered its ids.
    expect(await idsOf(pool)).toEqual({ 'a-1': ['0'], 'b-1': ['1', '2'] });
    expect(b.commits).toEqual([]);
  });

  it("a forwarded call whose combiner's answer was lost is answered with its row ids", async () => {
    const pool = `lost-reply-${serial++}`;
    const a = await ledger('a');
    a.l.registerPool(pool, cap);
    // a combines the pool (its first write claimed it).
    expect(await a.l.reserve(pool, 'a-1', 0, 0, gpus(1))).toMatchObject({ ok: true });
    const proxy = await startAckDropProxy(server.port);
    proxies.push(proxy);
    const viaProxy = await connect({ servers: proxy.url, reconnectTimeWait: 50 });
    conns.push(viaProxy);
    const b = await ledger('b', { nc: viaProxy });
    b.l.registerPool(pool, cap);
    // b's request reaches a, which applies it; a's reply never reaches b.
    // When b's connection is reset, a has written b's row (its reply is what was lost).
    const before = a.commits.length;
    const dropped = proxy
      .dropAfter('_SCALER_LEDGER.scaler-pools.')
      .then((hit) => hit && a.commits.length - before);
    const answer = await b.l.reserve(pool, 'b-1', 0, 0, gpus(2));
    expect(await dropped).toBe(1);
    // b sent the call again to a, which found the row and answered its ids, writing nothing.
    expect(a.commits.length - before).toBe(1);
    expect(answer).toEqual({ ok: true, devices: { [GPU]: ['1', '2'] } });
    expect(await idsOf(pool)).toEqual({ 'a-1': ['0'], 'b-1': ['1', '2'] });
    expect(b.forwards.length).toBeGreaterThanOrEqual(2);
    expect(b.commits).toEqual([]);
  });

  it('refuses a registered cap whose device ids differ from the stored pool', async () => {
    const pool = `mismatch-${serial++}`;
    const a = await ledger('a');
    a.l.registerPool(pool, cap);
    expect(await a.l.reserve(pool, 'a-1', 0, 0, gpus(1))).toMatchObject({ ok: true });
    const b = await ledger('b');
    b.l.registerPool(pool, { maxCpu: 16, devices: { [GPU]: ['0', '1', '2', '9'] } });
    await expect(b.l.reserve(pool, 'b-1', 0, 0, gpus(1))).rejects.toMatchObject({
      code: 'ERR_LEDGER_CAP_MISMATCH',
    });
    expect(await idsOf(pool)).toEqual({ 'a-1': ['0'] });
  });
});

// The least-privilege set docs/security.md lists for the pool ledger (bucket `scaler-pools`),
// as test/integration/ledger-nats-permissions.test.ts grants it: device ids need nothing more.
const LEDGER_SUBJECTS = [
  '$JS.API.INFO',
  '$JS.API.STREAM.INFO.KV_scaler-pools',
  '$JS.API.STREAM.MSG.GET.KV_scaler-pools',
  '$JS.API.CONSUMER.CREATE.KV_scaler-pools.>',
  '$KV.scaler-pools.>',
  '_SCALER_LEDGER.scaler-pools.*',
];
const quoted = (subjects: string[]) => subjects.map((s) => JSON.stringify(s)).join(', ');
const restricted = `accounts { A { jetstream: enabled, users: [
  { user: admin, password: pw },
  { user: ledger, password: pw, permissions: {
      publish: { allow: [${quoted(LEDGER_SUBJECTS)}] },
      subscribe: { allow: [${quoted(['_INBOX.>', '_SCALER_LEDGER.scaler-pools.*'])}] },
      allow_responses: true } }
] } }`;

describe.runIf(ok)('NatsPoolLedger device ids with least-privilege NATS permissions', () => {
  let server: NatsServer;
  const conns: NatsConnection[] = [];
  const as = async (user: string) => {
    const conn = await connect({ servers: server.url, user, pass: 'pw' });
    conns.push(conn);
    return conn;
  };

  beforeAll(async () => {
    server = await startNatsServer({ config: restricted });
    await new Kvm(await as('admin')).create('scaler-pools', { history: 1, allow_direct: false });
  });
  afterAll(async () => {
    await Promise.all(conns.map((c) => c.close().catch(() => {})));
    await server?.stop();
  });

  it('two combining instances grant, adopt and release ids with only those subjects', async () => {
    const forwarded: string[] = [];
    const a = await NatsPoolLedger.connect({ nc: await as('ledger'), instanceId: 'a' });
    const b = await NatsPoolLedger.connect(
      withNatsLedgerHooks(
        { nc: await as('ledger'), instanceId: 'b' },
        { onForward: (pool) => forwarded.push(pool) },
      ),
    );
    try {
      for (const l of [a, b]) l.registerPool('gpu', cap);
      expect(await a.reserve('gpu', 'a-1', 0, 0, gpus(1))).toEqual({
        ok: true,
        devices: { [GPU]: ['0'] },
      });
      expect(await b.reserve('gpu', 'b-1', 0, 0, gpus(2))).toEqual({
        ok: true,
        devices: { [GPU]: ['1', '2'] },
      });
      expect(await b.adopt('gpu', [{ agentId: 'b-1', cpus: 0, memBytes: 0, ...gpus(2) }])).toEqual([
        { ok: true, adopted: true, devices: { [GPU]: ['1', '2'] } },
      ]);
      expect(forwarded.length).toBeGreaterThan(0);
      expect(await b.release('gpu', 'b-1')).toBe(true);
      expect(await a.reserve('gpu', 'a-2', 0, 0, gpus(3))).toEqual({
        ok: true,
        devices: { [GPU]: ['1', '2', '3'] },
      });
    } finally {
      await b.close();
      await a.close();
    }
  });
});
