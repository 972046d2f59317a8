/**
 * The ledger's instruments: lock cycle, wait and hold totals per pool (and,
 * with `lockHistograms`, the wait and hold histograms), operation and row
 * counters (Tallies: totalled in memory, observed at collection), and the
 * usage gauges, which report the pool document the ledger last read.
 */
import { monotonicNow } from '../clock.js';
import {
  attributes,
  KeyedCache,
  type KeyMaker,
  LOCK_BUCKETS,
  type OtelAttributes,
  type OtelHistogram,
  type OtelInstrumentOptions,
  type OtelMeter,
  type OtelObservable,
  type OtelObservableCallback,
  Tally,
} from '../internal/telemetry/index.js';
import type { ResourceCap } from '../resources/types.js';
import type { ReservationRow } from './types.js';

/** The last read of a pool: what the usage gauges report. @internal */
export interface PoolView {
  cap: ResourceCap;
  rows: readonly ReservationRow[];
  /** When it was read (monotonic ms). */
  at: number;
}

/**
 * The lock cycles of one pool, totalled in memory and observed at collection:
 * what `scaler.ledger.lock.cycles`, `.wait.time` and `.hold.time` report.
 * @internal
 */
export interface LockTotals {
  readonly attributes: OtelAttributes;
  /** Lock acquisitions (one read-decide-write cycle each). */
  cycles: number;
  /** Seconds waited for the lock, summed. */
  waitSeconds: number;
  /** Seconds the lock was held, summed. */
  holdSeconds: number;
}

/** The attributes of a pool's points, with `extra` (undefined values left out). */
function describe(backend: string, pool: string, extra?: OtelAttributes): OtelAttributes {
  return attributes({ 'scaler.pool': pool, 'scaler.ledger.backend': backend, ...extra });
}

/** The instruments of one ledger. @internal */
export class LedgerInstruments {
  /** Only with `lockHistograms` (one SDK record, attributes hashed, per lock cycle). */
  readonly lockWait: OtelHistogram | undefined;
  /** Only with `lockHistograms`. */
  readonly lockHold: OtelHistogram | undefined;
  /** Keyed by (pool, operation, result, error type). */
  readonly operations: Tally;
  /** Keyed by (pool, stale reason). */
  readonly reaped: Tally;
  /** Keyed by pool. */
  readonly lost: Tally;
  /** Keyed by pool. */
  readonly conflicts: Tally;
  /** Keyed by lease event type. */
  readonly leaseEvents: Tally;
  readonly #poolAttributes: KeyedCache<OtelAttributes>;
  /** Keyed by pool. */
  readonly #lockTotals: KeyedCache<LockTotals>;
  readonly #lockEntries: LockTotals[] = [];
  readonly #callbacks: Array<[OtelObservable, OtelObservableCallback]> = [];
  readonly #tallies: Tally[] = [];
  readonly #views: ReadonlyMap<string, PoolView>;

