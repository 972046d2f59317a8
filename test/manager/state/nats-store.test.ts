/**
 * NatsStateStore against a real nats-server: the state store contract
 * (stateStoreConformance), compare-and-set on every write (two stores with one
 * name cannot overwrite each other), corrupt values refused and left, and the
 * least-privilege subjects of docs/security.md for a restricted user.
 */
import { Kvm } from '@nats-io/kv';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import type { AgentStateRecord } from 'scaler-primitives/manager';
import { NatsStateStore } from 'scaler-primitives/manager/nats';
import { stateStoreConformance } from 'scaler-primitives/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isStateStoreError } from '../../../src/errors/state-store.js';
import { keyOf } from '../../../src/manager/nats/store.js';
import { type NatsServer, startNatsServer } from '../../helpers/nats-server.js';
import { hasSystem } from '../../helpers/system.js';

const ok = hasSystem(['nats-server'], 'NatsStateStore against nats-server');

// The least-privilege set from docs/security.md, for bucket `scaler-manager-state` and name `ci-1`.
const STATE_PUBLISH = [
  '$JS.API.INFO',
  '$JS.API.STREAM.INFO.KV_scaler-manager-state',
  '$JS.API.STREAM.MSG.GET.KV_scaler-manager-state',
  '$JS.API.CONSUMER.CREATE.KV_scaler-manager-state.>',
  '$JS.API.CONSUMER.INFO.KV_scaler-manager-state.>',
  '$KV.scaler-manager-state.ci-1.>',
];
const list = (subjects: string[]) => subjects.map((s) => JSON.stringify(s)).join(', ');
const config = `accounts { A { jetstream: enabled, users: [
  { user: admin, password: pw },
  { user: manager, password: pw, permissions: {
      publish: { allow: [${list(STATE_PUBLISH)}] },
      subscribe: { allow: ["_INBOX.>"] } } }
] } }`;

const record = (agentId: string, state: AgentStateRecord['state'] = 'busy'): AgentStateRecord => ({
  v: 1,
  agentId,
  scaler: 'vm',
  state,
  warm: false,
  jobId: 'job-1',
  labels: ['linux'],
  resources: { requests: { cpus: 1, memBytes: 0 }, limits: { cpus: 1 } },
  poolHeld: true,
  pool: 'host',
  spawnSettled: true,
  spawnedAt: 1,
  registeredAt: 2,
  idleSince: 0,
  jobsCompleted: 0,
});

describe.runIf(ok)('NatsStateStore (real nats-server)', () => {
  let server: NatsServer;
  const conns: NatsConnection[] = [];
  const as = async (user = 'admin') => {
    const nc = await connect({ servers: server.url, user, pass: 'pw' });
    conns.push(nc);
    return nc;
  };
  beforeAll(async () => {
    server = await startNatsServer({ config });
  });
  afterAll(async () => {
    await Promise.all(conns.map((nc) => nc.close().catch(() => {})));
    await server?.stop();
  });

  describe('stateStoreConformance', () => {
    for (const check of stateStoreConformance(async ({ key }) =>
      NatsStateStore.open(await as(), { bucket: 'conformance', name: key }),
    )) {
      it(check.name, check.run);
    }
  });

  it('every write is a compare-and-set: a second store of the same name cannot overwrite', async () => {
    const one = await NatsStateStore.open(await as(), { bucket: 'cas', name: 'm' });
    const two = await NatsStateStore.open(await as(), { bucket: 'cas', name: 'm' });
    await one.commit([{ op: 'put', record: record('a') }]);
    expect(await two.load()).toEqual([record('a')]);
    await two.commit([{ op: 'put', record: record('a', 'draining') }]);
    // one's revision is stale now: refused, and two's write stands.
    const error = await one.commit([{ op: 'put', record: record('a', 'idle') }]).catch((e) => e);
    expect(isStateStoreError(error) && error.problem).toBe('conflict');
    // A create of a key that exists is refused too.
    await two.commit([{ op: 'put', record: record('b') }]);
    const created = await one.commit([{ op: 'put', record: record('b', 'idle') }]).catch((e) => e);
    expect(isStateStoreError(created) && created.problem).toBe('conflict');
    expect(
      (await (await NatsStateStore.open(await as(), { bucket: 'cas', name: 'm' })).load())
        .map((r) => r.state)
        .sort(),
    ).toEqual(['busy', 'draining']);
  });

  it('refuses a corrupt value and leaves it', async () => {
    const nc = await as();
    const store = await NatsStateStore.open(nc, { bucket: 'corrupt', name: 'm' });
    await store.commit([{ op: 'put', record: record('a') }]);
    const kv = await new Kvm(nc).open('corrupt');
    await kv.put(keyOf('m', 'a'), '{"v":1,"agentId":"a"}');
    const error = await store.load().catch((e) => e);
    expect(isStateStoreError(error) && error.problem).toBe('corrupt');
    expect((await kv.get(keyOf('m', 'a')))?.string()).toBe('{"v":1,"agentId":"a"}');
    // A record under another agent's key is refused as well.
    await kv.put(keyOf('m', 'a'), JSON.stringify(record('b')));
    expect(((await store.load().catch((e) => e)) as { problem?: string }).problem).toBe('corrupt');
  });

  it('works as a user holding only the documented subjects', async () => {
    // The operator creates the bucket; the manager's user may not.
    await new Kvm(await as()).create('scaler-manager-state', { history: 1, allow_direct: false });
    const store = await NatsStateStore.open(await as('manager'), { name: 'ci-1', timeoutMs: 3000 });
    await store.commit([
      { op: 'put', record: record('a') },
      { op: 'put', record: record('b', 'spawning') },
    ]);
    await store.commit([
      { op: 'put', record: record('a', 'draining') },
      { op: 'delete', agentId: 'b' },
    ]);
    const again = await NatsStateStore.open(await as('manager'), { name: 'ci-1', timeoutMs: 3000 });
    expect(await again.load()).toEqual([record('a', 'draining')]);
    // Another manager's keys are out of reach for this user.
    const other = await NatsStateStore.open(await as('manager'), { name: 'ci-2', timeoutMs: 1500 });
    const refused = await other.commit([{ op: 'put', record: record('x') }]).catch((e) => e);
    expect(isStateStoreError(refused)).toBe(true);
  });

  it('takes strict options', async () => {
    const nc = await as();
    await expect(NatsStateStore.open(nc, { extra: 1 } as never)).rejects.toThrow(
      /Unknown NatsStateStore option/,
    );
    await expect(NatsStateStore.open(nc, { name: 'a.b' })).rejects.toThrow(/name/);
    await expect(NatsStateStore.open(nc, { bucket: '' })).rejects.toThrow(/bucket/);
  });
});
