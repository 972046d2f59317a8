import { describe, expect, it } from 'vitest';
import type { CasWriter } from '../../src/ledger/nats/cas.js';
import { ServerClock } from '../../src/ledger/nats/liveness.js';
import { PeerLeases } from '../../src/ledger/nats/peer-leases.js';

/** A heartbeat entry of lease `id` as the KV returns it, stamped `created` (server ms). */
function heartbeat(id: string, created: number, body: object = { leaseMs: 30_000 }) {
  return {
    key: `lease.${id}`,
    operation: 'PUT' as const,
    created: new Date(created),
    revision: 1,
    json: () => body,
    string: () => JSON.stringify(body),
  };
}

/** A watch whose entries the test pushes. */
function pushWatch() {
  const queue: unknown[] = [];
  let wake: (() => void) | undefined;
  let stopped = false;
  return {
    push(entry: unknown) {
      queue.push(entry);
      wake?.();
    },
    stop() {
      stopped = true;
      wake?.();
    },
    async *[Symbol.asyncIterator]() {
      while (!stopped) {
        if (queue.length === 0) await new Promise<void>((r) => (wake = r));
        while (queue.length > 0) yield queue.shift();
      }
    },
  };
}

describe('PeerLeases: the watch of the heartbeat keys', () => {
  function setUp(watchAttempts: Array<'fail' | ReturnType<typeof pushWatch>>) {
    let now = 0;
    const monotonic = () => now;
    const clock = new ServerClock(monotonic);
    clock.anchor(1_000_000, 0, 0);
    let reads = 0;
    let watches = 0;
    const kv = {
      get: async (key: string) => {
        reads++;
        return heartbeat(key.slice('lease.'.length), 1_000_000);
      },
      watch: async () => {
        const next = watchAttempts[watches++];
        if (next === undefined || next === 'fail') throw new Error('permission denied');
        return next;
      },
    };
    const peers = new PeerLeases({
      kv: kv as never,
      cas: {} as CasWriter,
      leaseMs: 30_000,
      marginMs: 3000,
      healthySince: () => 1_000_000,
      clock,
      ownLeaseId: () => 'own',
      fencedBody: () => '{"ended":"fenced"}',
      monotonic,
    });
    return {
      peers,
      reads: () => reads,
      watches: () => watches,
      advance: (ms: number) => {
        now += ms;
      },
    };
  }

  it('starts with the first judgement, not before; routing reads a key and does not start it', async () => {
    const watch = pushWatch();
    const t = setUp([watch]);
    expect(await t.peers.routingState('a')).toBe('fresh');
    expect(t.watches()).toBe(0);
    // What routing read does not serve a judgement: the key is read again, after the watch started.
    expect(await t.peers.state('a')).toBe('fresh');
    expect(t.watches()).toBe(1);
    expect(t.reads()).toBe(2);
    // Once watched, an end marker counts at once, without a read.
    watch.push(heartbeat('a', 1_000_100, { ended: 'closed' }));
    await new Promise((r) => setTimeout(r, 0));
    expect(await t.peers.state('a')).toBe('expired');
    expect(t.reads()).toBe(2);
    t.peers.stop();
  });

  it('a watch that failed to start is started again by a judgement a while later', async () => {
    const watch = pushWatch();
    const t = setUp(['fail', watch]);
    expect(await t.peers.state('a')).toBe('fresh');
    expect(t.watches()).toBe(1);
    // Meanwhile leases are judged by reading their keys once per window (as without a watch).
    expect(await t.peers.state('a')).toBe('fresh');
    expect(t.reads()).toBe(1);
    expect(t.watches()).toBe(1);
    t.advance(5000);
    expect(await t.peers.state('a')).toBe('fresh');
    expect(t.watches()).toBe(2);
    await new Promise((r) => setTimeout(r, 0));
    watch.push(heartbeat('a', 1_000_100, { ended: 'fenced' }));
    await new Promise((r) => setTimeout(r, 0));
    expect(await t.peers.state('a')).toBe('expired');
    t.peers.stop();
  });
});
