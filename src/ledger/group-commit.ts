/**
 * Group commit: calls on one pool that arrive while a commit of that pool is
 * running wait, and are then committed together in one read-decide-write
 * cycle; each still gets its own answer, in call order. Shared by ledger
 * backends; the backend supplies the cycle.
 */

import { sleep } from '../clock.js';

/** One call's answer `A` from a commit, or the error for that call alone. */
export type Settled<A> = (A & { ok: true }) | { ok: false; error: unknown };

interface Pending<Op, A> {
  op: Op;
  resolve(answer: A): void;
  reject(error: unknown): void;
}

interface PoolQueue<Op, A> {
  pending: Pending<Op, A>[];
  running: boolean;
}

/** Per-pool queues feeding batches of calls to one commit function. */
export class GroupCommit<Op, A> {
  private readonly queues = new Map<string, PoolQueue<Op, A>>();

  /**
   * @param commit - Runs one cycle for `ops` on `pool` and answers each, in order.
   *   A rejection fails every call of the batch.
   */
  constructor(private readonly commit: (pool: string, ops: Op[]) => Promise<Settled<A>[]>) {}

  /** Queue `op` on `pool`; resolves or rejects with its own answer. */
  enqueue(pool: string, op: Op): Promise<A> {
    let queue = this.queues.get(pool);
    if (!queue) {
      queue = { pending: [], running: false };
      this.queues.set(pool, queue);
    }
    const promise = new Promise<A>((resolve, reject) => {
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

  private async drain(pool: string, queue: PoolQueue<Op, A>): Promise<void> {
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
            if (answer.ok) item.resolve(answer);
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
