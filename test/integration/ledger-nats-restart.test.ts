/**
 * NatsPoolLedger restarts with the same instance id, against a real nats-server
 * on loopback: a newcomer continues a predecessor's lease that is within its
 * deadline (same heartbeat key, its rows its own), fencing the old session,
 * which then writes nothing more; a predecessor alive on this host is refused
 * with a typed error; a lease past its deadline, or closed, is not continued.
 * The real-process version (SIGKILL, fenced agents) is restart-keeps-agents-nats.test.ts.
 */
import { type KV, Kvm } from '@nats-io/kv';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { ErrorCode, isScalerError } from 'scaler-primitives/errors';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { instanceKey, leaseKey } from '../../src/ledger/nats/keys.js';
import { NatsPoolLedger } from '../../src/ledger/nats/nats-pool-ledger.js';
import type { LeaseEvent } from '../../src/ledger/types.js';
import { type NatsServer, startNatsServer } from '../helpers/nats-server.js';
import { hasSystem } from '../helpers/system.js';
import { startTcpProxy, type TcpProxy } from '../helpers/tcp-proxy.js';

const ok = hasSystem(['nats-server'], 'NatsPoolLedger restarts against nats-server');
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function until(what: string, check: () => boolean | Promise<boolean>, ms = 15_000) {
  const end = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(20);
  }
}

const LEASE_MS = 1500;

