/**
 * The parts a MachineLedger is made of, assembled from its options (timings
 * checked, defaults applied), and its lock-free read of one pool.
 */

import type { Clock } from '../clock.js';
import { monotonicNow, resolveClock } from '../clock.js';
import { testHooksOf } from '../internal/test-hooks.js';
import type { ResourceCap } from '../resources/types.js';
import { checkKnownKeys, positiveOption } from './checks.js';
import type { Inbox } from './combine-waiter.js';
import { DirRecovery } from './dir-recovery.js';
import {
  emptyDocument,
  type LivenessFacts,
  parseDocument,
  partitionRows,
  sumRows,
  validatePoolName,
} from './document.js';
import { FileCycle } from './file-cycle.js';
import { defaultFs, type LedgerFs } from './fs.js';
import type { OpAnswer } from './group-commit.js';
import { HeldRows } from './held-rows.js';
import { InstanceFacts } from './instance-facts.js';
import { LeaseKeeper } from './lease-keeper.js';
import { PoolLocker } from './lock.js';
import {
  DEFAULT_LEASE_TTL_MS,
  DEFAULT_LOCK_TIMEOUT_MS,
  DEFAULT_STALE_MS,
  leaseMarginOption,
  MACHINE_LEDGER_HOOK_KEYS,
  type MachineLedgerHooks,
  type MachineLedgerOptions,
  type PoolSnapshot,
} from './machine-ledger-options.js';
import type { LedgerOp } from './ops.js';
import { isProcessAlive, readProcessStartTime } from './proc.js';
import { DEFAULT_MAX_FILE_BYTES } from './safe-fs.js';
import { readPoolFile } from './store.js';
import { sweepLeftovers } from './sweep.js';
import type { LedgerTelemetry } from './telemetry.js';
import type { LedgerDocument } from './types.js';

/** What the parts need from the ledger they make up. */
export interface PartsOwner {
  readonly instanceId: string;
  readonly leaseId: string;
  readonly caps: ReadonlyMap<string, ResourceCap>;
  readonly inboxes: Map<string, Inbox | undefined>;
  readonly telemetry: LedgerTelemetry | undefined;
  dir(): Promise<string>;
  /** The directory the ledger would use, before it is resolved (for naming the lease file). */
  expectedDir(): string;
  bootId(): string;
  closed(): boolean;
}

/** A MachineLedger's parts. */
export interface LedgerParts {
  fs: LedgerFs;
  clock: Clock;
  maxFileBytes: number;
  requestedDir: string | undefined;
  env: NodeJS.ProcessEnv;
  held: HeldRows;
  identity: InstanceFacts;
  lease: LeaseKeeper;
  locker: PoolLocker;
  cycles: FileCycle;
  /**
   * Run a batch on a pool (cross-process combining on): a ledger directory
   * found removed after a failure is made again and the batch run once more.
   */
  run(pool: string, ops: LedgerOp[]): Promise<OpAnswer[]>;
}

/**
 * Check the timings of `options`, apply the defaults and make the parts.
 *
 * @throws TypeError when a timing is out of range.
 */
