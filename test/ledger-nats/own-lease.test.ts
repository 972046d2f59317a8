/**
 * OwnLease against a fake KV (pure logic): a server that lost an acknowledged
 * heartbeat (nats-server before 2.11, after a leader isolation) holds an older
 * heartbeat of this session; the lease must carry on from the revision the
 * server holds, not stay at the lost one (every refresh there conflicts, and
 * the lease is never confirmed again).
 */
import type { KV, KvEntry } from '@nats-io/kv';
import { describe, expect, it } from 'vitest';
import { systemClock } from '../../src/clock.js';
import type { CasWriter } from '../../src/ledger/nats/cas.js';
import { ServerClock } from '../../src/ledger/nats/liveness.js';
import { OwnLease } from '../../src/ledger/nats/own-lease.js';

/** One key's history as the fake server holds it. */
class FakeKey {
  revisions: Array<{ revision: number; data: string }> = [];
  next = 1;

  write(data: string, expected: number): number {
    const last = this.revisions.at(-1)?.revision ?? 0;
    if (last !== expected) {
      throw Object.assign(new Error(`wrong last sequence: ${last}`), {
        name: 'DuplicateWriteError',
      });
    }
    const revision = this.next++;
    this.revisions.push({ revision, data });
    return revision;
  }

  /** The server loses its last acknowledged write. */
  loseLast(): void {
    this.revisions.pop();
  }

  entry(revision?: number): KvEntry | null {
    const found =
      revision === undefined
        ? this.revisions.at(-1)
        : this.revisions.find((r) => r.revision === revision);
    if (!found) return null;
    return {
      operation: 'PUT',
      revision: found.revision,
      created: new Date(),
      json: () => JSON.parse(found.data),
      string: () => found.data,
    } as unknown as KvEntry;
  }
}

describe('OwnLease', () => {
  it('carries on from the revision the server holds when it lost an acknowledged heartbeat of this session', async () => {
    const keys = new Map<string, FakeKey>();
    const keyOf = (k: string) => keys.get(k) ?? keys.set(k, new FakeKey()).get(k)!;
    const kv = { get: async (k: string, o?: { revision?: number }) => keyOf(k).entry(o?.revision) };
    const cas = {
      write: async (k: string, data: string, revision: number) => keyOf(k).write(data, revision),
    };
    let now = 0;
    const monotonic = () => now;
    const lease = new OwnLease({
      kv: kv as unknown as KV,
      cas: cas as unknown as CasWriter,
      bucket: 'b',
      instanceId: 'i1',
      bootId: 'boot',
      leaseMs: 3000,
      marginMs: 1000,
      monotonic,
      serverClock: new ServerClock(monotonic),
      timers: systemClock,
      telemetry: undefined,
      onLapse: () => {},
      onRenewed: () => {},
    });
    try {
      await lease.open();
      now += 100;
      await lease.beat();
      const key = keyOf(`lease.${lease.id}`);
      expect(key.revisions.map((r) => r.revision)).toEqual([1, 2]);
      // The server lost revision 2, acknowledged to this lease.
      key.loseLast();
      now += 1500;
      expect(lease.confirmed).toBe(false);
      await lease.beat(); // conflicts at 2: the server holds our heartbeat 1
      now += 100;
      await lease.beat(); // from 1: confirmed again
      expect(lease.confirmed).toBe(true);
      expect(lease.info().health).toBe('held');
      expect(key.revisions.at(-1)?.revision).toBe(3);
    } finally {
      lease.stop();
    }
  });
});
