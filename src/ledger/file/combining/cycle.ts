/**
 * One locked read-decide-write cycle of the file ledger for a batch of calls
 * on one pool, with cross-process combining (see `channel.ts`): a batch that
 * finds the lock taken posts its calls and waits for a holder's answer, and a
 * holder applies its own calls and every posted request in start order, in
 * one write and one fsync.
 */
import { join } from 'node:path';
import { sleep, systemClock } from '../../../clock.js';
import { LedgerLockCompromisedError, LedgerOutcomeUnknownError } from '../../../errors/index.js';
import type { ResourceCap } from '../../../resources/types.js';
import { assertCap } from '../../document/cap.js';
import {
  type DocumentSource,
  emptyDocument,
  parseDocument,
  serializeDocument,
} from '../../document/codec.js';
import { type LivenessFacts, partitionRows } from '../../document/verdict.js';
import { hasErrorCode, type LedgerFs } from '../../fs.js';
import type { OpAnswer } from '../../ops.js';
import { applyBatch, granted, type LedgerOp } from '../../ops.js';
import type { LedgerTelemetry } from '../../telemetry.js';
import type { LedgerDocument } from '../../types.js';
import { MAX_FORWARDED_OPS } from '../../wire.js';
import type { HeldRows } from '../held-rows.js';
import type { MachineLedgerHooks } from '../hooks.js';
import { ledgerIoError } from '../io-error.js';
import type { LockHandle, PoolLocker, WaitHooks } from '../lock.js';
import { checkWriteSize, readPoolFile, syncDir } from '../store.js';
import { publishStaged, stageAnswers } from './answers.js';
import {
  batchStamp,
  type ClaimedRequest,
  type CombinedAnswer,
  claimPending,
  combinablePool,
  combineDirPath,
  prepareCombineDir,
  sweepCombineLeftovers,
  wakeOldest,
} from './channel.js';
import { answerTexts, failAnswers, planCombined, splitAnswers } from './plan.js';
import { Inbox, PostedRequest, redo } from './waiter.js';

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
  /**
   * Queue a call on `pool` that changes nothing by itself (a background reap),
   * so that calls left unsettled there are settled without waiting for the
   * caller's next call. Resolves false once the ledger is closed.
   */
  settleSoon(pool: string): Promise<boolean>;
}

// While calls of a pool are unsettled, how often a background call tries to
// settle them (jittered up to twice as long): a fault that clears frees their
// rows within about this long, even on an instance that makes no more calls.
const SETTLE_RETRY_MS = 200;

/**
 * Calls of this instance whose outcome it could not settle (see
 * {@link FileCycle.settle}): their callers were told so
 * (`LedgerOutcomeUnknownError`, "treat the reserve as not granted"), and the
 * next successful cycle on the pool makes that true, by releasing each one
 * first in the same write. `request`: the posted request could not be
 * withdrawn (a read-only directory): it may still be claimed and applied, so
 * nothing is released until it is withdrawn or claimed.
 */
interface Unsettled {
  ops: LedgerOp[];
  request: { withdraw(): 'withdrawn' | 'claimed' | 'stuck'; abandon?(): void } | undefined;
}

/** Runs the locked cycles of one MachineLedger. */
export class FileCycle {
  readonly #unsettled = new Map<string, Unsettled[]>();
  // Per batch, a posted request that could not be withdrawn after a failed wait.
  readonly #stuck = new WeakMap<LedgerOp[], Unsettled['request']>();

  // Staged answer files of ours that could not be removed (a read-only
  // filesystem): removed again before each later cycle.
  readonly #leftStaged = new Set<string>();
  // Pools with a background settle scheduled or running.
  readonly #settling = new Set<string>();

  constructor(private readonly host: CycleHost) {}

  #removeStaged(file: string): void {
    try {
      this.host.fs.unlinkSync(file);
      this.#leftStaged.delete(file);
    } catch (error) {
      if (hasErrorCode(error, 'ENOENT')) this.#leftStaged.delete(file);
      // Bounded: past it, the sweep of stale files removes the rest.
      else if (this.#leftStaged.size < 256) this.#leftStaged.add(file);
    }
  }

