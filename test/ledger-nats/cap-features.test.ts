/**
 * Cap features on NatsPoolLedger against a real nats-server: a pool document
 * whose `capFeatures` names a feature this copy does not know is refused by
 * reserve, tryReserve, adopt, release (both paths), reap, list and getUsage, with and without
 * the combiner, and the KV value is left as it was (same revision, same bytes).
 */
import { type KV, Kvm } from '@nats-io/kv';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { ErrorCode, isScalerError } from 'scaler-primitives';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { NatsPoolLedger } from '../../src/ledger/nats/nats-pool-ledger.js';
import { type NatsServer, startNatsServer } from '../helpers/nats-server.js';
import { hasSystem } from '../helpers/system.js';

const ok = hasSystem(['nats-server'], 'NatsPoolLedger cap features against nats-server');

const futureDocument = {
  version: 1,
  cap: { maxCpu: 4, exampleFutureCap: 2 },
  capFeatures: ['example-future-cap'],
  reservations: [
    {
      instanceId: 'other',
      pid: 1,
      bootId: 'boot-1',
      agentId: 'held',
      cpus: 1,
      memBytes: 0,
      reservedAt: 1,
      leaseId: 'other-lease',
    },
  ],
};

type Call = (l: NatsPoolLedger, pool: string) => Promise<unknown>;
const calls: Array<[string, Call]> = [
  ['reserve', (l, pool) => l.reserve(pool, 'x', 1, 0)],
  ['tryReserve', (l, pool) => l.tryReserve(pool, 'x', 1, 0)],
  ['adopt', (l, pool) => l.adopt(pool, [{ agentId: 'held', cpus: 1, memBytes: 0 }])],
  ['release', (l, pool) => l.release(pool, 'held')],
  ['release (operator path)', (l, pool) => l.release(pool, 'held', { anyInstance: true })],
  ['reapStale', (l, pool) => l.reapStale(pool)],
  ['list', (l, pool) => l.list(pool)],
  ['getUsage', (l, pool) => l.getUsage(pool)],
];

describe.runIf(ok)('NatsPoolLedger refuses a pool that uses an unknown cap feature', () => {
  let server: NatsServer;
  let nc: NatsConnection;
  let kv: KV;
  const open: NatsPoolLedger[] = [];
  let serial = 0;

  beforeAll(async () => {
    server = await startNatsServer();
    nc = await connect({ servers: server.url });
    kv = await new Kvm(nc).create('scaler-pools');
  });
  afterEach(async () => {
    await Promise.all(open.splice(0).map((l) => l.close().catch(() => {})));
  });
  afterAll(async () => {
    await nc?.close();
    await server?.stop();
  });

  async function ledger(instanceId: string, combine: boolean) {
    const l = await NatsPoolLedger.connect({
      servers: server.url,
      instanceId,
      combine,
      timeoutMs: 15_000,
    });
    open.push(l);
    return l;
  }

  for (const combine of [false, true]) {
    it.each(calls)(
      `${combine ? 'combining' : 'not combining'}: %s is refused and the KV value is left as it was`,
      async (_name, call) => {
        const pool = `features-${serial++}`;
        const text = JSON.stringify(futureDocument, null, 2);
        const revision = await kv.put(`pool.${pool}`, text);
        // Two instances, so that with combining one may forward its calls to the other.
        const a = await ledger('a', combine);
        const b = await ledger('b', combine);
        for (const l of [a, b]) l.registerPool(pool, { maxCpu: 4 });

        for (const l of [a, b]) {
          let caught: unknown;
          await call(l, pool).then(
            (value) => {
              caught = { resolved: value };
            },
            (error) => {
              caught = error;
            },
          );
          expect(isScalerError(caught, ErrorCode.LEDGER_CAP_MISMATCH)).toBe(true);
          expect((caught as Error).message).toContain('"example-future-cap"');
          expect((caught as Error).message).toContain('these features: none');
        }
        const entry = await kv.get(`pool.${pool}`);
        expect(entry?.revision).toBe(revision);
        expect(entry?.string()).toBe(text);
      },
      60_000,
    );
  }
});
