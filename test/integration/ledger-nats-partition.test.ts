/**
 * NatsPoolLedger under network partitions: one round of the nemesis of
 * test/helpers/nats-partition.ts (a 3-node cluster and four workers in network
 * namespaces: the stream leader isolated, a bridge split, a worker paused past
 * its lease, the combiner killed). The soak repeats it: `npm run bench -- nats-partition`.
 *
 * Asserted: no grant under a fenced lease, never over the cap, no row left that
 * no caller holds, every call answered within its timeout, every live worker
 * answering again after each heal, a grant soon after each heal.
 */
import { describe, expect, it } from 'vitest';
import {
  describeRound,
  FIRST_GRANT_BOUND_MS,
  LEADER_WAIT_MS,
  runPartitionRound,
  TIMEOUT_MS,
} from '../helpers/nats-partition.js';
import { hasSystem } from '../helpers/system.js';

const ok = hasSystem(['nats-server', 'nft', 'ip', 'root'], 'NatsPoolLedger under partitions');

// nats-server before 2.11 (2.9.10 here) elects a new stream leader when a node cut off
// rejoins (its term went up while it was alone), and loses or blocks writes around leader
// changes (docs/ledger.md, "Server version"): for seconds no write is acknowledged, whatever
// the clients do (the first grant came within 2 s of 31 of 40 heals in the soak, within 8.6 s
// of the rest but two, when the stream had no leader for 10-30 s; bench/RESULTS.md). A stream
// with a leader can still take no write for a while: one CI run saw the first grant 24.5 s
// after the leader came back. So the round waits after each heal until the stream has a leader
// again, the observer writes a key of its own every 250 ms, and the bound asserted here runs
// from the first write the stream took after its leader came back (it tells a working ledger
// from one frozen after a heal, as it was: no grant for the rest of a run); the figures from
// the heal and from the leader are printed. The next fault starts only once the bound has
// passed (FIRST_GRANT_BOUND_MS in the helper): a CI run once measured 20.4 s across the next
// fault, whose stream had no leader for 9 s of it.

function olderThan(version: string, than: [number, number, number]): boolean {
  const parts = version.split('.').map(Number);
  if (parts.length !== 3 || parts.some((n) => !Number.isInteger(n))) return false;
  for (let i = 0; i < 3; i++) if (parts[i] !== than[i]) return parts[i]! < than[i]!;
  return false;
}

describe.runIf(ok)('NatsPoolLedger under partitions (network namespaces)', () => {
  it('leader isolated, bridge split, worker paused, combiner killed: no grant under a fenced lease, never over the cap, no orphan row, every call answered in time, every worker answering again', async () => {
    const round = await runPartitionRound({ log: (line) => console.log(line) });
    console.log(`partition round: ${describeRound(round)}`);
    for (const heal of round.heals)
      console.log(`${heal.what} (grants/refused/other per s): ${heal.timeline}`);

    expect(round.fencedGrants).toEqual([]);
    expect(round.overCap).toBe(0);
    expect(round.revisions).toBeGreaterThan(50);
    expect(round.orphans).toEqual([]);
    // Every call answered within its timeout (plus 1 s for timers late on a loaded machine).
    expect(round.lateCalls, `timeoutMs ${TIMEOUT_MS}`).toEqual([]);
    // What the servers did not do after a heal: servers before 2.11 may fail so
    // (docs/ledger.md, "Server version"), logged there; a failure on a newer server.
    const older = olderThan(round.serverVersion, [2, 11, 0]);
    const serversDidNot = (line: string): void => {
      if (!older) throw new Error(line);
      console.log(`nats-server ${round.serverVersion}: ${line}; liveness not judged`);
    };
    for (const heal of round.heals) {
      if (!Number.isFinite(heal.leaderFoundMs)) {
        // No stream leader again within LEADER_WAIT_MS: no client can be granted then.
        serversDidNot(`${heal.what}: the stream had no leader for ${LEADER_WAIT_MS} ms after it`);
        continue;
      }
      // Every call answers (above); every live worker is granted or refused again once the
      // stream has a leader, and a grant follows soon after the stream takes writes again
      // (the ledger's part of the delay).
      expect(heal.never, `${heal.what}: workers never granted or refused again`).toEqual([]);
      if (Number.isNaN(heal.afterWritableMs)) {
        // No write of the observer's taken after the leader came back, to the end of the
        // round: no client can be granted then.
        serversDidNot(`${heal.what}: the stream took no write after its leader came back`);
        continue;
      }
      if (
        heal.afterWritableMs === Number.POSITIVE_INFINITY &&
        heal.watchedMs < FIRST_GRANT_BOUND_MS
      ) {
        // The stream took its first write so late that the window ended before the bound.
        serversDidNot(
          `${heal.what}: the stream took its first write only ${heal.watchedMs} ms before the next fault`,
        );
        continue;
      }
      expect(heal.afterWritableMs, `${heal.what}: first grant after a write`).toBeLessThan(
        FIRST_GRANT_BOUND_MS,
      );
    }
  }, 420_000);
});
