/**
 * Group commit: calls on one pool that arrive while a commit of that pool is
 * running wait, and are then committed together in one read-decide-write
 * cycle; each still gets its own answer, in call order. Shared by ledger
 * backends; the backend supplies the cycle.
 */

import { sleep } from '../clock.js';

/**
 * One call's answer from a commit: a value, or an error for that call alone.
 */
export type OpAnswer =
  | {
      /** The call succeeded. */
      ok: true;
      /** Its answer. */
      value: unknown;
    }
  | {
      /** The call failed. */
      ok: false;
      /** What it throws. */
      error: unknown;
    };

interface Pending<Op> {
  op: Op;
  resolve(value: unknown): void;
  reject(error: unknown): void;
}

interface PoolQueue<Op> {
  pending: Pending<Op>[];
  running: boolean;
}

/** Per-pool queues feeding batches of calls to one commit function. */
export class GroupCommit<Op> {
  private readonly queues = new Map<string, PoolQueue<Op>>();

  /**
   * @param commit - Runs one cycle for `ops` on `pool` and answers each, in order.
   *   A rejection fails every call of the batch.
   */
  constructor(private readonly commit: (pool: string, ops: Op[]) => Promise<OpAnswer[]>) {}

  /** Queue `op` on `pool`; resolves or rejects with its own answer. */
  enqueue(pool: string, op: Op): Promise<unknown> {
    let queue = this.queues.get(pool);
    if (!queue) {
      queue = { pending: [], running: false };
      this.queues.set(pool, queue);
    }
    const promise = new Promise<unknown>((resolve, reject) => {
      queue.pending.push({ op, resolve, reject });
    });
    if (!queue.running) void this.drain(pool, queue);
    return promise;
  }

  /** The pools that have had calls. */
  pools(): string[] {
    return [...this.queues.keys()];
  }

  /** Resolves once no pool has a commit running. */
  async idle(): Promise<void> {
    while ([...this.queues.values()].some((queue) => queue.running)) {
      await sleep(5);
    }
  }

  private async drain(pool: string, queue: PoolQueue<Op>): Promise<void> {
    queue.running = true;
    try {
      while (queue.pending.length > 0) {
        const batch = queue.pending.splice(0);
        try {
          const answers = await this.commit(
            pool,
            batch.map((item) => item.op),
          );
          batch.forEach((item, i) => {
            const answer = answers[i]!;
            if (answer.ok) item.resolve(answer.value);
            else item.reject(answer.error);
          });
        } catch (error) {
          for (const item of batch) item.reject(error);
        }
      }
    } finally {
      queue.running = false;
    }
  }
}
