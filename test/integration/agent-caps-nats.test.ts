import { jetstreamManager } from '@nats-io/jetstream';
import type { KV } from '@nats-io/kv';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { directGetSubject, encodeAgentCaps, STREAM } from 'scaler-primitives/agent-caps';
import {
  type AgentCapsChange,
  deleteAgentCaps,
  openCapsBucket,
  openOrCreateCapsBucket,
  readAgentCaps,
  watchAgentCaps,
  writeAgentCaps,
} from 'scaler-primitives/agent-caps/nats';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isCapsValueError, isRevisionConflictError } from '../../src/errors/agent-caps.js';
import { isInvalidInputError } from '../../src/errors/input.js';
import { isNatsRequestError } from '../../src/errors/nats.js';
import { type NatsServer, startNatsServer } from '../helpers/nats-server.js';
import { hasSystem } from '../helpers/system.js';

const ok = hasSystem(['nats-server'], 'agent-caps NATS system tests');

/** True when the server answers a direct get for a missing stream with no responders (2.10.26+). */
function answersNoResponders(nc: NatsConnection): boolean {
  const [major = 0, minor = 0, patch = 0] = (nc.info?.version ?? '0.0.0').split('.').map(Number);
  return major > 2 || (major === 2 && (minor > 10 || (minor === 10 && patch >= 26)));
}

async function rejection(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (error) {
    return error;
  }
  throw new Error('expected a rejection');
}

async function next(iterator: AsyncIterator<AgentCapsChange>): Promise<AgentCapsChange> {
  const result = await Promise.race([
    iterator.next(),
    new Promise<never>((_, reject) =>
      setTimeout(() => reject(new Error('no change within 5s')), 5000),
    ),
  ]);
  if (result.done) throw new Error('watch ended');
  return result.value;
}