  /**
   * Run `ops` on `pool`: take the lock (or have a holder apply them, when
   * `combine`), read, decide, write once, answer each call in order. Calls
   * left unsettled by an earlier run are released first, in the same write.
   */
  async run(pool: string, ops: LedgerOp[], combine: boolean): Promise<OpAnswer[]> {
    const pending = this.#unsettled.get(pool);
    if (pending === undefined) return this.#runOps(pool, ops, combine);
    const { entries, cleanup } = this.#cleanup(pool, pending);
    if (cleanup.length === 0) return this.#runOps(pool, ops, combine);
    const answers = await this.#runOps(pool, [...cleanup, ...ops], combine);
    if (answers.slice(0, cleanup.length).every((answer) => answer.ok)) {
      const left = (this.#unsettled.get(pool) ?? []).filter((entry) => !entries.includes(entry));
      if (left.length === 0) this.#unsettled.delete(pool);
      else this.#unsettled.set(pool, left);
    }
    return answers.slice(cleanup.length);
  }

  // Settle the unsettled calls of `pool` in the background, one queued call
  // at a time, until none is left (or the ledger is closed).
  #settleInBackground(pool: string): void {
    if (this.#settling.has(pool)) return;
    this.#settling.add(pool);
    const tick = () => {
      if (!this.#unsettled.has(pool)) {
        this.#settling.delete(pool);
        return;
      }
      this.host.settleSoon(pool).then(
        (open) => (open ? later() : this.#settling.delete(pool)),
        // Still failing (the fault lasts): try again.
        () => later(),
      );
    };
    const later = () => {
      systemClock.setTimeout(tick, SETTLE_RETRY_MS * (1 + Math.random())).unref();
    };
    later();
  }

  /** The number of calls on `pool` still to be settled (for tests and telemetry). */
  unsettledCount(pool: string): number {
    return (this.#unsettled.get(pool) ?? []).reduce((sum, entry) => sum + entry.ops.length, 0);
  }

  // The releases that settle unsettled calls now: a reserve's row (if it was
  // written) is removed, a release is done again; but never for an agent this
  // instance holds again (its caller reserved it anew since). An entry whose
  // request is still posted first tries to withdraw it: withdrawn, nothing of
  // it was applied (its reserves are dropped, its releases done now);
  // claimed, it is settled like the others; still stuck, it waits (a release
  // now could come before a holder applies it).
  #cleanup(pool: string, pending: Unsettled[]): { entries: Unsettled[]; cleanup: LedgerOp[] } {
    const entries: Unsettled[] = [];
    const cleanup: LedgerOp[] = [];
    const drop: Unsettled[] = [];
    const held = this.host.held.get(pool);
    for (const entry of pending) {
      if (entry.request !== undefined) {
        const state = entry.request.withdraw();
        if (state === 'stuck') continue;
        entry.request.abandon?.();
        entry.request = undefined;
        // Withdrawn: none of it was applied, so a reserve left no row. A
        // release was not done either, but its caller was told to treat it
        // as done: it is done now.
        if (state === 'withdrawn') entry.ops = entry.ops.filter((op) => op.kind === 'release');
      }
      const ops: LedgerOp[] = [];
      for (const op of entry.ops) {
        if (op.kind === 'reserve' && !held?.has(op.row.agentId)) {
          ops.push({ kind: 'release', agentId: op.row.agentId, instanceId: op.row.instanceId });
        } else if (op.kind === 'release' && !held?.has(op.agentId)) {
          ops.push({
            kind: 'release',
            agentId: op.agentId,
            ...(op.instanceId === undefined ? {} : { instanceId: op.instanceId }),
          });
        }
      }
      if (ops.length === 0) drop.push(entry);
      else {
        entries.push(entry);
        cleanup.push(...ops);
      }
    }
    const left = pending.filter((entry) => !drop.includes(entry));
    if (left.length === 0) this.#unsettled.delete(pool);
    else this.#unsettled.set(pool, left);
    return { entries, cleanup };
  }

  async #runOps(pool: string, ops: LedgerOp[], combine: boolean): Promise<OpAnswer[]> {
    let deadline: number | undefined;
    for (;;) {
      try {
        return await this.attempt(pool, ops, combine);
      } catch (error) {
        // Plain failures: a typed error for every call of the batch.
        if (!ops.some(maybeApplied)) throw ledgerIoError(error, ioContext(pool, false));
        // Our lock was taken over before our write, so we wrote nothing. But a
        // call marked maybe-applied was claimed by a holder that may have
        // written it before it went silent: "nothing was written, retry" would
        // be false for it (a retried release would find its row gone and say
        // it held none; a reserve would leave a row its caller never heard
        // of). So such calls are done again here, with their marks, for as
        // long as one lock timeout allows.
        if (error instanceof LedgerLockCompromisedError && !this.#stuck.has(ops)) {
          deadline ??= systemClock.now() + this.host.lockTimeoutMs;
          if (systemClock.now() <= deadline) continue;
        }
        // Any other failure (a storage fault, a lock we keep losing): the
        // marked calls are settled from the pool file, or reported unknown.
        return this.settle(pool, ops, error);
      }
    }
  }

  /**
   * Answer a batch whose cycle failed although some of its calls may have been
   * applied by a holder that claimed them (never a plain failure for those).
   * When no holder can write them any more (the lock is free and our request
   * is not posted), the pool file read now is final for them: a reserve whose
   * row is there under this instance and lease is granted, one whose row is
   * not there failed (nothing of it is written, nothing will be); a release
   * whose row is gone is done. Otherwise they fail with
   * `LedgerOutcomeUnknownError`, and are remembered: the next successful cycle
   * on the pool releases them first (a reserve's row, if any, is removed), so
   * no row stays whose caller was told it was not granted. A background call
   * retries such a cycle until it succeeds, so an instance that makes no
   * more calls on the pool settles them too.
   * Unmarked calls of the batch get the typed error of the failure.
   */
  private async settle(pool: string, ops: LedgerOp[], error: unknown): Promise<OpAnswer[]> {
    const stuck = this.#stuck.get(ops);
    this.#stuck.delete(ops);
    const cause = ledgerIoError(error, ioContext(pool, false));
    const doc = stuck === undefined ? await this.finalDocument(pool) : undefined;
    const unknown: LedgerOp[] = [];
    const answers = ops.map((op): OpAnswer => {
      if (!maybeApplied(op)) return { ok: false, error: cause };
      const settled = doc && settledFrom(doc, op);
      if (settled === 'not-applied') return { ok: false, error: cause };
      if (settled !== undefined) return settled;
      unknown.push(op);
      return { ok: false, error: undefined };
    });
    if (unknown.length > 0) {
      const pending = this.#unsettled.get(pool) ?? [];
      pending.push({ ops: unknown, request: stuck });
      this.#unsettled.set(pool, pending);
      this.#settleInBackground(pool);
      const agentIds = unknown.flatMap((op) =>
        op.kind === 'adopt' ? op.rows.map((row) => row.agentId) : [agentOf(op)],
      );
      const outcome = new LedgerOutcomeUnknownError(
        pool,
        agentIds,
        `Pool ${JSON.stringify(pool)}: the outcome of ${unknown.map((op) => `${op.kind} of agent ${JSON.stringify(agentOf(op))}`).join(', ')} is unknown. Another process that combines calls took ${unknown.length === 1 ? 'it' : 'them'} and may have written ${unknown.length === 1 ? 'it' : 'them'}, but its answer never came, and this process could not settle ${unknown.length === 1 ? 'it' : 'them'} from the pool file (${(cause as Error).message ?? String(cause)}). Treat a reserve as not granted and a release as done: this instance makes that true in its next successful write on the pool, which it retries in the background until the pool can be written again (a row written for such a reserve is removed).`,
        { cause },
      );
      ops.forEach((op, i) => {
        if (unknown.includes(op)) answers[i] = { ok: false, error: outcome };
      });
      // Such a release counts as done for this instance (it is completed later).
      this.host.held.forget(
        pool,
        unknown.flatMap((op) => (op.kind === 'release' ? [op.agentId] : [])),
      );
    }
    this.host.held.track(pool, ops, answers);
    return answers;
  }

  // The pool document when no holder that took our calls can still write:
  // the lock is free (a holder writes only through its token directory inside
  // the lock), read after we saw it free. Undefined when that cannot be known.
  private async finalDocument(pool: string): Promise<LedgerDocument | undefined> {
    try {
      const dir = await this.host.dir();
      const lockPath = join(dir, `${pool}.lock`);
      if (this.host.fs.lstatSync(lockPath, { throwIfNoEntry: false }) !== undefined)
        return undefined;
      const file = join(dir, `${pool}.json`);
      const text = readPoolFile(this.host.fs, file, { pool, maxBytes: this.host.maxFileBytes });
      return text === undefined
        ? emptyDocument(this.host.caps.get(pool) ?? {})
        : parseDocument(text, { pool, location: file });
    } catch {
      return undefined;
    }
  }

  // One try of run(): the lock (or a holder's answer), then the cycle.
  private async attempt(pool: string, ops: LedgerOp[], combine: boolean): Promise<OpAnswer[]> {
    // Files a read-only spell kept: removed once it is over.
    for (const file of this.#leftStaged) this.#removeStaged(file);
    this.host.inboxes.get(pool)?.removeLeft();
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
    let handle: LockHandle | undefined;
    try {
      handle = waiter
        ? await this.host.locker.acquire(pool, lockPath, timing, waiter.hooks)
        : await this.host.locker.acquire(pool, lockPath, timing);
    } catch (error) {
      // Never leave a request posted behind a failed wait: a holder could
      // apply it after its caller was told the call failed.
      const answer = waiter ? this.afterFailedWait(pool, ops, waiter) : undefined;
      if (answer) return this.answered(pool, file, ops, answer);
      throw ledgerIoError(error, { pool, path: lockPath, mayHaveWritten: false });
    }
    if (handle === undefined) return this.answered(pool, file, ops, waiter!.answer()!);
    const lockedAt = this.host.telemetry?.lockAcquired(pool, waitStart, ops);
    const withdrawn = waiter?.withdraw();
    if (withdrawn === 'stuck') {
      // Our request stays posted (it could not be removed): the next holder
      // may apply it, so our calls must not be applied here as well.
      await handle.release();
      this.host.telemetry?.lockReleased(pool, lockedAt);
      this.afterFailedWait(pool, ops, waiter!);
      throw new LedgerLockCompromisedError(
        pool,
        `Pool ${JSON.stringify(pool)}: the request this process posted in ${combineDir} could not be withdrawn, so its calls were not applied under this lock. Nothing was written; retry the operation.`,
      );
    }
    if (waiter && withdrawn === 'claimed') {
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
      this.redoClaimed(pool, ops, true, prepared);
      waiter.request()?.abandon();
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
    // cycle that failed after its write leaves it for them; it is swept once stale.)
    if (done.stagedFile !== undefined) this.#removeStaged(done.stagedFile);
    // The rename is visible to every process already; making it survive a power
    // loss does not need the lock, so the directory fsync runs after the release
    // (callers still hear back only once it is durable).
    if (done.wrote && !done.synced && this.host.fsync) {
      try {
        await syncDir(this.host.fs, dir);
      } catch (error) {
        // Written but maybe not durable: the calls are redone with their marks.
        redo(ops, true, done.answers);
        throw ledgerIoError(error, { pool, path: dir, mayHaveWritten: true });
      }
    }
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
      if (ops.some((op) => op.kind === 'reap')) {
        this.host.sweepLeftovers(dir, file);
        if (combineDir !== undefined)
          sweepCombineLeftovers(this.host.fs, combineDir, dir, this.host.staleMs);
      }
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
      // Nothing was written, so what was staged never took effect: the pool
      // file alone tells a waiter's redo what is there. (Once written, the
      // staged answers stay for the waiters; they are swept once stale.)
      if (!wrote && stagedFile !== undefined) this.#removeStaged(stagedFile);
      // Written (a later step failed): our calls may have landed.
      if (wrote) redo(ops, true, undefined);
      throw ledgerIoError(error, { pool, path: file, mayHaveWritten: wrote });
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
          const awaited = request === undefined ? undefined : `${request.id}.ans`;
          return inbox?.wait(bound + Math.random() * bound, awaited) ?? sleep(DEFER_MS);
        },
      } satisfies WaitHooks,
      answer: () => request?.answer(),
      prepared: () => request?.prepared(),
      withdraw: () => request?.withdraw(),
      request: () => request,
    };
  }

