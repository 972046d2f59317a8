// Issue 22, "sweep after a crash": sweepAgentCaps against a real nats-server -js
// removes the caps keys of agents no longer alive, reads the live set only after
// listing, never removes a key written again meanwhile (compare-and-set), and
// leaves alone what it does not own.
import type { KV } from '@nats-io/kv';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import {
  openOrCreateCapsBucket,
  readAgentCaps,
  sweepAgentCaps,
  writeAgentCaps,
} from 'scaler-primitives/agent-caps/nats';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { isInvalidInputError } from '../../src/errors/input.js';
import { isNatsRequestError } from '../../src/errors/nats.js';
import { type NatsServer, startNatsServer } from '../helpers/nats-server.js';
import { hasSystem } from '../helpers/system.js';

const ok = hasSystem(['nats-server'], 'agent-caps sweep system tests');

async function keys(kv: KV): Promise<string[]> {
  const out: string[] = [];
  for await (const key of await kv.keys()) out.push(key);
  return out.sort();
}

describe.runIf(ok)('sweepAgentCaps on a real nats-server -js', () => {
  let server: NatsServer;
  let nc: NatsConnection;
  let kv: KV;

  beforeAll(async () => {
    server = await startNatsServer();
    nc = await connect({ servers: server.url });
    kv = await openOrCreateCapsBucket(nc);
  });

  afterAll(async () => {
    await nc?.close();
    await server?.stop();
  });

  beforeEach(async () => {
    for (const key of await keys(kv)) await kv.purge(key);
  });

  it('removes the keys of agents not alive and answers which', async () => {
    for (const agent of ['a', 'b', 'c', 'd']) await writeAgentCaps(kv, agent, { cpuQuota: '100%' });
    const result = await sweepAgentCaps(kv, ['a', 'c', 'not-written']);
    expect(result).toEqual({ removedAgents: ['b', 'd'], changedAgents: [] });
    expect(await keys(kv)).toEqual(['a', 'c']);
    expect(await readAgentCaps(nc, 'b')).toMatchObject({ kind: 'current', caps: {} });
    expect(await readAgentCaps(nc, 'a')).toMatchObject({ caps: { cpuQuota: '100%' } });
    // Idempotent: nothing left to remove.
    expect(await sweepAgentCaps(kv, new Set(['a', 'c']))).toEqual({
      removedAgents: [],
      changedAgents: [],
    });
  });

  it('reads a one-shot iterator (a generator) once, and keeps what it yields', async () => {
    for (const agent of ['a', 'b']) await writeAgentCaps(kv, agent, { cpuQuota: '100%' });
    const live = (function* () {
      yield 'a';
    })();
    expect((await sweepAgentCaps(kv, live)).removedAgents).toEqual(['b']);
    expect(await keys(kv)).toEqual(['a']);
  });

  it('with purge, drops the history and leaves a purge marker', async () => {
    await writeAgentCaps(kv, 'gone', { memoryMax: '1G' });
    await writeAgentCaps(kv, 'gone', { memoryMax: '2G' });
    expect((await sweepAgentCaps(kv, [], { purge: true })).removedAgents).toEqual(['gone']);
    expect((await kv.get('gone'))?.operation).toBe('PURGE');
  });

  it('only removes keys `owns` accepts (several controllers on one bucket)', async () => {
    for (const agent of ['ci-1', 'ci-2', 'other-1']) {
      await writeAgentCaps(kv, agent, { cpuQuota: '50%' });
    }
    const result = await sweepAgentCaps(kv, ['ci-1'], { owns: (a) => a.startsWith('ci-') });
    expect(result.removedAgents).toEqual(['ci-2']);
    expect(await keys(kv)).toEqual(['ci-1', 'other-1']);
  });

  it('leaves alone a key that is not an agent name', async () => {
    await kv.put('not.an.agent', new TextEncoder().encode('{}'));
    await writeAgentCaps(kv, 'dead', { cpuQuota: '50%' });
    expect((await sweepAgentCaps(kv, [])).removedAgents).toEqual(['dead']);
    expect(await keys(kv)).toEqual(['not.an.agent']);
  });

  it('reads the live set after listing: an agent that became alive meanwhile keeps its caps', async () => {
    await writeAgentCaps(kv, 'starting', { cpuQuota: '100%' });
    await writeAgentCaps(kv, 'dead', { cpuQuota: '100%' });
    const live = new Set<string>();
    // The agent becomes alive while the keys are being listed (after the sweep was called).
    const watched = new Proxy(kv, {
      get(target, prop, receiver) {
        if (prop === 'keys') {
          return async (...args: []) => {
            const iterator = await target.keys(...args);
            live.add('starting');
            return iterator;
          };
        }
        const value = Reflect.get(target, prop, receiver);
        return typeof value === 'function' ? value.bind(target) : value;
      },
    });
    expect((await sweepAgentCaps(watched, live)).removedAgents).toEqual(['dead']);
    expect(await keys(kv)).toEqual(['starting']);
  });

  it('never removes a key written again between its read and its removal (compare-and-set)', async () => {
    await writeAgentCaps(kv, 'reused', { cpuQuota: '100%' });
    await writeAgentCaps(kv, 'dead', { cpuQuota: '100%' });
    // A writer gives `reused` new caps right after the sweep read its revision.
    const racing = new Proxy(kv, {
      get(target, prop, receiver) {
        if (prop === 'get') {
          return async (key: string) => {
            const entry = await target.get(key);
            if (key === 'reused') await writeAgentCaps(target, 'reused', { cpuQuota: '200%' });
            return entry;
          };
        }
        const value = Reflect.get(target, prop, receiver);
        return typeof value === 'function' ? value.bind(target) : value;
      },
    });
    expect(await sweepAgentCaps(racing, [])).toEqual({
      removedAgents: ['dead'],
      changedAgents: ['reused'],
    });
    expect(await readAgentCaps(nc, 'reused')).toMatchObject({ caps: { cpuQuota: '200%' } });
  });

  it('refuses bad input before touching the bucket', async () => {
    await writeAgentCaps(kv, 'kept', { cpuQuota: '100%' });
    await expect(sweepAgentCaps(kv, 'kept' as never)).rejects.toThrow(TypeError);
    await expect(sweepAgentCaps(kv, [], { prune: true } as never)).rejects.toSatisfy(
      isInvalidInputError,
    );
    await expect(sweepAgentCaps(kv, [], { owns: 'ci-' as never })).rejects.toThrow(/owns/);
    await expect(sweepAgentCaps({} as never, [])).rejects.toThrow(/KV handle/);
    await expect(sweepAgentCaps(kv, [1] as never)).rejects.toThrow(/string/);
    expect(await keys(kv)).toEqual(['kept']);
  });

  it('a failure is a NatsRequestError naming what it did', async () => {
    const broken = new Proxy(kv, {
      get(target, prop, receiver) {
        if (prop === 'keys') return () => Promise.reject(new Error('boom'));
        const value = Reflect.get(target, prop, receiver);
        return typeof value === 'function' ? value.bind(target) : value;
      },
    });
    const error = await sweepAgentCaps(broken, []).catch((e: unknown) => e);
    expect(isNatsRequestError(error)).toBe(true);
    expect((error as Error).message).toMatch(/Listing the caps keys failed.*boom/);
  });
});
