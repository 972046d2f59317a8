/**
 * Shared pieces of the NatsPoolLedger cross-process tests: start workers, and
 * watch every revision of a pool key checking it against the cap.
 */
import { DiscardPolicy, type StreamConfig } from '@nats-io/jetstream';
import type { KV, KvEntry } from '@nats-io/kv';
import { KvWatchInclude } from '@nats-io/kv';
import { parseDocument } from '../../src/ledger/document/codec.js';
import { checkFit } from '../../src/ledger/document/fit.js';
import type { ResourceCap } from '../../src/resources/types.js';
import type { NatsWorkerConfig } from '../fixtures/nats-ledger-worker.js';
import { type FixtureProcess, startFixture } from './processes.js';

/**
 * The stream of a KV bucket made by hand with 3 replicas that keeps every
 * revision (unlimited history), so a whole run can be read back and checked
 * after it, whatever a failover did to the watches.
 */
export function fullHistoryBucket(bucket: string): Partial<StreamConfig> & { name: string } {
  return {
    name: `KV_${bucket}`,
    subjects: [`$KV.${bucket}.>`],
    max_msgs_per_subject: -1,
    num_replicas: 3,
    allow_rollup_hdrs: true,
    deny_delete: true,
    allow_direct: false,
    discard: DiscardPolicy.New,
  };
}

/**
 * End the lease `leaseId` as a peer does when it judges it expired (or an
 * operator fences it): its heartbeat key gets the end marker.
 */
export async function fenceLeaseKey(kv: KV, leaseId: string): Promise<void> {
  const key = `lease.${leaseId}`;
  const entry = await kv.get(key);
  if (entry === null) throw new Error(`no heartbeat key ${key} to fence`);
  await kv.update(key, JSON.stringify({ ended: 'fenced', by: 'test' }), entry.revision);
}

/** Start a worker; `running` collects it for cleanup. */
export function natsWorker(
  running: FixtureProcess[],
  config: Partial<NatsWorkerConfig> &
    Pick<NatsWorkerConfig, 'servers' | 'instanceId' | 'pool' | 'cap'>,
): FixtureProcess {
  const full: NatsWorkerConfig = { mode: 'churn', cpus: 1, memBytes: 2 ** 30, ...config };
  const fixture = startFixture('nats-ledger-worker.ts', [JSON.stringify(full)]);
  running.push(fixture);
  return fixture;
}

/** What a revision watcher saw. */
export interface RevisionReport {
  revisions: number[];
  violations: string[];
  maxRows: number;
  /** Every agent id seen in a row of some revision. */
  agents: Set<string>;
  last: { revision: number; rows: number } | undefined;
  /** The agents of each revision read, when the watch was asked to keep them (`keepAgents`). */
  agentsByRevision?: Map<number, Set<string>>;
  stop(): void;
}

/**
 * Watch every revision of `pool.<pool>` (the bucket must keep enough history for
 * a slow watcher). A revision whose rows sum above `cap`, or that does not
 * parse, is a violation. When the watch stalls while the key moves on (its
 * consumer lived on a server that was killed), it resumes from the next revision.
 */