describe.runIf(ok)('agent-caps on a real nats-server -js', () => {
  let server: NatsServer;
  let nc: NatsConnection;

  beforeAll(async () => {
    server = await startNatsServer();
    nc = await connect({ servers: server.url });
  });

  afterAll(async () => {
    await nc?.close();
    await server?.stop();
  });

  describe('before any bucket exists', () => {
    it('openCapsBucket returns null and creates nothing', async () => {
      expect(await openCapsBucket(nc)).toBeNull();
      expect(await openCapsBucket(nc)).toBeNull();
    });

    it('readAgentCaps reports no bucket, or on older servers a timeout that says why', async () => {
      const read = readAgentCaps(nc, 'iris', { timeout: 300 });
      if (answersNoResponders(nc)) {
        expect(await read).toEqual({ kind: 'no-bucket' });
        return;
      }
      const error = await rejection(read);
      expect(isNatsRequestError(error)).toBe(true);
      expect(error).toMatchObject({
        code: 'ERR_NATS_TIMEOUT',
        subject: '$JS.API.DIRECT.GET.KV_agent-limits.$KV.agent-limits.iris',
      });
      expect((error as Error).message).toMatch(/permissions/);
      expect((error as Error).message).toMatch(/allow_direct/);
      expect((error as Error).message).toMatch(/does not exist/);
    });

    it('watchAgentCaps says the bucket does not exist yet', async () => {
      const error = await rejection(watchAgentCaps(nc, 'iris'));
      expect(isNatsRequestError(error)).toBe(true);
      expect((error as Error).message).toMatch(/does not exist yet/);
    });
  });

  describe('with the bucket', () => {
    let kv: KV;

    beforeAll(async () => {
      kv = await openOrCreateCapsBucket(nc);
    });

    it('creates the bucket with history 1 and allow_direct', async () => {
      const jsm = await jetstreamManager(nc);
      const info = await jsm.streams.info(STREAM);
      expect(info.config.max_msgs_per_subject).toBe(1);
      expect(info.config.allow_direct).toBe(true);
      expect(info.config.subjects).toEqual(['$KV.agent-limits.>']);
    });

    it('opens an existing bucket without touching its values', async () => {
      const revision = await writeAgentCaps(kv, 'keep', { cpuQuota: '100%' });
      const again = await openOrCreateCapsBucket(nc);
      const opened = await openCapsBucket(nc);
      expect(opened).not.toBeNull();
      expect((await again.get('keep'))?.revision).toBe(revision);
      expect(await readAgentCaps(nc, 'keep')).toEqual({
        kind: 'current',
        caps: { cpuQuota: '100%' },
        revision,
      });
    });

    it('writes and reads back caps', async () => {
      const revision = await writeAgentCaps(kv, 'ada', { cpuQuota: '400%', memoryMax: '8G' });
      expect(revision).toBeGreaterThan(0);
      expect(await readAgentCaps(nc, 'ada')).toEqual({
        kind: 'current',
        caps: { cpuQuota: '400%', memoryMax: '8G' },
        revision,
      });
    });

    it('reads a key that was never written as all unset', async () => {
      expect(await readAgentCaps(nc, 'never-written')).toEqual({
        kind: 'current',
        caps: {},
        revision: 0,
      });
    });

    it('stores exactly the golden bytes, as a DIRECT.GET returns them', async () => {
      await writeAgentCaps(kv, 'iris', { memoryMax: '8G' });
      const reply = await nc.request(directGetSubject('iris'), new Uint8Array(0), {
        timeout: 2000,
      });
      expect(reply.headers?.get('Nats-Subject')).toBe('$KV.agent-limits.iris');
      expect(Buffer.from(reply.data)).toEqual(Buffer.from('{"memory_max":"8G"}', 'utf8'));
      expect(Buffer.from(reply.data)).toEqual(Buffer.from(encodeAgentCaps({ memoryMax: '8G' })));
    });

    it('reads a delete marker and a purge marker as all unset', async () => {
      await writeAgentCaps(kv, 'del', { cpuQuota: '50%' });
      await deleteAgentCaps(kv, 'del');
      const afterDelete = await readAgentCaps(nc, 'del');
      expect(afterDelete).toMatchObject({ kind: 'current', caps: {} });
      const raw = await nc.request(directGetSubject('del'), new Uint8Array(0));
      expect(raw.headers?.get('KV-Operation')).toBe('DEL');

      await writeAgentCaps(kv, 'del', { cpuQuota: '50%' });
      await deleteAgentCaps(kv, 'del', { purge: true });
      expect(await readAgentCaps(nc, 'del')).toMatchObject({ kind: 'current', caps: {} });
      const purged = await nc.request(directGetSubject('del'), new Uint8Array(0));
      expect(purged.headers?.get('KV-Operation')).toBe('PURGE');

      // A removed key can be created again with expectRevision 0.
      await writeAgentCaps(kv, 'del', { memoryMax: '1G' }, { expectRevision: 0 });
      expect(await readAgentCaps(nc, 'del')).toMatchObject({ caps: { memoryMax: '1G' } });
    });

    it('keeps the caps of a value written by a newer writer with unknown fields', async () => {
      await kv.put('newer', '{"cpu_quota":"400%","io_weight":"10"}');
      expect(await readAgentCaps(nc, 'newer')).toMatchObject({ caps: { cpuQuota: '400%' } });
    });

    it('refuses a stored value systemd would ignore, unless raw', async () => {
      await kv.put('bogus', '{"memory_max":"8GB"}');
      const error = await rejection(readAgentCaps(nc, 'bogus'));
      expect(isCapsValueError(error)).toBe(true);
      expect(error).toMatchObject({ field: 'memoryMax', value: '8GB' });
      expect(await readAgentCaps(nc, 'bogus', { raw: true })).toMatchObject({
        caps: { memoryMax: '8GB' },
      });
    });

    it('never writes an invalid value', async () => {
      const revision = await writeAgentCaps(kv, 'guarded', { memoryMax: '2G' });
      const error = await rejection(writeAgentCaps(kv, 'guarded', { memoryMax: '2g' }));
      expect(isCapsValueError(error)).toBe(true);
      expect((await kv.get('guarded'))?.revision).toBe(revision);
      expect(await readAgentCaps(nc, 'guarded')).toMatchObject({ caps: { memoryMax: '2G' } });
    });

    it('refuses an agent name that would widen the subject', async () => {
      for (const agent of ['a.*', '>', 'a b', '']) {
        expect(isInvalidInputError(await rejection(readAgentCaps(nc, agent)))).toBe(true);
        expect(isInvalidInputError(await rejection(writeAgentCaps(kv, agent, {})))).toBe(true);
        expect(isInvalidInputError(await rejection(deleteAgentCaps(kv, agent)))).toBe(true);
        expect(isInvalidInputError(await rejection(watchAgentCaps(nc, agent)))).toBe(true);
      }
    });

    it('refuses an over-long agent name before sending; the shared connection survives', async () => {
      // The hazard is real: a subject past the server's control line makes nats-server
      // close the connection that sent it (shown on a throwaway connection).
      const victim = await connect({ servers: server.url, reconnect: false });
      const long = 'x'.repeat(4000);
      // What readAgentCaps would have sent: a request on the direct-get subject.
      const sent = victim
        .request(directGetSubject('x').replace(/x$/, long), new Uint8Array(0), { timeout: 5000 })
        .catch((error: unknown) => error);
      const closed = await Promise.race([
        victim.closed().then(() => 'closed'),
        new Promise((resolve) => setTimeout(() => resolve('still open'), 5000)),
      ]);
      expect(closed).toBe('closed');
      expect(String(await sent)).toMatch(/closed/);

      // The library refuses the same name at the edge, on the connection others share.
      const watch = await watchAgentCaps(nc, 'survivor');
      const changes = watch[Symbol.asyncIterator]();
      for (const attempt of [
        readAgentCaps(nc, long),
        watchAgentCaps(nc, long),
        writeAgentCaps(kv, long, { cpuQuota: '100%' }),
        deleteAgentCaps(kv, long),
      ]) {
        const error = await rejection(attempt);
        expect(isInvalidInputError(error)).toBe(true);
        expect((error as Error).message).toMatch(/4000 characters/);
        expect((error as Error).message.length).toBeLessThan(400);
      }
      expect(nc.isClosed()).toBe(false);
      // Every user of the connection carries on: a write, a read and a watcher.
      await writeAgentCaps(kv, 'survivor', { cpuQuota: '150%' });
      expect(await readAgentCaps(nc, 'survivor')).toMatchObject({ caps: { cpuQuota: '150%' } });
      let change = await next(changes);
      while (change.kind === 'current' && change.caps.cpuQuota !== '150%')
        change = await next(changes);
      expect(change).toMatchObject({ kind: 'current', agent: 'survivor' });
      watch.stop();

      // The longest accepted name (256) works end to end.
      const longest = 'n'.repeat(256);
      await writeAgentCaps(kv, longest, { memoryMax: '1G' });
      expect(await readAgentCaps(nc, longest)).toMatchObject({ caps: { memoryMax: '1G' } });
      expect(isInvalidInputError(await rejection(readAgentCaps(nc, `${longest}n`)))).toBe(true);
    });

    it('refuses unknown keys in caps and options before anything is sent or written', async () => {
      const revision = await writeAgentCaps(kv, 'strict', { memoryMax: '2G' });
      for (const attempt of [
        writeAgentCaps(kv, 'strict', { memoryMAx: '4G' } as never),
        writeAgentCaps(kv, 'strict', { memoryMax: '4G' }, { expectRevison: revision } as never),
        readAgentCaps(nc, 'strict', { timout: 1 } as never),
        deleteAgentCaps(kv, 'strict', { purge: true, force: true } as never),
        watchAgentCaps(nc, 'strict', { raw: true } as never),
        openCapsBucket(nc, { timeOut: 5 } as never),
      ]) {
        expect(isInvalidInputError(await rejection(attempt))).toBe(true);
      }
      expect((await kv.get('strict'))?.revision).toBe(revision);
      expect(await readAgentCaps(nc, 'strict')).toMatchObject({ caps: { memoryMax: '2G' } });
    });

    it('maps a lost compare-and-set to RevisionConflictError (10071)', async () => {
      const first = await writeAgentCaps(kv, 'cas', { cpuQuota: '100%' });
      const second = await writeAgentCaps(
        kv,
        'cas',
        { cpuQuota: '200%' },
        { expectRevision: first },
      );
      expect(second).toBeGreaterThan(first);
      const stale = await rejection(
        writeAgentCaps(kv, 'cas', { cpuQuota: '300%' }, { expectRevision: first }),
      );
      expect(isRevisionConflictError(stale)).toBe(true);
      expect(stale).toMatchObject({ key: 'cas', code: 'ERR_REVISION_CONFLICT' });
      expect(((stale as Error).cause as { code?: number }).code).toBe(10071);
      const exists = await rejection(
        writeAgentCaps(kv, 'cas', { cpuQuota: '300%' }, { expectRevision: 0 }),
      );
      expect(isRevisionConflictError(exists)).toBe(true);
      expect(await readAgentCaps(nc, 'cas')).toMatchObject({ caps: { cpuQuota: '200%' } });
    });

    it('a watcher sees the current value, then changes, removals and bad values', async () => {
      await writeAgentCaps(kv, 'watched', { cpuQuota: '100%' });
      const watch = await watchAgentCaps(nc, 'watched');
      const iterator = watch[Symbol.asyncIterator]();
      expect(await next(iterator)).toMatchObject({
        kind: 'current',
        agent: 'watched',
        caps: { cpuQuota: '100%' },
      });
      const revision = await writeAgentCaps(kv, 'watched', { cpuQuota: '250%', memoryMax: '4G' });
      expect(await next(iterator)).toEqual({
        kind: 'current',
        agent: 'watched',
        caps: { cpuQuota: '250%', memoryMax: '4G' },
        revision,
        isUpdate: true,
      });
      await kv.put('watched', '{"cpu_quota":"0%"}');
      const bad = await next(iterator);
      expect(bad).toMatchObject({ kind: 'invalid', agent: 'watched' });
      expect(bad.kind === 'invalid' && isCapsValueError(bad.error)).toBe(true);
      await deleteAgentCaps(kv, 'watched');
      expect(await next(iterator)).toMatchObject({ kind: 'current', caps: {}, isUpdate: true });
      watch.stop();
      expect((await iterator.next()).done).toBe(true);
    });

    it('a watcher of every agent replays each key once, then sees changes', async () => {
      const watch = await watchAgentCaps(nc);
      const iterator = watch[Symbol.asyncIterator]();
      // The replay ends with the first change flagged isUpdate (the last stored value).
      const replay: AgentCapsChange[] = [];
      do replay.push(await next(iterator));
      while (!replay.at(-1)!.isUpdate);
      expect(replay.slice(0, -1).every((change) => !change.isUpdate)).toBe(true);
      const agents = replay.map((change) => change.agent);
      expect(new Set(agents).size).toBe(agents.length);
      expect(agents).toEqual(expect.arrayContaining(['ada', 'iris', 'keep', 'del', 'cas']));
      expect(replay.find((change) => change.agent === 'bogus')?.kind).toBe('invalid');
      expect(replay.find((change) => change.agent === 'watched')).toMatchObject({ caps: {} });

      const revision = await writeAgentCaps(kv, 'zoe', { memoryMax: '512M' });
      expect(await next(iterator)).toEqual({
        kind: 'current',
        agent: 'zoe',
        caps: { memoryMax: '512M' },
        revision,
        isUpdate: true,
      });
      watch.stop();
    });
  });

  it('a direct get on a stream without allow_direct times out (nats-server before 2.10.26)', async () => {
    if (answersNoResponders(nc)) return; // newer servers answer "no responders" instead
    const jsm = await jetstreamManager(nc);
    await jsm.streams.add({
      name: 'KV_nodirect',
      subjects: ['$KV.nodirect.>'],
      allow_direct: false,
    });
    const error = await rejection(
      nc.request('$JS.API.DIRECT.GET.KV_nodirect.$KV.nodirect.iris', new Uint8Array(0), {
        timeout: 300,
      }),
    );
    expect((error as Error).name).toBe('TimeoutError');
    await jsm.streams.delete('KV_nodirect');
  });
});

