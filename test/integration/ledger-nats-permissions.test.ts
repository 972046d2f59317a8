/**
 * NatsPoolLedger as a NATS user holding only the permissions docs/security.md
 * lists for the pool ledger: connect, reserve, combine across two instances,
 * release, close. A user without the combiner subjects still works with
 * `combine: false`.
 */
import { Kvm } from '@nats-io/kv';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { NatsPoolLedger } from '../../src/ledger/nats/nats-pool-ledger.js';
import { withNatsLedgerHooks } from '../../src/ledger/nats/options.js';
import { type NatsServer, startNatsServer } from '../helpers/nats-server.js';
import { hasSystem } from '../helpers/system.js';

const ok = hasSystem(['nats-server'], 'NatsPoolLedger with restricted NATS permissions');

// The least-privilege set from docs/security.md, for the bucket `scaler-pools`.
const LEDGER_PUBLISH = [
  '$JS.API.INFO',
  '$JS.API.STREAM.INFO.KV_scaler-pools',
  '$JS.API.STREAM.MSG.GET.KV_scaler-pools',
  '$JS.API.CONSUMER.CREATE.KV_scaler-pools.>',
  '$KV.scaler-pools.>',
];
const COMBINER = ['_SCALER_LEDGER.scaler-pools.*'];
const list = (subjects: string[]) => subjects.map((s) => JSON.stringify(s)).join(', ');

const config = `accounts { A { jetstream: enabled, users: [
  { user: admin, password: pw },
  { user: ledger, password: pw, permissions: {
      publish: { allow: [${list([...LEDGER_PUBLISH, ...COMBINER])}] },
      subscribe: { allow: [${list(['_INBOX.>', ...COMBINER])}] },
      allow_responses: true } },
  { user: nocombine, password: pw, permissions: {
      publish: { allow: [${list(LEDGER_PUBLISH)}] },
      subscribe: { allow: ["_INBOX.>"] } } }
] } }`;

describe.runIf(ok)('NatsPoolLedger with least-privilege NATS permissions', () => {
  let server: NatsServer;
  const conns: NatsConnection[] = [];
  const as = async (user: string) => {
    const nc = await connect({ servers: server.url, user, pass: 'pw' });
    conns.push(nc);
    return nc;
  };

  beforeAll(async () => {
    server = await startNatsServer({ config });
    // The operator creates the bucket; the ledger users may not.
    await new Kvm(await as('admin')).create('scaler-pools', { history: 1, allow_direct: false });
  });
  afterAll(async () => {
    await Promise.all(conns.map((nc) => nc.close().catch(() => {})));
    await server?.stop();
  });

  it('two instances combine, grant to the cap, release and close with only those subjects', async () => {
    const a = await NatsPoolLedger.connect({
      nc: await as('ledger'),
      instanceId: 'a',
      timeoutMs: 5000,
    });
    const forwarded: string[] = [];
    const b = await NatsPoolLedger.connect(
      withNatsLedgerHooks(
        { nc: await as('ledger'), instanceId: 'b', timeoutMs: 5000 },
        { onForward: (pool) => forwarded.push(pool) },
      ),
    );
    try {
      for (const l of [a, b]) l.registerPool('p', { maxCpu: 2 });
      expect(await a.tryReserve('p', 'a-1', 1, 0)).toBe(true);
      // b's calls go to a, the pool's combiner, over the combiner subject.
      expect(await b.tryReserve('p', 'b-1', 1, 0)).toBe(true);
      expect(await b.reserve('p', 'b-2', 1, 0)).toMatchObject({ ok: false, dimension: 'cpu' });
      expect(forwarded.length).toBeGreaterThan(0);
      expect(await b.release('p', 'b-1')).toBe(true);
      expect((await a.list('p')).map((r) => r.agentId)).toEqual(['a-1']);
    } finally {
      await b.close();
      await a.close();
    }
  });

  it('without the combiner subjects, combine: false works', async () => {
    const c = await NatsPoolLedger.connect({
      nc: await as('nocombine'),
      instanceId: 'c',
      combine: false,
      timeoutMs: 5000,
    });
    try {
      c.registerPool('q', { maxCpu: 1 });
      expect(await c.tryReserve('q', 'c-1', 1, 0)).toBe(true);
      expect(await c.release('q', 'c-1')).toBe(true);
    } finally {
      await c.close();
    }
  });
});
