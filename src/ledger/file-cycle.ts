/**
 * One locked read-decide-write cycle of the file ledger for a batch of calls
 * on one pool, with cross-process combining (see `combine.ts`): a batch that
 * finds the lock taken posts its calls and waits for a holder's answer, and a
 * holder applies its own calls and every posted request in start order, in
 * one write and one fsync.
 */
import { join } from 'node:path';
import { sleep, systemClock } from '../clock.js';
import { LedgerLockCompromisedError } from '../errors.js';
import type { ResourceCap } from '../resources/types.js';
import {
  batchStamp,
  type ClaimedRequest,
  type CombinedAnswer,
  claimPending,
  combinablePool,
  combineDirPath,
  prepareCombineDir,
  wakeOldest,
} from './combine.js';
import { publishStaged, stageAnswers } from './combine-answers.js';
import { answerTexts, failAnswers, planCombined, splitAnswers } from './combine-plan.js';
import { Inbox, PostedRequest, redo } from './combine-waiter.js';
import { MAX_FORWARDED_OPS } from './combine-wire.js';
import {
  assertCap,
  type DocumentSource,
  emptyDocument,
  type LivenessFacts,
  parseDocument,
  partitionRows,
  serializeDocument,
} from './document.js';
import type { LedgerFs } from './fs.js';
import type { OpAnswer } from './group-commit.js';
import type { HeldRows } from './held-rows.js';
import type { LockHandle, PoolLocker, WaitHooks } from './lock.js';
import type { MachineLedgerHooks } from './machine-ledger-options.js';
import { applyBatch, type LedgerOp } from './ops.js';
import { checkWriteSize, readPoolFile, syncDir } from './store.js';
import type { LedgerTelemetry } from './telemetry.js';
import type { LedgerDocument } from './types.js';

// A posted waiter behind a holder that combines looks at the lock again after
// DEFER_MS to 2 * DEFER_MS (jittered) unless its answer or a wake-up came first.
// With a watched inbox the answer and the releasing holder's touch wake it, so
// the bound covers a wake-up that came while it was not sleeping yet, and a
// holder that died; looking costs it two syscalls (its answer, an lstat of the
// lock), so the bound can stay short.
const DEFER_MS = 4;
const WATCHED_DEFER_MS = 8;

/** Where a cycle runs: the pool, its files, and the held lock. */
interface CycleWhere {
  pool: string;
  dir: string;
  file: string;
  source: DocumentSource;
  registered: ResourceCap | undefined;
  combineDir: string | undefined;
  handle: LockHandle;
}

/** What one cycle did. */
interface CycleResult {
  /** The answers to the cycle's own calls. */
  answers: OpAnswer[];
  /** The pool file was replaced. */
  wrote: boolean;
  /** ...and the directory fsynced under the lock. */
  synced: boolean;
  /** The staged answers, to remove once the lock is released (only when every answer was posted). */
  stagedFile: string | undefined;
}

/** What a cycle needs from its MachineLedger. */
export interface CycleHost {
  readonly fs: LedgerFs;
  readonly locker: PoolLocker;
  readonly caps: ReadonlyMap<string, ResourceCap>;
  readonly held: HeldRows;
  /** Per pool, this instance's inbox (undefined: the combining directory is not usable). */
  readonly inboxes: Map<string, Inbox | undefined>;
  readonly telemetry: LedgerTelemetry | undefined;
  readonly hooks: Partial<MachineLedgerHooks>;
  readonly instanceId: string;
  readonly leaseId: string;
  readonly fsync: boolean;
  readonly maxFileBytes: number;
  readonly staleMs: number;
  readonly lockStaleMs: number;
  readonly lockTimeoutMs: number;
  dir(): Promise<string>;
  /** Make or renew this instance's lease before a cycle (see `LeaseKeeper.ensure`). */
  ensureLease(dir: string, pool: string): Promise<void>;
  /** Right before the pool file is written: the lease is confirmed and its file exists, or this throws. */
  confirmLease(dir: string, pool: string): void;
  facts(dir: string, doc: LedgerDocument): LivenessFacts;
  sweepLeftovers(dir: string, file: string): void;
}

