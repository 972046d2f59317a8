/**
 * Cross-process combining for the file ledger: the channel through which a
 * process waiting for a pool lock hands its calls to whoever holds the lock,
 * so one read-modify-write and one fsync serve every waiter.
 *
 * The channel is the directory `<dir>/.<pool>.combine/` (mode 0700, ours):
 * 1. A waiter that found the lock taken posts its batch as `<id>.req`: written
 *    into its instance's request file `<leaseId>.post`, which is then
 *    hard-linked under that name (a reader never sees half a request, and no
 *    file is created per call; see `Inbox.post`). `<id>` starts with the
 *    batch's start time in microseconds, zero-padded: names sort in arrival order.
 * 2. The holder claims each request by reading it and then unlinking
 *    `<id>.req`. The unlink decides: a waiter that withdraws its request (it
 *    took the lock itself, or gave up) unlinks it too, and exactly one of the
 *    two succeeds.
 * 3. The holder applies its own calls and every claimed request in start-time
 *    order. Before it writes the pool file it stages every waiter's answer in
 *    one file, `<stage>.pre`; once the write is durable it posts each answer
 *    as `<leaseId>/<id>.ans` in the waiter's inbox (a hard link to one staged
 *    answers file of the cycle, or an exclusive create; never over an existing
 *    file) and removes the staged file. Only a holder whose fenced
 *    write landed posts answers that say "applied".
 * 4. The waiter sees `<id>.ans` and returns without taking the lock. A waiter
 *    whose request was claimed but never answered (the holder was killed, or
 *    its lock was taken over) takes the lock itself and redoes its calls,
 *    marked `maybeApplied` (the holder may have written them before dying).
 * 5. A waiter defers (does not try the lock, stays out of its wait queue and
 *    sleeps on its inbox) only while the lock is held by a holder that
 *    combines: it made the lock with the sticky bit (see `../lock.ts`), and it
 *    answers or wakes the oldest waiter when it releases. Even then the
 *    waiter looks again (one `lstat`) within a few ms.
 *    Behind any other holder (the kici orchestrator's ledger, an older version
 *    of ours) nobody would answer it, so it stands in the wait queue and takes
 *    the lock itself like a plain waiter. Its request stays posted meanwhile:
 *    whichever of ours takes the lock first serves it, and a waiter that takes
 *    the lock withdraws its own request first (step 2 decides who has it).
 *
 * Everything read here is opened without following links and checked to be a
 * regular file of ours (see `../safe-fs.ts`); a request that does not decode is
 * answered "do it yourself" and never applied. Processes that do not know the
 * directory (the kici orchestrator) are unaffected: they take the lock as before.
 */
import { join } from 'node:path';
import { monotonicEpochNow, systemClock } from '../../../clock.js';
import { effectiveUid } from '../../../internal/uid.js';
import { assertCap } from '../../document/cap.js';
import type { DocumentSource } from '../../document/codec.js';
import { hasErrorCode, type LedgerFs } from '../../fs.js';
import type { OpAnswer } from '../../ops.js';
import type { LedgerDocument } from '../../types.js';
import { type CombineReply, type CombineRequest, decodeRequestText, isObject } from '../../wire.js';
import type { LostRows } from '../lost.js';
import { readLedgerFile } from '../safe-fs.js';

/** The most requests one holder takes in one cycle (the rest wait for the next). */
export const MAX_COMBINED_REQUESTS = 256;

/** The combining directory of a lock: `<dir>/.<pool>.combine`, beside `<dir>/<pool>.lock`. */
export function combineDirPath(lockPath: string): string {
  const slash = lockPath.lastIndexOf('/');
  return `${lockPath.slice(0, slash + 1)}.${lockPath.slice(slash + 1, -'.lock'.length)}.combine`;
}

/**
 * Create the combining directory (0700) if needed; true when it is a real
 * directory of ours that nobody else can write. False (no combining, the plain
 * lock is used) for anything else, which is left alone.
 */
export function prepareCombineDir(fs: LedgerFs, path: string): boolean {
  try {
    fs.mkdirSync(path, 0o700);
  } catch (error) {
    if (!hasErrorCode(error, 'EEXIST')) return false;
  }
  return safeCombineDir(fs, path);
}

// A real directory of ours that nobody else can write (a link is not followed).
export function safeCombineDir(fs: LedgerFs, path: string): boolean {
  try {
    // Missing (nobody ever waited on this pool) is the common case: no error thrown for it.
    const stat = fs.lstatSync(path, { throwIfNoEntry: false });
    if (stat === undefined) return false;
    const uid = effectiveUid();
    return (
      stat.isDirectory() && (uid === undefined || stat.uid === uid) && (stat.mode & 0o022) === 0
    );
  } catch {
    return false;
  }
}

/** Who sent a request and what the holder needs beyond the calls. */
export interface RequestEnvelope {
  /** The batch's start time (epoch ms, monotonic): the order requests are applied in. */
  stamp: number;
  /** The sender's instance id. */
  instanceId: string;
  /** The sender's lease id. */
  leaseId: string;
  /** The sender wants the write fsynced. */
  fsync: boolean;
  /** The agents the sender holds in the pool (for its lost-rows report). */
  held: string[];
  /** The sender registered the request's cap (else the cap is not checked). */
  registered: boolean;
}

