/**
 * The waiting side of cross-process combining (see `channel.ts`): a posted
 * request, and the inbox its answer arrives in. Each ledger instance keeps one
 * inbox directory per pool, `<dir>/.<pool>.combine/<leaseId>/`, watched with
 * `fs.watch` (inotify): a holder renames an answer into it, or touches it to
 * say the lock is free, and the waiter wakes at once instead of at its next
 * poll. Where watching is not available the waiter simply polls.
 */
import { basename, dirname, join } from 'node:path';
import { type ClockTimer, systemClock } from '../../../clock.js';
import { timerMs } from '../../../internal/timer-ms.js';
import { hasErrorCode, type LedgerFs, writeAll } from '../../fs.js';
import type { LedgerOp, OpAnswer } from '../../ops.js';
import { type CombineRequest, decodeReplyText, encodeRequest, isObject } from '../../wire.js';
import { ownRegularFile, readLedgerFile } from '../safe-fs.js';
import { answerIn, stagedAnswer } from './answers.js';
import { type CombinedAnswer, type RequestEnvelope, requestId, safeCombineDir } from './channel.js';

// How long a late answer to a request nobody waits for is looked for, to be
// removed (after that, the sweep of stale answers removes it).
const LATE_MS = 30_000;

/** Where one ledger instance's answers for one pool arrive. */
export class Inbox {
  private watcher: ReturnType<LedgerFs['watch']> | undefined;
  private wake: (() => void) | undefined;
  // The answer file the current wait is for (undefined: any change wakes it).
  private awaited: string | undefined;
  // The awaited answer file a change reported (it is there: no need to look first).
  private seen: string | undefined;
  // Answers already read that could not be removed (a read-only filesystem).
  private readonly left = new Set<string>();
  // Answers that may still arrive for requests nobody waits for any more
  // (their calls were redone or settled), until when they are looked for.
  private readonly late = new Map<string, number>();

  private constructor(
    private readonly fs: LedgerFs,
    /** The inbox directory. */
    readonly path: string,
  ) {}

  /**
   * Make (0700) and watch the inbox of `leaseId` in the combining directory
   * `dir`; `undefined` when it cannot be made safely (then nothing is posted).
   */
  static open(fs: LedgerFs, dir: string, leaseId: string): Inbox | undefined {
    const path = join(dir, leaseId);
    try {
      fs.mkdirSync(path, 0o700);
    } catch (error) {
      if (!hasErrorCode(error, 'EEXIST')) return undefined;
    }
    if (!safeCombineDir(fs, path)) return undefined;
    const inbox = new Inbox(fs, path);
    try {
      inbox.watcher = fs.watch(path, { persistent: false }, (_event, name) => inbox.changed(name));
      inbox.watcher.on('error', () => inbox.unwatch());
    } catch {
      inbox.watcher = undefined;
    }
    return inbox;
  }

  /**
   * This instance's request file for the pool, `<dir>/<leaseId>.post`
   * (beside the inbox, not in it: writing it must not wake the inbox's watch).
   */
  get requestFile(): string {
    return `${this.path}.post`;
  }

  /**
   * Post `text` as the request `name` in the combining directory: write it
   * into this instance's request file and hard-link that file there. The
   * link makes the request whole or absent for a holder, and a request costs
   * no new file: creating and freeing a file (an inode) per call was the
   * largest part of a combined call's filesystem work. The file is rewritten
   * only while no request links it (its link count is 1): a request still
   * posted (a holder has not claimed it, its withdrawal failed) keeps its
   * text, and the next post starts a new file. A holder that opened a request
   * just before its waiter withdrew it may read the next one's text, but its
   * claim (the unlink of the old name) fails, so it applies nothing. The file
   * is open only during the post: a descriptor open for writing would keep
   * an administrator from remounting the filesystem read-only.
   *
   * @throws The system error of a step that failed (nothing is posted then).
   */
  post(name: string, text: string): void {
    const file = this.requestFile;
    const { O_WRONLY, O_CREAT, O_EXCL, O_NOFOLLOW, O_NONBLOCK } = this.fs.constants;
    let fd: number | undefined;
    let size = 0;
    try {
      fd = this.fs.openSync(file, O_WRONLY | O_NOFOLLOW | O_NONBLOCK);
    } catch (error) {
      if (!hasErrorCode(error, 'ENOENT')) throw error;
    }
    if (fd !== undefined) {
      const stat = this.fs.fstatSync(fd);
      size = stat.size;
      // Anything but our own regular file that no request links (a request
      // still posted keeps its text): a new file takes its place.
      if (!ownRegularFile(stat) || stat.nlink !== 1) {
        this.fs.closeSync(fd);
        this.fs.unlinkSync(file);
        fd = undefined;
        size = 0;
      }
    }
    fd ??= this.fs.openSync(file, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_NONBLOCK, 0o600);
    try {
      const bytes = Buffer.from(text, 'utf8');
      writeAll(this.fs, fd, bytes, 0);
      // A longer earlier request leaves its tail: cut it.
      if (bytes.length < size) this.fs.ftruncateSync(fd, bytes.length);
    } finally {
      this.fs.closeSync(fd);
    }
    this.fs.linkSync(file, join(dirname(this.path), name));
  }

