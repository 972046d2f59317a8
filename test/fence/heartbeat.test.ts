import { natsHeartbeatReader } from 'scaler-primitives/fence';
import { describe, expect, it } from 'vitest';
import type { HeartbeatEntry } from '../../src/fence/heartbeat.js';

const entry = (revision: number, value: string, operation = 'PUT'): HeartbeatEntry => ({
  revision,
  operation,
  string: () => value,
});

function bucket(answer: () => HeartbeatEntry | null | Error) {
  const keys: string[] = [];
  return {
    keys,
    async get(key: string) {
      keys.push(key);
      const value = answer();
      if (value instanceof Error) throw value;
      return value;
    },
  };
}

describe('natsHeartbeatReader', () => {
  it('answers the revision of a live heartbeat, read from the given key', async () => {
    const kv = bucket(() => entry(42, JSON.stringify({ instanceId: 'a', leaseMs: 6000 })));
    expect(await natsHeartbeatReader(kv, 'lease.6f1c')()).toBe(42);
    expect(kv.keys).toEqual(['lease.6f1c']);
    // A value that is not JSON is judged by its revision alone.
    expect(
      await natsHeartbeatReader(
        bucket(() => entry(7, 'x')),
        'k',
      )(),
    ).toBe(7);
  });

  it.each<[string, HeartbeatEntry | null]>([
    ['a missing key', null],
    ['a deleted key', entry(43, '', 'DEL')],
    ['a purged key', entry(44, '', 'PURGE')],
    ['an end marker (closed)', entry(45, JSON.stringify({ ended: 'closed', by: 'a' }))],
    ['an end marker (fenced by a peer)', entry(46, JSON.stringify({ ended: 'fenced', by: 'b' }))],
  ])('answers undefined (ended) for %s', async (_name, value) => {
    expect(
      await natsHeartbeatReader(
        bucket(() => value),
        'k',
      )(),
    ).toBeUndefined();
  });

  it('lets a failed get reject (the fence counts it as no renewal)', async () => {
    await expect(
      natsHeartbeatReader(
        bucket(() => new Error('TIMEOUT')),
        'k',
      )(),
    ).rejects.toThrow('TIMEOUT');
  });

  it('refuses a bucket without get and an empty key', () => {
    expect(() => natsHeartbeatReader({} as never, 'k')).toThrow(/`kv` to be a KV bucket/);
    expect(() =>
      natsHeartbeatReader(
        bucket(() => null),
        '',
      ),
    ).toThrow(/`key` to be a non-empty/);
  });
});