/** A waiter's answer: the reply and, when rows of it were lost, the report. */
export interface CombinedAnswer {
  /** `answers` (applied), or `direct` (not applied: do the calls yourself). */
  reply: CombineReply;
  /** The lost-rows report, at `lost.index` in place of that call's answer. */
  lost?: LostRows;
  /** For a `direct` reply: what the holder had decided before its write, if it staged it. */
  prepared?: OpAnswer[];
}

/** A request the holder claimed. */
export interface ClaimedRequest {
  /** The request id (its file name without `.req`). */
  id: string;
  /** The sender and its needs; `undefined` when the request did not decode. */
  envelope: RequestEnvelope | undefined;
  /** The calls; `undefined` when the request did not decode. */
  request: CombineRequest | undefined;
}

/**
 * A request id: `<start>.<leaseId>.<random>`, the start time in microseconds,
 * zero-padded (ids sort in start order); the lease id names the sender's inbox.
 */
export function requestId(stamp: number, leaseId: string): string {
  const micros = Math.max(0, Math.round(stamp * 1000));
  return `${String(micros).padStart(17, '0')}.${leaseId}.${Math.random().toString(36).slice(2, 10)}`;
}

function stampOf(id: string): number {
  return Number(id.slice(0, 17)) / 1000;
}

const ID = /^\d{17}\.([\w-]{1,128})\.[a-z0-9]{1,10}$/;

/** The inbox directory of the sender of request `id`: `<dir>/<leaseId>`. */
export function inboxOf(dir: string, id: string): string | undefined {
  const leaseId = ID.exec(id)?.[1];
  return leaseId === undefined ? undefined : join(dir, leaseId);
}

/** True for a safe request id. */
export function isRequestId(id: string): boolean {
  return ID.test(id);
}

function decodeEnvelope(value: unknown, stamp: number): RequestEnvelope {
  if (!isObject(value) || value.v !== 1) throw new TypeError('envelope is not a version 1 object');
  const { instanceId, leaseId, fsync, held, registered } = value;
  if (typeof instanceId !== 'string' || instanceId === '' || instanceId.length > 256) {
    throw new TypeError('envelope instanceId is not a string of 1 to 256 characters');
  }
  if (typeof leaseId !== 'string' || !/^[\w-]{1,128}$/.test(leaseId)) {
    throw new TypeError('envelope leaseId is not a lease id');
  }
  if (typeof fsync !== 'boolean' || typeof registered !== 'boolean') {
    throw new TypeError('envelope fsync or registered is not a boolean');
  }
  if (!Array.isArray(held) || held.some((a) => typeof a !== 'string')) {
    throw new TypeError('envelope held is not an array of strings');
  }
  return { stamp, instanceId, leaseId, fsync, held: held as string[], registered };
}

/**
 * Under the pool lock: claim every posted request (at most
 * {@link MAX_COMBINED_REQUESTS}, oldest first): read it, then unlink it (a
 * request its waiter withdrew first is skipped). Also removes leftovers older
 * than `staleMs` (answers and staged files of holders or waiters that were
 * killed).
 */
export function claimPending(
  fs: LedgerFs,
  dir: string,
  pool: string,
  maxBytes: number,
  staleMs: number,
): ClaimedRequest[] {
  let names: string[];
  // No directory (nobody ever waited), or one we must not use: nothing to claim.
  if (!safeCombineDir(fs, dir)) return [];
  try {
    names = fs.readdirSync(dir);
  } catch {
    return [];
  }
  const ids: string[] = [];
  for (const name of names) {
    if (name.endsWith('.req')) {
      const id = name.slice(0, -'.req'.length);
      if (ID.test(id)) ids.push(id);
    } else if (/\.(tmp|ans|pre)$/.test(name)) {
      sweep(fs, join(dir, name), staleMs);
    }
  }
  ids.sort();
  const claimed: ClaimedRequest[] = [];
  for (const id of ids.slice(0, MAX_COMBINED_REQUESTS)) {
    const file = join(dir, `${id}.req`);
    let text: string | undefined;
    try {
      text = readLedgerFile(fs, file, { pool, maxBytes });
    } catch {
      // Not a regular file of ours, or too large: claimed below and answered "not applied".
      text = '';
    }
    // Withdrawn meanwhile: not ours.
    if (text === undefined) continue;
    try {
      fs.unlinkSync(file);
    } catch {
      // Withdrawn by its waiter between the read and now.
      continue;
    }
    let envelope: RequestEnvelope | undefined;
    let request: CombineRequest | undefined;
    try {
      const newline = text.indexOf('\n');
      if (newline < 0) throw new TypeError('the request has no envelope line');
      envelope = decodeEnvelope(JSON.parse(text.slice(0, newline)), stampOf(id));
      request = decodeRequestText(text.slice(newline + 1));
      if (request.pool !== pool) throw new TypeError('the request names another pool');
    } catch {
      envelope = undefined;
      request = undefined;
    }
    claimed.push({ id, envelope, request });
  }
  return claimed;
}