/** Runs the locked cycles of one MachineLedger. */
export class FileCycle {
  constructor(private readonly host: CycleHost) {}

  /**
   * Run `ops` on `pool`: take the lock (or have a holder apply them, when
   * `combine`), read, decide, write once, answer each call in order.
   */
  async run(pool: string, ops: LedgerOp[], combine: boolean): Promise<OpAnswer[]> {
    let deadline: number | undefined;
    for (;;) {
      try {
        return await this.attempt(pool, ops, combine);
      } catch (error) {
        // Our lock was taken over before our write, so we wrote nothing. But a
        // call marked maybe-applied was claimed by a holder that may have
        // written it before it went silent: "nothing was written, retry" would
        // be false for it (a retried release would find its row gone and say
        // it held none; a reserve would leave a row its caller never heard
        // of). So such calls are done again here, with their marks, for as
        // long as one lock timeout allows.
        if (!(error instanceof LedgerLockCompromisedError) || !ops.some(maybeApplied)) throw error;
        deadline ??= systemClock.now() + this.host.lockTimeoutMs;
        if (systemClock.now() > deadline) throw mayHaveBeenApplied(pool, error);
      }
    }
  }

  // One try of run(): the lock (or a holder's answer), then the cycle.
  private async attempt(pool: string, ops: LedgerOp[], combine: boolean): Promise<OpAnswer[]> {
    const stamp = batchStamp();
    const dir = await this.host.dir();
    await this.host.ensureLease(dir, pool);
    const file = join(dir, `${pool}.json`);
    const source: DocumentSource = { pool, location: file };
    const registered = this.host.caps.get(pool);
    const lockPath = join(dir, `${pool}.lock`);
    const combineDir = this.combineDir(pool, lockPath);
    const timing = {
      staleMs: this.host.lockStaleMs,
      timeoutMs: this.host.lockTimeoutMs,
      combining: combineDir !== undefined,
    };
    const waiter =
      combine && combineDir !== undefined ? this.waiter(pool, combineDir, stamp, ops) : undefined;
    const waitStart = this.host.telemetry?.lockWaitStart();
    const handle = waiter
      ? await this.host.locker.acquire(pool, lockPath, timing, waiter.hooks)
      : await this.host.locker.acquire(pool, lockPath, timing);
    if (handle === undefined) return this.answered(pool, file, ops, waiter!.answer()!);
    const lockedAt = this.host.telemetry?.lockAcquired(pool, waitStart, ops);
    if (waiter?.withdraw() === 'claimed') {
      const answer = waiter.answer();
      if (answer) {
        await handle.release();
        return this.answered(pool, file, ops, answer);
      }
      // A holder took our calls and never answered (it was killed, or lost
      // its lock): it may have written them, which the ops then see.
      const prepared = waiter.prepared();
      const late = waiter.answer();
      if (late) {
        // Published meanwhile; a "not applied" answer needs the staged decisions read above.
        late.prepared ??= prepared;
        await handle.release();
        return this.answered(pool, file, ops, late);
      }
      redo(ops, true, prepared);
    }
    const where: CycleWhere = { pool, dir, file, source, registered, combineDir, handle };
    let done: CycleResult;
    try {
      done = await this.cycle(where, ops, stamp);
    } finally {
      await handle.release();
      this.host.telemetry?.lockReleased(pool, lockedAt);
      if (combineDir !== undefined) wakeOldest(this.host.fs, combineDir);
    }
    // Every waiter has its answer: the staged copy is not needed any more. (A
    // cycle that failed leaves it for them; it is swept once stale.)
    if (done.stagedFile !== undefined) {
      try {
        this.host.fs.unlinkSync(done.stagedFile);
      } catch {
        // Swept already.
      }
    }
    // The rename is visible to every process already; making it survive a power
    // loss does not need the lock, so the directory fsync runs after the release
    // (callers still hear back only once it is durable).
    if (done.wrote && !done.synced && this.host.fsync) await syncDir(this.host.fs, dir);
    return done.answers;
  }

