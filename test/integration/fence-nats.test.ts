/**
 * `watchLeasesFromEnv` of scaler-primitives/fence/nats against a real
 * nats-server: it opens the connection and bucket itself, follows the
 * heartbeat key a controller renews, fires when renewals stop or the key
 * ends, and closes the connection it opened (and only that one). The test
 * plays the controller by writing the heartbeat key; the agent side reaches
 * the server through a counting TCP route, so the test sees its connection.
 */

import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server, type Socket, connect as tcpConnect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type KV, Kvm } from '@nats-io/kv';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { type FenceExpiry, type FenceLease, leaseEnv } from 'scaler-primitives/fence';
import { watchLeasesFromEnv } from 'scaler-primitives/fence/nats';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort, type NatsServer, startNatsServer } from '../helpers/nats-server.js';
import { hasSystem } from '../helpers/system.js';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function until(what: string, predicate: () => boolean, timeoutMs = 15_000) {
  const end = Date.now() + timeoutMs;
  while (!predicate()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(20);
  }
}

describe('watchLeasesFromEnv: options and leases it needs no server for', () => {
  const nats: FenceLease = {
    location: { kind: 'nats', bucket: 'scaler-pools', key: 'lease.a' },
    leaseMs: 3000,
    marginMs: 1000,
  };

  it('refuses bad options, naming them', async () => {
    await expect(watchLeasesFromEnv({ env: {}, server: 'x' } as never)).rejects.toThrow(
      /Unknown key "server".*`servers`/,
    );
    await expect(
      watchLeasesFromEnv({ env: {}, servers: 'nats://a', nc: {} as NatsConnection }),
    ).rejects.toThrow(/one of `servers`.*and `nc`.*not both/);
    await expect(watchLeasesFromEnv({ env: {}, servers: [] })).rejects.toThrow(
      /`servers` to be a NATS server URL or a non-empty list of them, got `\[\]`/,
    );
    await expect(watchLeasesFromEnv({ env: {}, nc: 'nats://a' as never })).rejects.toThrow(
      /`nc` to be a NatsConnection.*got `"nats:\/\/a"`/,
    );
    await expect(watchLeasesFromEnv({ env: {}, required: 1 } as never)).rejects.toThrow(
      /`required` to be a boolean, got `1`/,
    );
    await expect(watchLeasesFromEnv({ env: {}, required: true })).rejects.toThrow(
      /SCALER_LEASE is not set/,
    );
    await expect(watchLeasesFromEnv({ env: { SCALER_LEASE: '{' } })).rejects.toThrow(
      /Invalid SCALER_LEASE: not JSON/,
    );
  });

  it('no lease: undefined, and no connection is tried', async () => {
    const port = await freePort(); // nothing listens there
    expect(await watchLeasesFromEnv({ env: {}, servers: `nats://127.0.0.1:${port}` })).toBe(
      undefined,
    );
  });

  it('file leases only: no server needed', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'fence-nats-'));
    try {
      const path = join(dir, 'a.lease');
      writeFileSync(path, '');
      const fence = await watchLeasesFromEnv({
        env: leaseEnv({ location: { kind: 'file', path }, leaseMs: 60_000, marginMs: 1000 }),
        onExpire: () => {},
      });
      expect(fence?.fired()).toBe(false);
      await fence?.close();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('a NATS lease and no way to reach NATS is refused; an unreachable server is ERR_LEDGER_UNAVAILABLE', async () => {
    await expect(watchLeasesFromEnv({ env: leaseEnv(nats) })).rejects.toThrow(
      /carries a NATS lease \(scaler-pools\/lease\.a\): pass `servers` or `nc`/,
    );
    const port = await freePort();
    const error = await watchLeasesFromEnv({
      env: leaseEnv(nats),
      servers: `nats://127.0.0.1:${port}`,
    }).catch((e: unknown) => e);
    expect(error).toMatchObject({ code: 'ERR_LEDGER_UNAVAILABLE' });
    expect((error as Error).message).toMatch(
      new RegExp(
        `Cannot read the NATS lease scaler-pools/lease\\.a at nats://127\\.0\\.0\\.1:${port}`,
      ),
    );
  });
});