  // Mark calls a holder claimed and did not answer (see `redo`). A release of
  // a row this instance holds whose holder staged no decision counts as done
  // if the row is gone by the time it is redone: the holder removed it (a
  // peer's reap or an operator's release would have ended it the same way).
  private redoClaimed(
    pool: string,
    ops: LedgerOp[],
    maybe: boolean | readonly boolean[],
    prepared: readonly OpAnswer[] | undefined,
  ): void {
    redo(ops, maybe, prepared);
    const held = this.host.held.get(pool);
    for (const op of ops) {
      if (op.kind !== 'release' || op.maybeApplied !== true || prepared !== undefined) continue;
      if (op.instanceId === this.host.instanceId && held?.has(op.agentId)) op.removedBefore = true;
    }
  }

  // A wait for the lock failed (a storage fault, a lock timeout) or our request
  // could not be withdrawn: the holder's answer when one came; else, when a
  // holder claimed our request (it may have applied it) or it is still posted,
  // the calls are marked maybe-applied so that `settle` decides them.
  private afterFailedWait(
    pool: string,
    ops: LedgerOp[],
    waiter: ReturnType<FileCycle['waiter']>,
  ): CombinedAnswer | undefined {
    const answer = waiter.answer();
    if (answer) return answer;
    const request = waiter.request();
    if (request === undefined) return undefined;
    const state = request.withdraw();
    if (state === 'withdrawn') return undefined;
    const late = waiter.answer();
    if (late) return late;
    this.redoClaimed(pool, ops, true, state === 'claimed' ? waiter.prepared() : undefined);
    if (state === 'stuck') this.#stuck.set(ops, request);
    else request.abandon();
    return undefined;
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
      this.redoClaimed(pool, ops, flags, flags.some(Boolean) ? answer.prepared : undefined);
      return this.#runOps(pool, ops, false);
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

function ioContext(pool: string, mayHaveWritten: boolean) {
  return { pool, path: `${pool}.json`, mayHaveWritten };
}

function agentOf(op: LedgerOp): string {
  switch (op.kind) {
    case 'reserve':
      return op.row.agentId;
    case 'release':
      return op.agentId;
    case 'adopt':
      return op.rows.map((row) => row.agentId).join(',');
    default:
      return '';
  }
}

/**
 * A maybe-applied call decided from a final pool document: its answer when the
 * document shows it applied (a reserve's own row, same instance, lease and
 * time: granted, with the device ids that row holds) or shows there is nothing left to do (a release whose row is gone),
 * `'not-applied'` when it shows the call was not applied (a reserve without
 * its row, a release whose row is still there), `undefined` when the document
 * cannot say (an adopt).
 */
export function settledFrom(
  doc: LedgerDocument,
  op: LedgerOp,
): OpAnswer | 'not-applied' | undefined {
  if (op.kind === 'reserve') {
    const own = doc.reservations.find(
      (row) =>
        row.agentId === op.row.agentId &&
        row.instanceId === op.row.instanceId &&
        row.leaseId === op.row.leaseId &&
        row.reservedAt === op.row.reservedAt,
    );
    if (own === undefined) return 'not-applied';
    // The grant answers the device ids its row holds, as the write that added it did.
    return { ok: true, kind: 'reserve', value: granted({ ok: true }, own.devices) };
  }
  if (op.kind === 'release') {
    const present = doc.reservations.some(
      (row) =>
        row.agentId === op.agentId &&
        (op.instanceId === undefined || row.instanceId === op.instanceId),
    );
    return present
      ? 'not-applied'
      : { ok: true, kind: 'release', value: op.removedBefore === true };
  }
  return undefined;
}