  /** True while arrivals wake the waiter (else it only polls). */
  get watched(): boolean {
    return this.watcher !== undefined;
  }

  /** Remove an answer file that was read; one that cannot be removed now is removed by {@link Inbox.removeLeft}. */
  remove(file: string): void {
    try {
      this.fs.unlinkSync(file);
      this.left.delete(file);
    } catch (error) {
      if (hasErrorCode(error, 'ENOENT')) this.left.delete(file);
      // Bounded: past it, the sweep of stale answers removes the rest.
      else if (this.left.size < 256) this.left.add(file);
    }
  }

  /**
   * The answer `file` may still arrive, but nobody will read it: remove it
   * when it is there (looked for by {@link Inbox.removeLeft} for `LATE_MS`).
   */
  discardLate(file: string): void {
    if (this.late.size < 256) this.late.set(file, systemClock.now() + LATE_MS);
  }

  /**
   * Try again to remove the answers read earlier that could not be removed
   * then, and remove late answers nobody waits for.
   */
  removeLeft(): void {
    for (const file of this.left) this.remove(file);
    for (const [file, until] of this.late) {
      try {
        this.fs.unlinkSync(file);
        this.late.delete(file);
      } catch {
        // Not there yet (or not removable now): looked for again until `until`.
        if (systemClock.now() > until) this.late.delete(file);
      }
    }
  }

  /**
   * Resolve after `ms`, or earlier when the answer file `awaited` (a name in
   * the inbox) arrives or the inbox itself is touched (a releasing holder
   * wakes its oldest waiter so). Without `awaited`, any change wakes it.
   */
  wait(ms: number, awaited?: string): Promise<void> {
    return new Promise((resolve) => {
      let timer: ClockTimer | undefined;
      const done = () => {
        this.wake = undefined;
        this.awaited = undefined;
        systemClock.clearTimeout(timer);
        resolve();
      };
      this.wake = done;
      this.awaited = awaited;
      timer = systemClock.setTimeout(done, timerMs(ms));
    });
  }

  // A change in the inbox: wakes the wait unless it names another entry (the
  // removal of an answer already read, a late answer nobody waits for).
  private changed(name: string | Buffer | null): void {
    if (this.wake === undefined) return;
    const entry = name === null ? undefined : String(name);
    if (
      entry === undefined ||
      this.awaited === undefined ||
      entry === this.awaited ||
      entry === basename(this.path)
    ) {
      if (entry !== undefined && entry === this.awaited) this.seen = entry;
      this.wake();
    }
  }

  /** True once (then forgotten) when a change reported the awaited answer file `name`. */
  reported(name: string): boolean {
    if (this.seen !== name) return false;
    this.seen = undefined;
    return true;
  }

  /**
   * Stop watching and remove the inbox with the answers left in it (late
   * answers to calls this instance settled otherwise: nobody reads them now).
   */
  close(): void {
    this.unwatch();
    try {
      this.fs.unlinkSync(this.requestFile);
    } catch {
      // Never made, or not removable now: swept once the lease file is gone.
    }
    try {
      for (const name of this.fs.readdirSync(this.path)) {
        if (name.endsWith('.ans')) this.fs.unlinkSync(join(this.path, name));
      }
    } catch {
      // Gone, or not removable now: swept with the pool's leftovers.
    }
    try {
      this.fs.rmdirSync(this.path);
    } catch {
      // Not empty (a late answer), or gone: swept with the pool's leftovers.
    }
  }

  private unwatch(): void {
    this.watcher?.close();
    this.watcher = undefined;
  }
}

/** A waiter's posted request. */
export class PostedRequest {
  private answerValue: CombinedAnswer | undefined;
  private withdrawn: 'withdrawn' | 'claimed' | undefined;

  private constructor(
    private readonly fs: LedgerFs,
    private readonly dir: string,
    private readonly inbox: Inbox,
    /** The request id. */
    readonly id: string,
    private readonly ops: readonly LedgerOp[],
    private readonly pool: string,
    private readonly maxBytes: number,
  ) {}

  /**
   * Post `request` in the combining directory `dir` (its answer comes to
   * `inbox`); `undefined` (nothing
   * posted: take the lock the plain way) when it cannot be written.
   */
  static post(
    fs: LedgerFs,
    dir: string,
    inbox: Inbox,
    envelope: RequestEnvelope,
    request: CombineRequest,
    maxBytes: number,
  ): PostedRequest | undefined {
    const id = requestId(envelope.stamp, envelope.leaseId);
    const { stamp: _stamp, ...head } = envelope;
    const text = `${JSON.stringify({ v: 1, ...head })}\n${encodeRequest(request)}\n`;
    if (Buffer.byteLength(text) > maxBytes) return undefined;
    try {
      inbox.post(`${id}.req`, text);
    } catch {
      return undefined;
    }
    return new PostedRequest(fs, dir, inbox, id, request.ops, request.pool, maxBytes);
  }

