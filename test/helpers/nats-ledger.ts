/**
 * Shared pieces of the NatsPoolLedger cross-process tests: start workers, and
 * watch every revision of a pool key checking it against the cap.
 */
import type { KV } from '@nats-io/kv';
import { KvWatchInclude } from '@nats-io/kv';
import { checkFit, parseDocument } from '../../src/ledger/index.js';
import type { ResourceCap } from '../../src/resources/types.js';
import type { NatsWorkerConfig } from '../fixtures/nats-ledger-worker.js';
import { type FixtureProcess, startFixture } from './processes.js';

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
  last: { revision: number; rows: number } | undefined;
  stop(): void;
}

/**
 * Watch every revision of `pool.<pool>` (the bucket must keep enough history for
 * a slow watcher). A revision whose live sum exceeds `cap`, or that does not
 * parse, is a violation.
 */
export async function watchRevisions(kv: KV, pool: string, cap: ResourceCap) {
  const watch = await kv.watch({ key: `pool.${pool}`, include: KvWatchInclude.AllHistory });
  const report: RevisionReport = {
    revisions: [],
    violations: [],
    maxRows: 0,
    last: undefined,
    stop: () => watch.stop(),
  };
  void (async () => {
    for await (const entry of watch) {
      if (entry.operation !== 'PUT') continue;
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
        report.last = { revision: entry.revision, rows: doc.reservations.length };
      } catch (error) {
        report.violations.push(`revision ${entry.revision}: ${(error as Error).message}`);
      }
    }
  })();
  return report;
}