export function assembleParts(options: MachineLedgerOptions, owner: PartsOwner): LedgerParts {
  const { instanceId, leaseId } = owner;
  const fs = options.fs ?? defaultFs;
  const clock = resolveClock(options.clock, options.now);
  const now = () => clock.now();
  const staleMs = Math.max(2000, positiveOption('staleMs', options.staleMs, DEFAULT_STALE_MS));
  const lockTimeoutMs = positiveOption(
    'lockTimeoutMs',
    options.lockTimeoutMs,
    DEFAULT_LOCK_TIMEOUT_MS,
  );
  const leaseTtlMs = positiveOption('leaseTtlMs', options.leaseTtlMs, DEFAULT_LEASE_TTL_MS);
  const maxFileBytes = Math.floor(
    positiveOption('maxFileBytes', options.maxFileBytes, DEFAULT_MAX_FILE_BYTES),
  );
  const hooks = testHooksOf<MachineLedgerHooks>(options);
  checkKnownKeys('MachineLedger hooks', hooks, MACHINE_LEDGER_HOOK_KEYS);
  const leaseMarginMs = leaseMarginOption(options.leaseMarginMs, leaseTtlMs);
  const held = new HeldRows(instanceId, leaseId, leaseTtlMs);
  const lease = new LeaseKeeper({
    fs,
    clock,
    leaseId,
    leaseTtlMs,
    marginMs: leaseMarginMs,
    telemetry: owner.telemetry,
    // With an injected clock (a TestClock driving a fleet), stalls are in its time too.
    monotonic: hooks.monotonic ?? (options.clock === undefined ? monotonicNow : () => clock.now()),
    body: () => `${JSON.stringify({ instanceId, pid: process.pid, bootId: owner.bootId() })}\n`,
    closed: owner.closed,
    expectedDir: owner.expectedDir,
  });
  const healthySince = () => lease.healthySince();
  const identity = new InstanceFacts({
    fs,
    instanceId,
    leaseId,
    leaseTtlMs,
    leaseMarginMs,
    healthySince,
    now,
    bootId: owner.bootId,
    probe: options.isProcessAlive ?? isProcessAlive,
    startTimeOf: options.processStartTime ?? ((pid) => readProcessStartTime(fs, pid)),
  });
  const locker = new PoolLocker(fs, clock);
  const cycles = new FileCycle({
    fs,
    locker,
    caps: owner.caps,
    held,
    inboxes: owner.inboxes,
    telemetry: owner.telemetry,
    hooks,
    instanceId,
    leaseId,
    fsync: options.fsync ?? true,
    maxFileBytes,
    staleMs,
    lockStaleMs: hooks.lockStaleMs ?? staleMs,
    lockTimeoutMs,
    dir: owner.dir,
    ensureLease: (dir, pool) => lease.ensure(dir, pool),
    confirmLease: (dir, pool) => lease.confirm(dir, pool),
    facts: (dir, doc) => identity.facts(dir, doc),
    sweepLeftovers: (dir, file) =>
      sweepLeftovers(fs, dir, file, { leaseId, staleMs, leaseTtlMs, healthySince, now }),
  });
  const recovery = new DirRecovery({
    fs,
    lease,
    locker,
    inboxes: owner.inboxes,
    dir: owner.dir,
    closed: owner.closed,
  });
  const run = async (pool: string, ops: LedgerOp[]): Promise<OpAnswer[]> => {
    const generation = recovery.generation;
    try {
      return await cycles.run(pool, ops, true);
    } catch (error) {
      if (!(await recovery.recovered(pool, generation))) throw error;
      return cycles.run(pool, ops, true);
    }
  };
  return {
    fs,
    clock,
    maxFileBytes,
    requestedDir: options.dir ?? options.explicitDir,
    env: options.env ?? process.env,
    held,
    identity,
    lease,
    locker,
    cycles,
    run,
  };
}

/**
 * Read `pool` without a lock (the file is only ever replaced whole): its live
 * and stale rows, cap and usage. `dir` undefined: the directory does not exist,
 * the pool has no rows and the given cap.
 */
export function readSnapshot(
  fs: LedgerFs,
  pool: string,
  dir: string | undefined,
  file: string,
  options: {
    cap: ResourceCap;
    maxBytes: number;
    facts: (dir: string, doc: LedgerDocument) => LivenessFacts;
  },
): PoolSnapshot {
  const text =
    dir === undefined ? undefined : readPoolFile(fs, file, { pool, maxBytes: options.maxBytes });
  const doc =
    text === undefined ? emptyDocument(options.cap) : parseDocument(text, { pool, location: file });
  const { live, stale } =
    dir === undefined
      ? { live: [], stale: [] }
      : partitionRows(doc.reservations, options.facts(dir, doc));
  return {
    pool,
    file,
    exists: text !== undefined,
    cap: doc.cap,
    live,
    stale,
    usage: sumRows(live),
  };
}

/** The pools among the names in a ledger directory (`<pool>.json`, valid names), sorted. */
export function poolNames(names: readonly string[]): string[] {
  return names
    .filter((name) => name.endsWith('.json') && !name.startsWith('.'))
    .map((name) => name.slice(0, -'.json'.length))
    .filter((name) => {
      try {
        validatePoolName(name);
        return true;
      } catch {
        return false;
      }
    })
    .sort();
}