  /**
   * The answer once a holder posted it (read once, then its file is removed).
   * A holder that creates the file (instead of linking its staged answers)
   * writes it after: one seen before it ends with its newline is not complete
   * yet, and is left for the next look.
   */
  answer(): CombinedAnswer | undefined {
    if (this.answerValue) return this.answerValue;
    const name = `${this.id}.ans`;
    const file = join(this.inbox.path, name);
    let text: string | undefined;
    try {
      // Asked every time the waiter wakes: "not yet" costs no error thrown.
      // (Once its watch reported the file, it is read straight away.)
      if (
        !this.inbox.reported(name) &&
        this.fs.lstatSync(file, { throwIfNoEntry: false }) === undefined
      ) {
        return undefined;
      }
      text = readLedgerFile(this.fs, file, { pool: this.pool, maxBytes: this.maxBytes });
    } catch {
      return undefined;
    }
    if (text === undefined || !text.endsWith('\n')) return undefined;
    this.inbox.remove(file);
    // A linked staged file holds the whole cycle's answers: ours is one entry.
    const answer = this.decode(answerIn(text, this.id) ?? '');
    if (answer.reply.kind === 'direct') answer.prepared = this.prepared();
    this.answerValue = answer;
    return answer;
  }

  private decode(text: string): CombinedAnswer {
    const newline = text.indexOf('\n');
    try {
      const head: unknown = JSON.parse(text.slice(0, newline));
      const reply = decodeReplyText(text.slice(newline + 1), this.pool, this.ops);
      if (!isObject(head) || head.v !== 1) throw new TypeError('answer head is not version 1');
      const lost = head.lost;
      if (lost === null || lost === undefined) return { reply };
      if (
        !isObject(lost) ||
        typeof lost.index !== 'number' ||
        !Number.isInteger(lost.index) ||
        lost.index < 0 ||
        lost.index >= this.ops.length ||
        !Array.isArray(lost.agentIds) ||
        lost.agentIds.some((a) => typeof a !== 'string')
      ) {
        throw new TypeError('answer lost report is malformed');
      }
      return { reply, lost: { index: lost.index, agentIds: lost.agentIds as string[] } };
    } catch (error) {
      // An answer that does not decode (or answers a call with a value of the
      // wrong shape) says nothing usable; its holder may still have written
      // the calls, so each is settled from the pool file as one whose write
      // may have landed.
      return {
        reply: {
          kind: 'direct',
          maybeApplied: this.ops.map(() => true),
          reason: `the answer did not decode (${(error as Error).message})`,
        },
      };
    }
  }

  /**
   * What a holder that took this request had decided before it wrote (it
   * stages every answer of its cycle first), or `undefined` when none staged
   * it. Used only when that holder never answered: a release it decided to
   * remove was present then, whether or not its write landed.
   */
  prepared(): OpAnswer[] | undefined {
    const text = stagedAnswer(this.fs, this.dir, this.id, this.pool, this.maxBytes);
    if (text === undefined) return undefined;
    const answer = this.decode(text);
    return answer.reply.kind === 'answers' ? answer.reply.answers : undefined;
  }

  /**
   * Nobody reads this request's answer any more (its calls are redone or
   * settled otherwise): one that arrives late is removed.
   */
  abandon(): void {
    if (this.answerValue !== undefined) return;
    this.inbox.discardLate(join(this.inbox.path, `${this.id}.ans`));
  }

  /**
   * Take the request back. `withdrawn`: no holder has it, nothing of it will be
   * applied. `claimed`: a holder took it first; its answer decides. `stuck`: it
   * could not be removed (a read-only directory, an I/O error): it is still
   * posted, and a holder may still claim and apply it.
   */
  withdraw(): 'withdrawn' | 'claimed' | 'stuck' {
    // Decided once: a request this waiter removed must not read as claimed later.
    if (this.withdrawn !== undefined) return this.withdrawn;
    try {
      this.fs.unlinkSync(join(this.dir, `${this.id}.req`));
      this.withdrawn = 'withdrawn';
    } catch (error) {
      if (!hasErrorCode(error, 'ENOENT')) return 'stuck';
      this.withdrawn = 'claimed';
    }
    return this.withdrawn;
  }
}

/**
 * Mark calls about to be redone by their own process after a holder took them
 * and did not answer them: `maybe` (one flag per call, or one for all) says a
 * write that carried the call may have landed, so a reserve that finds its own
 * row is granted; a release the holder had decided to remove (`prepared`)
 * answers true although its row is gone by now.
 */
export function redo(
  ops: LedgerOp[],
  maybe: boolean | readonly boolean[],
  prepared: readonly OpAnswer[] | undefined,
): void {
  ops.forEach((op, i) => {
    const flag = typeof maybe === 'boolean' ? maybe : maybe[i] === true;
    if (!flag || (op.kind !== 'reserve' && op.kind !== 'release')) return;
    op.maybeApplied = true;
    const decided = prepared?.[i];
    if (
      op.kind === 'release' &&
      decided?.ok === true &&
      decided.kind === 'release' &&
      decided.value
    ) {
      op.removedBefore = true;
    }
  });
}