  /**
   * One read-decide-write cycle under the held lock: claim the posted
   * requests, apply them with `ops` in start order, write once, post each
   * waiter's answer once the write is durable.
   */
  private async cycle(where: CycleWhere, ops: LedgerOp[], stamp: number): Promise<CycleResult> {
    const { pool, dir, file, source, registered, combineDir, handle } = where;
    let wrote = false;
    let synced = false;
    let published = false;
    let remote: ClaimedRequest[] = [];
    let marks: (boolean | undefined)[] | undefined;
    let stagedFile: string | undefined;
    try {
      await this.host.hooks.beforeClaim?.(pool);
      if (combineDir !== undefined) {
        remote = claimPending(
          this.host.fs,
          combineDir,
          pool,
          this.host.maxFileBytes,
          this.host.staleMs,
        );
      }
      const text = readPoolFile(this.host.fs, file, { pool, maxBytes: this.host.maxFileBytes });
      const doc = text === undefined ? undefined : parseDocument(text, source);
      if (doc && registered) assertCap(doc, registered, source);
      const base = doc ?? emptyDocument(registered ?? {});
      const lost = this.host.held.lostReport(pool, file, base, ops);
      // Our calls and every claimed request, in the order their batches started.
      const own = {
        stamp,
        ops,
        lost: lost && { index: lost.index, agentIds: [...lost.error.agentIds] },
        fsync: this.host.fsync,
      };
      const plan = planCombined(own, remote, base, source);
      const partition = partitionRows(base.reservations, this.host.facts(dir, base));
      // What an earlier attempt removed; this one's removals count only once written.
      marks = ops.map((op) => (op.kind === 'release' ? op.removedBefore : undefined));
      const outcome = applyBatch(pool, base, partition, plan.ops);
      const split = splitAnswers(plan, outcome.answers);
      const answers = split[plan.parts.indexOf(own)]!;
      const fsync = plan.parts.some((part) => part.fsync);
      const texts =
        combineDir !== undefined && remote.length > 0 ? answerTexts(plan, split) : undefined;
      if (texts && combineDir !== undefined && texts.size > 0) {
        stagedFile = stageAnswers(this.host.fs, combineDir, texts);
      }
      // Refusals, no-op releases and reads never rewrite the file; a file that
      // does not exist yet is created only by a change.
      if (outcome.dirty) {
        await this.host.hooks.beforeCommit?.(pool);
        const text = serializeDocument(outcome.doc);
        checkWriteSize(file, text, { pool, maxBytes: this.host.maxFileBytes });
        this.host.confirmLease(dir, pool);
        // Fenced: the temp file sits in our token directory inside the lock, so
        // a holder whose lock was taken over cannot rename it into place.
        await handle.write(file, text, { fsync });
        wrote = true;
        await this.host.hooks.afterWrite?.(pool);
      }
      if (lost) answers[lost.index] = { ok: false, error: lost.error };
      if (lost) this.host.held.forget(pool, lost.error.agentIds);
      this.host.held.track(pool, ops, answers);
      this.host.telemetry?.committed(
        pool,
        outcome.doc.cap,
        outcome.doc.reservations,
        wrote ? partition.stale : [],
      );
      if (ops.some((op) => op.kind === 'reap')) this.host.sweepLeftovers(dir, file);
      if (texts && combineDir !== undefined) {
        // Waiters hear back only once the write is durable: one directory
        // fsync, under the lock, serves all of them.
        if (wrote && fsync) await syncDir(this.host.fs, dir);
        synced = true;
        publishStaged(this.host.fs, combineDir, stagedFile, texts);
        published = true;
      }
      return { answers, wrote, synced, stagedFile: published ? stagedFile : undefined };
    } catch (error) {
      if (!wrote && marks) {
        ops.forEach((op, i) => {
          if (op.kind === 'release') op.removedBefore = marks![i];
        });
      }
      // Every claimed waiter does its calls itself.
      if (combineDir !== undefined && !published)
        failAnswers(this.host.fs, combineDir, remote, wrote);
      throw error;
    }
  }