describe.runIf(ok)('agent-caps on a nats-server without JetStream', () => {
  let server: NatsServer;
  let nc: NatsConnection;

  beforeAll(async () => {
    server = await startNatsServer({ jetstream: false });
    nc = await connect({ servers: server.url });
  });

  afterAll(async () => {
    await nc?.close();
    await server?.stop();
  });

  it('readAgentCaps reports no bucket (no responders)', async () => {
    expect(await readAgentCaps(nc, 'iris')).toEqual({ kind: 'no-bucket' });
  });

  it('opening the bucket fails with a typed error and creates nothing', async () => {
    for (const open of [openCapsBucket, openOrCreateCapsBucket]) {
      const error = await rejection(open(nc, { timeout: 500 }));
      expect(isNatsRequestError(error)).toBe(true);
      expect((error as Error).message).toMatch(/JetStream/);
    }
  });
});

describe.runIf(ok)('agent-caps with restricted permissions', () => {
  const config = `accounts { A { jetstream: enabled, users: [
    { user: admin, password: pw },
    { user: noinfo, password: pw, permissions: { publish: { deny: ["$JS.API.STREAM.INFO.>"] } } },
    { user: host, password: pw, permissions: { publish: { deny: ["$JS.API.DIRECT.GET.>"] } } }
  ] } }`;
  let server: NatsServer;
  const conns: NatsConnection[] = [];
  const as = async (user: string) => {
    const nc = await connect({ servers: server.url, user, pass: 'pw' });
    conns.push(nc);
    return nc;
  };

  beforeAll(async () => {
    server = await startNatsServer({ config });
  });

  afterAll(async () => {
    for (const nc of conns) await nc.close();
    await server?.stop();
  });

  it('does not create the bucket when the lookup fails for another reason than "not found"', async () => {
    const error = await rejection(openOrCreateCapsBucket(await as('noinfo'), { timeout: 1000 }));
    expect(isNatsRequestError(error)).toBe(true);
    expect(error).toMatchObject({
      code: 'ERR_NATS_REQUEST',
      subject: '$JS.API.STREAM.INFO.KV_agent-limits',
    });
    expect((error as Error).message).toMatch(/refused it for permissions/);
    expect(await openCapsBucket(await as('admin'))).toBeNull();
  });

  it('reports a direct get refused for permissions as a request error naming the subject', async () => {
    await openOrCreateCapsBucket(await as('admin'));
    const error = await rejection(readAgentCaps(await as('host'), 'iris', { timeout: 1000 }));
    expect(isNatsRequestError(error)).toBe(true);
    // nats.js v3 surfaces the server's -ERR at once; other clients may only see a timeout.
    expect(error).toMatchObject({ code: 'ERR_NATS_REQUEST' });
    expect((error as Error).message).toMatch(/Permissions Violation for Publish/);
  });
});