/**
 * Under the pool lock, when the ledger sweeps (a reap): remove what faults
 * and crashes left in the combining directory `dir` of the ledger directory
 * `ledgerDir`. Answers in inboxes older than `staleMs` (their waiter read
 * none of them: it was killed, gave up, or redid its calls; a waiter that
 * only stalled that long redoes its calls as one whose holder never
 * answered), and the inboxes (when empty) and request files of instances that
 * have no lease file any more (closed or long dead), once they are older than
 * `staleMs` (a request still linking such a file keeps its text). Posted
 * requests are never removed here: a live waiter's request is applied or
 * withdrawn by the protocol, and a dead waiter's is applied by the next holder
 * (its row is reaped with its lease).
 */
export function sweepCombineLeftovers(
  fs: LedgerFs,
  dir: string,
  ledgerDir: string,
  staleMs: number,
): void {
  if (!safeCombineDir(fs, dir)) return;
  let names: string[];
  try {
    names = fs.readdirSync(dir);
  } catch {
    return;
  }
  for (const name of names) {
    if (/\.(tmp|ans|pre)$/.test(name)) {
      sweep(fs, join(dir, name), staleMs);
      continue;
    }
    const post = /^([\w-]{1,128})\.post$/.exec(name);
    if (post !== null) {
      // The request file of an instance that has no lease file any more.
      try {
        if (
          fs.lstatSync(join(ledgerDir, `${post[1]}.lease`), { throwIfNoEntry: false }) === undefined
        )
          sweep(fs, join(dir, name), staleMs);
      } catch {
        // Judged at the next sweep.
      }
      continue;
    }
    if (!/^[\w-]{1,128}$/.test(name)) continue;
    const inbox = join(dir, name);
    if (!safeCombineDir(fs, inbox)) continue;
    let answers: string[];
    let idle: boolean;
    try {
      // Judged before its stale answers go (removing them touches it).
      idle = systemClock.now() - fs.lstatSync(inbox).mtimeMs > staleMs;
      answers = fs.readdirSync(inbox);
    } catch {
      continue;
    }
    for (const answer of answers) {
      if (answer.endsWith('.ans')) sweep(fs, join(inbox, answer), staleMs);
    }
    try {
      if (!idle) continue;
      if (fs.lstatSync(join(ledgerDir, `${name}.lease`), { throwIfNoEntry: false }) !== undefined)
        continue;
      fs.rmdirSync(inbox);
    } catch {
      // Not empty (a fresh answer), or gone already.
    }
  }
}

function sweep(fs: LedgerFs, path: string, staleMs: number): void {
  try {
    const stat = fs.lstatSync(path);
    if (systemClock.now() - stat.mtimeMs > staleMs) fs.unlinkSync(path);
  } catch {
    // Gone already.
  }
}

/**
 * After a release: wake the sender of the oldest request still waiting, so it
 * takes the lock now instead of at its next poll (touching its inbox's times
 * fires its watch). Best effort; waiters poll anyway.
 */
export function wakeOldest(fs: LedgerFs, dir: string): void {
  let oldest: string | undefined;
  try {
    if (fs.lstatSync(dir, { throwIfNoEntry: false }) === undefined) return;
    for (const name of fs.readdirSync(dir)) {
      if (!name.endsWith('.req')) continue;
      const id = name.slice(0, -'.req'.length);
      if (ID.test(id) && (oldest === undefined || id < oldest)) oldest = id;
    }
  } catch {
    return;
  }
  const inbox = oldest === undefined ? undefined : inboxOf(dir, oldest);
  if (inbox === undefined) return;
  try {
    const seconds = systemClock.now() / 1000;
    fs.lutimesSync(inbox, seconds, seconds);
  } catch {
    // Gone: its waiter polls, or is gone too.
  }
}

/** A batch's start stamp, on the scale request ids use. */
export function batchStamp(): number {
  return monotonicEpochNow();
}

/**
 * True when the pool's name can travel in a combine request (the request
 * format is shared with the NATS combiner, whose keys refuse a trailing `.`
 * and `..`); other pools use the plain lock.
 */
export function combinablePool(pool: string): boolean {
  return !pool.endsWith('.') && !pool.includes('..');
}

/**
 * The claimed request's sender and calls when the holder may apply them to
 * `base`: it decoded, and its cap (when the sender registered one) is the
 * document's. Otherwise `undefined`: the holder answers "not applied" and the
 * sender does its calls itself (and gets its own error, a cap mismatch say).
 */
export function usableRequest(
  claimed: ClaimedRequest,
  base: LedgerDocument,
  source: DocumentSource,
): { envelope: RequestEnvelope; request: CombineRequest } | undefined {
  const { envelope, request } = claimed;
  if (envelope === undefined || request === undefined) return undefined;
  if (envelope.registered) {
    try {
      assertCap(base, request.cap, source);
    } catch {
      return undefined;
    }
  }
  return { envelope, request };
}