  /**
   * @param views - The last read of each pool, read by the gauges at collection.
   * @param lockHistograms - Also record the lock wait and hold histograms.
   */
  constructor(
    meter: OtelMeter,
    backend: string,
    views: ReadonlyMap<string, PoolView>,
    lockHistograms: boolean,
  ) {
    this.#views = views;
    this.#poolAttributes = new KeyedCache((pool) => describe(backend, pool as string));
    this.#lockTotals = new KeyedCache(
      (pool) => ({
        attributes: this.pool(pool as string),
        cycles: 0,
        waitSeconds: 0,
        holdSeconds: 0,
      }),
      (totals) => this.#lockEntries.push(totals),
    );
    const histogram = (name: string, description: string) =>
      meter.createHistogram(name, {
        description,
        unit: 's',
        advice: { explicitBucketBoundaries: LOCK_BUCKETS },
      });
    if (lockHistograms) {
      this.lockWait = histogram(
        'scaler.ledger.lock.wait.duration',
        'Time an operation batch waited for the pool lock (file ledger only).',
      );
      this.lockHold = histogram(
        'scaler.ledger.lock.hold.duration',
        'Time the pool lock was held for one read-decide-write cycle (file ledger only).',
      );
    }
    this.#lockCounter(
      meter.createObservableCounter('scaler.ledger.lock.cycles', {
        description:
          'Pool lock acquisitions, one per read-decide-write cycle of a batch of calls (file ledger only).',
        unit: '{cycle}',
      }),
      (totals) => totals.cycles,
    );
    this.#lockCounter(
      meter.createObservableCounter('scaler.ledger.lock.wait.time', {
        description:
          'Time batches of calls waited for the pool lock, summed; over scaler.ledger.lock.cycles, the mean wait (file ledger only).',
        unit: 's',
      }),
      (totals) => totals.waitSeconds,
    );
    this.#lockCounter(
      meter.createObservableCounter('scaler.ledger.lock.hold.time', {
        description:
          'Time the pool lock was held, summed; over scaler.ledger.lock.cycles, the mean hold (file ledger only).',
        unit: 's',
      }),
      (totals) => totals.holdSeconds,
    );
    const tally = (
      name: string,
      options: OtelInstrumentOptions,
      describe: KeyMaker<OtelAttributes>,
    ): Tally => {
      const made = new Tally(meter, name, options, describe);
      this.#tallies.push(made);
      return made;
    };
    this.operations = tally(
      'scaler.ledger.operations',
      { description: 'Ledger calls answered, by operation and result.', unit: '{operation}' },
      (pool, operation, result, type) =>
        describe(backend, pool as string, {
          'scaler.ledger.operation': operation,
          'scaler.result': result,
          'error.type': type,
        }),
    );
    this.reaped = tally(
      'scaler.ledger.rows.reaped',
      { description: 'Stale rows removed from a pool document, by reason.', unit: '{row}' },
      (pool, reason) => describe(backend, pool as string, { 'scaler.stale.reason': reason }),
    );
    this.lost = tally(
      'scaler.ledger.reservations.lost',
      {
        description:
          'Rows of this instance found gone although it did not release them (its lease lapsed, or an operator removed them).',
        unit: '{reservation}',
      },
      (pool) => this.pool(pool as string),
    );
    this.conflicts = tally(
      'scaler.ledger.cas.conflicts',
      {
        description:
          'Compare-and-set writes that lost to another writer and were retried (NATS ledger only).',
        unit: '{conflict}',
      },
      (pool) => this.pool(pool as string),
    );
    this.leaseEvents = tally(
      'scaler.ledger.lease.events',
      {
        description:
          "Changes of this instance's own lease: lease-at-risk, lease-lost, lease-renewed.",
        unit: '{event}',
      },
      (type) => attributes({ 'scaler.ledger.backend': backend, 'scaler.lease.event': type }),
    );
    this.#observe(
      meter.createObservableGauge('scaler.ledger.cpu.reserved', {
        description: 'CPU held by the live rows of the pool (every process), as last read.',
        unit: '{cpu}',
      }),
      (view) => cpuSum(view.rows),
    );
    this.#observe(
      meter.createObservableGauge('scaler.ledger.memory.reserved', {
        description: 'Memory held by the live rows of the pool (every process), as last read.',
        unit: 'By',
      }),
      (view) => view.rows.reduce((total, row) => total + row.memBytes, 0),
    );
    this.#observe(
      meter.createObservableGauge('scaler.ledger.cpu.cap', {
        description: "The pool's CPU cap, as last read (absent when uncapped).",
        unit: '{cpu}',
      }),
      (view) => view.cap.maxCpu,
    );
    this.#observe(
      meter.createObservableGauge('scaler.ledger.memory.cap', {
        description: "The pool's memory cap, as last read (absent when uncapped).",
        unit: 'By',
      }),
      (view) => view.cap.maxMemoryBytes,
    );
    this.#observe(
      meter.createObservableGauge('scaler.ledger.agents', {
        description: 'Live rows (agents) in the pool, as last read.',
        unit: '{agent}',
      }),
      (view) => view.rows.length,
    );
    this.#observe(
      meter.createObservableGauge('scaler.ledger.usage.age', {
        description: 'How old the pool document the usage gauges report is.',
        unit: 's',
      }),
      (view) => (monotonicNow() - view.at) / 1000,
    );
  }

  /** The attributes of a pool's points (made once per pool). */
  pool(pool: string): OtelAttributes {
    return this.#poolAttributes.get(pool);
  }

  /** The lock totals of a pool (made once per pool). */
  lock(pool: string): LockTotals {
    return this.#lockTotals.get(pool);
  }

  #lockCounter(counter: OtelObservable, value: (totals: LockTotals) => number): void {
    const callback: OtelObservableCallback = (result) => {
      for (const totals of this.#lockEntries) result.observe(value(totals), totals.attributes);
    };
    counter.addCallback(callback);
    this.#callbacks.push([counter, callback]);
  }

  #observe(gauge: OtelObservable, value: (view: PoolView) => number | undefined): void {
    const callback: OtelObservableCallback = (result) => {
      for (const [pool, view] of this.#views) {
        const v = value(view);
        if (v !== undefined) result.observe(v, this.pool(pool));
      }
    };
    gauge.addCallback(callback);
    this.#callbacks.push([gauge, callback]);
  }

  /** Stop reporting (the instruments stay with the meter). */
  close(): void {
    for (const [gauge, callback] of this.#callbacks.splice(0)) gauge.removeCallback(callback);
    for (const tally of this.#tallies.splice(0)) tally.close();
  }
}

// Summed in millicores, so 0.1 + 0.2 reads 0.3.
function cpuSum(rows: readonly ReservationRow[]): number {
  let total = 0;
  for (const row of rows) total += Math.round(row.cpus * 1000);
  return total / 1000;
}