  // The combining directory of a pool; undefined when the pool's name cannot
  // travel in a request (then the plain lock is used).
  private combineDir(pool: string, lockPath: string): string | undefined {
    return combinablePool(pool) ? combineDirPath(lockPath) : undefined;
  }

  // How this batch waits: after the first failed try it posts its calls for
  // the holder, and ends the wait when a holder answered.
  private waiter(pool: string, combineDir: string, stamp: number, ops: LedgerOp[]) {
    let request: PostedRequest | undefined;
    let inbox: Inbox | undefined;
    const registered = this.host.caps.get(pool);
    return {
      hooks: {
        contended: () => {
          if (ops.length > MAX_FORWARDED_OPS) return;
          // Made (and checked) by the first waiter of the pool in this instance.
          if (!this.host.inboxes.has(pool)) {
            const usable = prepareCombineDir(this.host.fs, combineDir);
            this.host.inboxes.set(
              pool,
              usable ? Inbox.open(this.host.fs, combineDir, this.host.leaseId) : undefined,
            );
          }
          inbox = this.host.inboxes.get(pool);
          if (inbox === undefined) return;
          request = PostedRequest.post(
            this.host.fs,
            combineDir,
            inbox,
            {
              stamp,
              instanceId: this.host.instanceId,
              leaseId: this.host.leaseId,
              fsync: this.host.fsync,
              held: [...(this.host.held.get(pool) ?? [])],
              registered: registered !== undefined,
            },
            { pool, cap: registered ?? {}, ops },
            this.host.maxFileBytes,
          );
        },
        settled: () => request?.answer() !== undefined,
        mustWait: () => request !== undefined && request.withdraw() === 'claimed',
        posted: () => request !== undefined && inbox !== undefined,
        // Behind a holder that combines, a posted waiter sleeps until its
        // answer arrives, the releasing holder wakes it (the oldest), or a
        // short bound passes and it looks at the lock again.
        pause: () => {
          const bound = inbox?.watched ? WATCHED_DEFER_MS : DEFER_MS;
          return inbox?.wait(bound + Math.random() * bound) ?? sleep(DEFER_MS);
        },
      } satisfies WaitHooks,
      answer: () => request?.answer(),
      prepared: () => request?.prepared(),
      withdraw: () => request?.withdraw(),
    };
  }

  // A holder answered our calls: take its answers as ours, or do the calls
  // ourselves when it applied none of them.
  private async answered(
    pool: string,
    file: string,
    ops: LedgerOp[],
    answer: CombinedAnswer,
  ): Promise<OpAnswer[]> {
    if (answer.reply.kind !== 'answers') {
      const flags = answer.reply.kind === 'direct' ? answer.reply.maybeApplied : [];
      redo(ops, flags, flags.some(Boolean) ? answer.prepared : undefined);
      return this.run(pool, ops, false);
    }
    const answers = answer.reply.answers;
    if (answer.lost) {
      answers[answer.lost.index] = {
        ok: false,
        error: this.host.held.lostError(pool, file, answer.lost.agentIds),
      };
      this.host.held.forget(pool, answer.lost.agentIds);
    }
    this.host.held.track(pool, ops, answers);
    return answers;
  }
}

function maybeApplied(op: LedgerOp): boolean {
  return 'maybeApplied' in op && op.maybeApplied === true;
}

// The error of a redo that kept losing its lock: "nothing was written" holds
// for this try only, not for the holder that claimed the calls before.
function mayHaveBeenApplied(pool: string, error: LedgerLockCompromisedError): Error {
  return new LedgerLockCompromisedError(
    pool,
    `${error.message.replace(/ Nothing was written; retry the operation\.$/, '')} This try wrote nothing, but a holder that claimed these calls earlier may have written them before it went silent, and their redo kept losing the lock for lockTimeoutMs: look at the pool (list or inspect) before retrying.`,
    { cause: error },
  );
}
