/**
 * What one MachineLedger instance holds per pool (the agents it reserved and
 * has not released), and the lost-lease report made from it when rows of it
 * vanished although it did not release them.
 */
import { LedgerLeaseExpiredError } from '../../errors/index.js';
import type { LedgerOp, OpAnswer } from '../ops.js';
import type { LedgerDocument } from '../types.js';
import { findLostRows } from './lost.js';

/** Per pool, the agents this instance reserved and has not released. */
export class HeldRows {
  private readonly rows = new Map<string, Set<string>>();

  constructor(
    private readonly instanceId: string,
    /** The lease this instance's rows are written under (it may be a continued one). */
    private readonly leaseId: () => string,
    private readonly leaseTtlMs: number,
  ) {}

  /** The agents held in `pool` (none: `undefined`). */
  get(pool: string): Set<string> | undefined {
    return this.rows.get(pool);
  }

  /** Forget lost agents: they were reported once. */
  forget(pool: string, agentIds: readonly string[]): void {
    for (const agentId of agentIds) this.rows.get(pool)?.delete(agentId);
  }

  /** Forget everything (the ledger is closed). */
  clear(): void {
    this.rows.clear();
  }

  // Under the pool lock, before deciding: the agents this instance holds whose
  // row is gone from the document although this process did not release them
  // (a peer reaped them while this instance was stalled past its lease, or an
  // operator removed them). The report goes to the batch's first reserve or
  // reapStale call, which fails and does nothing; the other calls proceed, and
  // once the batch is written the lost agents are forgotten. Releases never
  // carry the report (failing one would strand a row), and neither do the
  // reaper's rounds: without such a call the report waits for the next batch.
  /** The batch's lost-rows report, or `undefined`. */
  lostReport(
    pool: string,
    file: string,
    doc: LedgerDocument,
    ops: LedgerOp[],
  ): { index: number; error: LedgerLeaseExpiredError } | undefined {
    const lost = findLostRows(doc, this.rows.get(pool), this.instanceId, this.leaseId(), ops);
    if (!lost) return undefined;
    return { index: lost.index, error: this.lostError(pool, file, lost.agentIds) };
  }

  /** The error that reports `lost` agents of `pool` (file `file`) gone. */
  lostError(pool: string, file: string, lost: string[]): LedgerLeaseExpiredError {
    const one = lost.length === 1;
    const names = lost.map((agentId) => JSON.stringify(agentId)).join(', ');
    return new LedgerLeaseExpiredError(
      pool,
      `Instance ${JSON.stringify(this.instanceId)} lost its reservation${one ? '' : 's'} for ${names} in pool ${JSON.stringify(pool)} (${file}): ${one ? 'the row is' : 'the rows are'} gone although this process did not release ${one ? 'it' : 'them'}. Either this process was stalled (stopped, or its event loop blocked) for longer than leaseTtlMs (${this.leaseTtlMs} ms) and a peer reaped its rows, or an operator released them or removed the ledger directory. Treat that capacity as lost: stop those agents, or reserve them again. This call did nothing; the next call proceeds.`,
      lost,
    );
  }

  /** After a successful cycle: remember what this instance now holds. */
  track(pool: string, ops: LedgerOp[], answers: OpAnswer[]): void {
    let held = this.rows.get(pool);
    ops.forEach((op, i) => {
      const answer = answers[i];
      if (!answer?.ok) return;
      if (op.kind === 'adopt' && answer.kind === 'adopt') {
        answer.value.forEach((result, j) => {
          if (!result.ok) return;
          if (!held) {
            held = new Set();
            this.rows.set(pool, held);
          }
          held.add(op.rows[j]!.agentId);
        });
      } else if (op.kind === 'reserve' && answer.kind === 'reserve' && answer.value.ok) {
        if (!held) {
          held = new Set();
          this.rows.set(pool, held);
        }
        held.add(op.row.agentId);
      } else if (op.kind === 'release') {
        held?.delete(op.agentId);
      } else if (op.kind === 'releaseInstance' && op.instanceId === this.instanceId) {
        held?.clear();
      }
    });
  }
}