/** A TCP route to the server that counts the connections open through it. */
async function countingRoute(port: number) {
  const open = new Set<Socket>();
  const server: Server = createServer((client) => {
    open.add(client);
    const upstream = tcpConnect(port, '127.0.0.1');
    const drop = () => {
      client.destroy();
      upstream.destroy();
      open.delete(client);
    };
    client.on('error', drop).on('close', drop);
    upstream.on('error', drop).on('close', drop);
    client.pipe(upstream).pipe(client);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `nats://127.0.0.1:${(server.address() as { port: number }).port}`,
    open: () => open.size,
    close: () => {
      for (const socket of open) socket.destroy();
      return new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

describe.runIf(hasSystem(['nats-server'], 'fence/nats on a real server'))(
  'watchLeasesFromEnv on a real nats-server',
  () => {
    const L = 1500;
    let server: NatsServer;
    let nc: NatsConnection;
    let kv: KV;
    let route: Awaited<ReturnType<typeof countingRoute>>;
    let n = 0;

    beforeAll(async () => {
      server = await startNatsServer();
      nc = await connect({ servers: server.url });
      kv = await new Kvm(nc).create('fence-nats', { history: 1 });
      route = await countingRoute(server.port);
    });
    afterAll(async () => {
      await route?.close();
      await nc?.close();
      await server?.stop();
    });

    /** A heartbeat key the test renews every L/3 until told to stop. */
    async function heartbeat() {
      const key = `lease.agent-${++n}`;
      await kv.put(key, JSON.stringify({ n: 0 }));
      let renewing = true;
      const loop = (async () => {
        while (renewing) {
          await sleep(L / 3);
          if (renewing) await kv.put(key, JSON.stringify({ at: Date.now() }));
        }
      })();
      const lease: FenceLease = {
        location: { kind: 'nats', bucket: 'fence-nats', key },
        leaseMs: L,
        marginMs: 500,
      };
      return {
        key,
        lease,
        stop: async () => {
          renewing = false;
          await loop;
        },
      };
    }

    it('follows the renewals, fires when they stop, and close() closes the connection it opened', async () => {
      const beat = await heartbeat();
      const expiries: Array<FenceExpiry & { at: number }> = [];
      const fence = (await watchLeasesFromEnv({
        env: leaseEnv(beat.lease),
        servers: route.url,
        onExpire: (expiry) => {
          expiries.push({ ...expiry, at: Date.now() });
        },
      }))!;
      expect(route.open()).toBe(1);
      await sleep(3 * L); // renewed all along: no fire
      expect(expiries).toEqual([]);
      const stoppedAt = Date.now();
      await beat.stop();
      await until('the fence to fire', () => expiries.length > 0);
      expect(expiries.map((e) => [e.reason, e.lease])).toEqual([['deadline', beat.lease]]);
      // Before the last renewal's deadline plus the peers' margin.
      expect(expiries[0]!.at).toBeLessThan(stoppedAt + L + beat.lease.marginMs);
      await fence.close();
      await until('the connection to close', () => route.open() === 0);
    }, 30_000);

    it('a heartbeat key that ends (its owner closed) fires "ended"; a connection passed as nc stays open', async () => {
      const beat = await heartbeat();
      const expiries: FenceExpiry[] = [];
      const own = await connect({ servers: route.url });
      const fence = (await watchLeasesFromEnv({
        env: leaseEnv(beat.lease),
        nc: own,
        onExpire: (expiry) => {
          expiries.push(expiry);
        },
      }))!;
      expect(route.open()).toBe(1); // its reads go over `own`
      await sleep(L / 2);
      await beat.stop();
      await kv.put(beat.key, JSON.stringify({ ended: Date.now() }));
      await until('the fence to fire', () => expiries.length > 0);
      expect(expiries.map((e) => e.reason)).toEqual(['ended']);
      await fence.close();
      expect(own.isClosed()).toBe(false);
      await own.close();
    }, 30_000);

    it('a NATS lease whose bucket is missing is no renewal: the fence fires by the deadline', async () => {
      const expiries: FenceExpiry[] = [];
      const lease: FenceLease = {
        location: { kind: 'nats', bucket: 'no-such-bucket', key: 'lease.x' },
        leaseMs: L,
        marginMs: 500,
      };
      const startedAt = Date.now();
      const fence = (await watchLeasesFromEnv({
        env: leaseEnv(lease),
        servers: route.url,
        onExpire: (expiry) => {
          expiries.push(expiry);
        },
      }))!;
      await until('the fence to fire', () => expiries.length > 0);
      expect(expiries.map((e) => e.reason)).toEqual(['deadline']);
      // Counted as renewed a third of a lease before the first read, at most.
      expect(Date.now() - startedAt).toBeLessThan(L + 1000);
      await fence.close();
    }, 30_000);
  },
);
