/**
 * The NATS ledger shares the file ledger's document codec: a pool value with
 * extra fields (one named `__proto__` too, which JSON allows) keeps them on
 * every rewrite, as own fields, and the shared prototype is never touched;
 * a value whose cap lists device ids keeps them and the rows' ids. Against a
 * real nats-server on a loopback port with a temp store.
 */
import { type KV, Kvm } from '@nats-io/kv';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { NatsPoolLedger } from '../../src/ledger/nats/nats-pool-ledger.js';
import { type NatsServer, startNatsServer } from '../helpers/nats-server.js';
import { hasSystem } from '../helpers/system.js';

const GPU = 'nvidia.com/gpu';
const ok = hasSystem(['nats-server'], 'NatsPoolLedger extra fields against nats-server');

describe.runIf(ok)('extra fields of a NATS pool value', () => {
  let server: NatsServer;
  let nc: NatsConnection;
  let kv: KV;
  const open: NatsPoolLedger[] = [];
  beforeAll(async () => {
    server = await startNatsServer();
    nc = await connect({ servers: server.url });
    kv = await new Kvm(nc).create('scaler-pools');
  });
  afterEach(async () => {
    await Promise.all(open.splice(0).map((l) => l.close()));
  });
  afterAll(async () => {
    await nc?.close();
    await server?.stop();
  });

  it('keeps them, `__proto__` included, as own fields; the prototype is never touched; device ids are kept', async () => {
    const text = `{
  "version": 1,
  "writer": "other",
  "__proto__": { "polluted": "document" },
  "cap": { "maxCpu": 8, "maxExtended": { "${GPU}": 2 }, "devices": { "${GPU}": ["a", "b"] }, "__proto__": { "polluted": "cap" } },
  "reservations": [
    { "instanceId": "peer", "pid": 1, "bootId": "other-host", "agentId": "kept", "cpus": 1, "memBytes": 0, "reservedAt": 1,
      "extended": { "${GPU}": 1 }, "devices": { "${GPU}": ["a"] }, "__proto__": { "polluted": "row" } }
  ]
}`;
    await kv.put('pool.gpu', text);
    const ledger = await NatsPoolLedger.connect({ servers: server.url, instanceId: 'me' });
    open.push(ledger);
    ledger.registerPool('gpu', { maxCpu: 8, devices: { [GPU]: ['a', 'b'] } });
    expect(await ledger.reserve('gpu', 'x', 1, 0, { extended: { [GPU]: 1 } })).toEqual({
      ok: true,
      devices: { [GPU]: ['b'] },
    });
    expect(await ledger.release('gpu', 'x')).toBe(true);
    const stored = (await kv.get('pool.gpu'))!.string();
    expect(stored.match(/"__proto__"/g)).toHaveLength(3);
    const doc = JSON.parse(stored);
    expect(Object.getOwnPropertyDescriptor(doc, '__proto__')?.value).toEqual({
      polluted: 'document',
    });
    expect(Object.getOwnPropertyDescriptor(doc.cap, '__proto__')?.value).toEqual({
      polluted: 'cap',
    });
    expect(doc.cap.devices).toEqual({ [GPU]: ['a', 'b'] });
    expect(doc.writer).toBe('other');
    expect(doc.reservations).toHaveLength(1);
    expect(Object.getOwnPropertyDescriptor(doc.reservations[0], '__proto__')?.value).toEqual({
      polluted: 'row',
    });
    expect(doc.reservations[0].devices).toEqual({ [GPU]: ['a'] });
    const [listed] = await ledger.list('gpu');
    expect(Object.getPrototypeOf(listed)).toBe(Object.prototype);
    expect((listed as { polluted?: unknown }).polluted).toBeUndefined();
    expect(Object.prototype).not.toHaveProperty('polluted');
  });
});