describe.runIf(ok)('NatsPoolLedger restart with the same instance id', () => {
  let server: NatsServer;
  let nc: NatsConnection;
  let kv: KV;
  const open: NatsPoolLedger[] = [];
  const proxies: TcpProxy[] = [];
  let serial = 0;
  const next = () => serial++;

  beforeAll(async () => {
    server = await startNatsServer();
    nc = await connect({ servers: server.url });
    kv = await new Kvm(nc).create('scaler-pools', { history: 1, allow_direct: false });
  });
  afterEach(async () => {
    await Promise.all(open.splice(0).map((l) => l.close().catch(() => {})));
    await Promise.all(proxies.splice(0).map((p) => p.close()));
  });
  afterAll(async () => {
    await nc?.close();
    await server?.stop();
  });

  async function ledger(instanceId: string, extra: { bootId?: string; via?: TcpProxy } = {}) {
    const l = await NatsPoolLedger.connect({
      servers: extra.via?.url ?? server.url,
      instanceId,
      leaseMs: LEASE_MS,
      leaseMarginMs: 300,
      timeoutMs: 1000,
      ...(extra.bootId ? { bootId: extra.bootId } : {}),
    });
    open.push(l);
    l.registerPool('p', { maxCpu: 4, maxMemoryBytes: 4 * 2 ** 30 });
    return l;
  }

  it('a second live process on this host with the same instance id is refused, naming who holds it', async () => {
    const id = `same-host-${next()}`;
    const first = await ledger(id);
    const error = await ledger(id).catch((e: unknown) => e);
    expect(isScalerError(error, ErrorCode.LEDGER_INSTANCE_IN_USE)).toBe(true);
    const message = (error as Error).message;
    expect(message).toContain(JSON.stringify(id));
    expect(message).toContain(`pid ${process.pid}`);
    expect(message).toMatch(/stop that process first|another instanceId/);
    expect((error as { holderPid?: number }).holderPid).toBe(process.pid);
    // The refused newcomer wrote nothing to the lease: the first still renews it.
    await first.reserve('p', 'a1', 1, 2 ** 20);
    expect(first.lease().health).toBe('held');
  });

  it('a newcomer (another host) continues the lease within its deadline and fences the old session', async () => {
    const id = `takeover-${next()}`;
    const old = await ledger(id, { bootId: 'host-a' });
    const events: LeaseEvent['type'][] = [];
    old.onLeaseEvent((e) => events.push(e.type));
    expect((await old.reserve('p', 'kept-1', 1, 2 ** 20)).ok).toBe(true);
    const leaseId = old.leaseId;
    const key = old.lease().location;
    const newcomer = await ledger(id, { bootId: 'host-b' });
    // The same lease: same id, same heartbeat key, so agents fencing on it stay satisfied.
    expect(newcomer.leaseId).toBe(leaseId);
    expect(newcomer.lease().location).toEqual(key);
    expect(newcomer.lease().health).toBe('held');
    // The rows are the newcomer's own (live, not stale) and it can release them.
    const snapshot = await newcomer.inspect('p');
    expect(snapshot.live.map((r) => r.agentId)).toEqual(['kept-1']);
    expect(snapshot.stale).toEqual([]);
    // The old session finds its next refresh refused: lease-lost, and every call fails typed.
    await until('the old session counts its lease lost', () => events.includes('lease-lost'));
    expect(old.lease().health).toBe('lost');
    const refused = await old.reserve('p', 'zombie', 1, 2 ** 20).catch((e: unknown) => e);
    expect(isScalerError(refused, ErrorCode.LEDGER_INSTANCE_IN_USE)).toBe(true);
    expect((refused as Error).message).toContain('taken over');
    // Best effort per pool, it resolves, but removes nothing (checked below).
    await old.releaseAllForInstance();
    // The old session never writes the heartbeat key again, and its close() ends nothing.
    const before = await kv.get(leaseKey(leaseId));
    const session = (before!.json() as { session: string }).session;
    await sleep(LEASE_MS);
    await old.close();
    const after = await kv.get(leaseKey(leaseId));
    expect(after!.operation).toBe('PUT');
    expect((after!.json() as { session?: string; ended?: string }).ended).toBeUndefined();
    expect((after!.json() as { session: string }).session).toBe(session);
    expect(after!.revision).toBeGreaterThan(before!.revision);
    // The row survived the old session: the newcomer still counts it and releases it.
    expect((await newcomer.list('p')).map((r) => r.agentId)).toEqual(['kept-1']);
    expect(await newcomer.release('p', 'kept-1')).toBe(true);
  });

  it('the newcomer combines a pool the old session combined (peers forward to it)', async () => {
    const id = `combiner-${next()}`;
    const old = await ledger(id, { bootId: 'host-a' });
    const peer = await ledger(`peer-${next()}`, { bootId: 'host-c' });
    // The old session claims the combiner of pool p.
    expect((await old.reserve('p', 'c-1', 1, 2 ** 20)).ok).toBe(true);
    expect((await peer.reserve('p', 'c-2', 1, 2 ** 20)).ok).toBe(true);
    const before = (await kv.get('leader.p'))!.json() as { leaseId: string; subject: string };
    expect(before.leaseId).toBe(old.leaseId);
    const newcomer = await ledger(id, { bootId: 'host-b' });
    expect((await newcomer.reserve('p', 'c-3', 1, 2 ** 20)).ok).toBe(true);
    expect((await peer.reserve('p', 'c-4', 1, 2 ** 20)).ok).toBe(true);
    // The same lease combines the pool, now on the newcomer's subject (the old one has no listener).
    const leader = (await kv.get('leader.p'))!.json() as { leaseId: string; subject: string };
    expect(leader.leaseId).toBe(newcomer.leaseId);
    expect(leader.subject).not.toBe(before.subject);
    expect((await newcomer.list('p')).map((r) => r.agentId).sort()).toEqual([
      'c-1',
      'c-2',
      'c-3',
      'c-4',
    ]);
    await Promise.all(['c-1', 'c-3'].map((a) => newcomer.release('p', a)));
    await Promise.all(['c-2', 'c-4'].map((a) => peer.release('p', a)));
  });

  it('a lease past its deadline is not continued: the newcomer takes a new one and peers may reap', async () => {
    const id = `late-${next()}`;
    const proxy = await startTcpProxy(server.port);
    proxies.push(proxy);
    const old = await ledger(id, { bootId: 'host-a', via: proxy });
    expect((await old.reserve('p', 'late-1', 1, 2 ** 20)).ok).toBe(true);
    const leaseId = old.leaseId;
    // The old process is cut off (as if dead): its heartbeat stops without an end marker.
    proxy.cut();
    const last = await kv.get(leaseKey(leaseId));
    await until(
      'the heartbeat is older than the lease',
      async () => {
        const probe = await ledger(`probe-${next()}`);
        const age = Date.now() - last!.created.getTime();
        await probe.close();
        return age > LEASE_MS + 200;
      },
      10_000,
    );
    const newcomer = await ledger(id, { bootId: 'host-b' });
    expect(newcomer.leaseId).not.toBe(leaseId);
    // The instance key now names the new lease.
    const pointer = await kv.get(instanceKey(id));
    expect((pointer!.json() as { leaseId: string }).leaseId).toBe(newcomer.leaseId);
    // The old rows are not the newcomer's: they go once the old lease is judged expired.
    await until(
      'the old row is reaped',
      async () => {
        await newcomer.reapStale('p');
        return (await newcomer.list('p')).every((r) => r.agentId !== 'late-1');
      },
      10_000,
    );
  });

  it('a cleanly closed lease is not continued', async () => {
    const id = `closed-${next()}`;
    const old = await ledger(id, { bootId: 'host-a' });
    const leaseId = old.leaseId;
    await old.close();
    const newcomer = await ledger(id, { bootId: 'host-a' });
    expect(newcomer.leaseId).not.toBe(leaseId);
  });
});