export async function watchRevisions(
  kv: KV,
  pool: string,
  cap: ResourceCap,
  options: { keepAgents?: boolean } = {},
) {
  const key = `pool.${pool}`;
  let stopped = false;
  let current: { stop(): void } | undefined;
  let lastSeen = 0;
  let lastProgress = performance.now();
  const report: RevisionReport = {
    revisions: [],
    violations: [],
    maxRows: 0,
    agents: new Set(),
    last: undefined,
    ...(options.keepAgents ? { agentsByRevision: new Map<number, Set<string>>() } : {}),
    stop: () => {
      stopped = true;
      clearInterval(stallCheck);
      current?.stop();
    },
  };
  const check = revisionChecker(pool, cap, report);
  const onEntry = (entry: KvEntry) => {
    lastProgress = performance.now();
    lastSeen = Math.max(lastSeen, entry.revision);
    check(entry);
  };
  // Set by the stall check to abandon the current watch and resume from lastSeen + 1.
  let abandon: (() => void) | undefined;
  const stallCheck = setInterval(() => {
    if (performance.now() - lastProgress < 1000) return;
    kv.get(key)
      .then((entry) => {
        if (entry && entry.revision > lastSeen) abandon?.();
      })
      .catch(() => {});
  }, 500);
  const timeout = (ms: number) => new Promise<'timeout'>((r) => setTimeout(() => r('timeout'), ms));
  void (async () => {
    while (!stopped) {
      const abandoned = new Promise<'abandon'>((resolve) => {
        abandon = () => resolve('abandon');
      });
      lastProgress = performance.now();
      const opening = kv.watch(
        lastSeen === 0
          ? { key, include: KvWatchInclude.AllHistory }
          : { key, resumeFromRevision: lastSeen + 1 },
      );
      // Opening can hang during a leader election: give up on it after a while.
      const watch = await Promise.race([opening, timeout(3000)]).catch(() => 'timeout' as const);
      if (watch === 'timeout') {
        opening.then((w) => w.stop()).catch(() => {});
        continue;
      }
      current = watch;
      const entries = watch[Symbol.asyncIterator]();
      for (;;) {
        const next = await Promise.race([entries.next(), abandoned]).catch(
          () => 'abandon' as const,
        );
        if (next === 'abandon' || next.done) break;
        onEntry(next.value);
      }
      watch.stop();
    }
  })();
  return report;
}

/**
 * Check pool document revisions one by one, in order, into `report`: a
 * revision whose rows sum above `cap`, that does not parse, that holds two
 * rows for one agent, or where an agent's row is back after it had left (agent
 * ids are never reused by the workers: a call applied twice or late) is a
 * violation; a revision given twice counts once.
 */
export function revisionChecker(
  pool: string,
  cap: ResourceCap,
  report: Pick<RevisionReport, 'revisions' | 'violations' | 'maxRows' | 'last'> &
    Partial<Pick<RevisionReport, 'agents' | 'agentsByRevision'>>,
): (entry: KvEntry) => void {
  const seen = new Set<number>();
  // Agent ids are used once: a row that left the pool and comes back is a call applied twice or late.
  let previous = new Set<string>();
  const gone = new Set<string>();
  return (entry) => {
    if (entry.operation !== 'PUT' || seen.has(entry.revision)) return;
    seen.add(entry.revision);
    report.revisions.push(entry.revision);
    try {
      const doc = parseDocument(entry.string(), { pool, location: `rev ${entry.revision}` });
      // The whole document, stale rows included, must fit: nothing over-commits even briefly.
      const fit = checkFit(pool, [], cap, {
        cpus: doc.reservations.reduce((s, r) => s + r.cpus, 0),
        memBytes: doc.reservations.reduce((s, r) => s + r.memBytes, 0),
      });
      if (!fit.ok) report.violations.push(`revision ${entry.revision}: ${JSON.stringify(fit)}`);
      report.maxRows = Math.max(report.maxRows, doc.reservations.length);
      for (const row of doc.reservations) report.agents?.add(row.agentId);
      const now = new Set<string>();
      for (const row of doc.reservations) {
        if (now.has(row.agentId)) {
          report.violations.push(`revision ${entry.revision}: agent ${row.agentId} holds two rows`);
        }
        if (gone.has(row.agentId)) {
          report.violations.push(`revision ${entry.revision}: agent ${row.agentId} came back`);
        }
        now.add(row.agentId);
      }
      for (const agent of previous) if (!now.has(agent)) gone.add(agent);
      previous = now;
      report.agentsByRevision?.set(entry.revision, now);
      report.last = { revision: entry.revision, rows: doc.reservations.length };
    } catch (error) {
      report.violations.push(`revision ${entry.revision}: ${(error as Error).message}`);
    }
  };
}
