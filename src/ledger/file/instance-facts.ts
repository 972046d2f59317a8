/**
 * Who one MachineLedger instance is on this host (the rows it writes), and the
 * liveness facts it gathers about the rows of a document for the pure
 * staleness rule (`document/verdict.ts`): one probe per pid and per lease.
 */
import type { LeaseState, LivenessFacts, ProcessState } from '../document/verdict.js';
import type { LedgerFs } from '../fs.js';
import { judgeProcess } from '../proc.js';
import type { LedgerDocument, ReservationRow } from '../types.js';
import { leaseState } from './lease.js';

/** What the facts are gathered with. */
export interface InstanceIdentity {
  readonly fs: LedgerFs;
  readonly instanceId: string;
  readonly leaseId: string;
  readonly leaseTtlMs: number;
  /** What is added to a peer's lease window before its rows are stale. */
  readonly leaseMarginMs: number;
  /**
   * Since when this instance has renewed its own lease without a break
   * (`undefined`: it is not renewing now, and judges no peer expired).
   */
  healthySince(): number | undefined;
  /** The host's boot id. */
  bootId(): string;
  /** The ledger's clock, epoch ms. */
  now(): number;
  /** Whether a pid exists. */
  probe(pid: number): boolean;
  /** A process's start time in clock ticks since boot. */
  startTimeOf(pid: number): number | undefined;
}

/** This instance's rows and what it knows of other rows' owners. */
export class InstanceFacts {
  private ownStartTime: number | undefined;

  constructor(private readonly id: InstanceIdentity) {}

  /** A new row of this instance. */
  row(agentId: string, cpus: number, memBytes: number): ReservationRow {
    const row: ReservationRow = {
      instanceId: this.id.instanceId,
      pid: process.pid,
      bootId: this.id.bootId(),
      agentId,
      cpus,
      memBytes,
      reservedAt: this.id.now(),
    };
    const start = this.selfStartTime();
    if (start !== undefined) row.pidStartTime = start;
    row.leaseId = this.id.leaseId;
    return row;
  }

  /** The liveness facts the pure rule needs for `doc`, read from `dir` and `/proc`. */
  facts(dir: string, doc: LedgerDocument): LivenessFacts {
    const { id } = this;
    const bootId = id.bootId();
    const leases = new Map<string, LeaseState>();
    const processes = new Map<string, ProcessState>();
    const now = id.now();
    const judgement = {
      ttlMs: id.leaseTtlMs,
      marginMs: id.leaseMarginMs,
      healthySince: id.healthySince(),
    };
    for (const row of doc.reservations) {
      if (row.bootId !== bootId) continue;
      if (row.instanceId === id.instanceId) {
        const key = `${row.pid}:${row.pidStartTime ?? ''}`;
        if (!processes.has(key)) processes.set(key, this.processStateOf(row));
      } else if (typeof row.leaseId === 'string' && !leases.has(row.leaseId)) {
        leases.set(
          row.leaseId,
          row.leaseId === id.leaseId
            ? 'fresh'
            : leaseState(id.fs, dir, row.leaseId, now, judgement),
        );
      }
    }
    return {
      bootId,
      instanceId: id.instanceId,
      processState: (row) => processes.get(`${row.pid}:${row.pidStartTime ?? ''}`) ?? 'alive',
      leaseState: (leaseId) => leases.get(leaseId) ?? 'unknown',
    };
  }

  private selfStartTime(): number | undefined {
    this.ownStartTime ??= this.id.startTimeOf(process.pid);
    return this.ownStartTime;
  }

  private processStateOf(row: ReservationRow): ProcessState {
    const state = judgeProcess(
      { pid: row.pid, startTime: row.pidStartTime },
      { pid: process.pid, startTime: () => this.selfStartTime() },
      (pid) => this.id.probe(pid),
      (pid) => this.id.startTimeOf(pid),
    );
    return state === 'gone' || state === 'reused' ? state : 'alive';
  }
}
