/**
 * Before an instance's first lease write: the lease of a dead predecessor with
 * the same `instanceId` on this host (a controller killed and started again) is
 * continued when it is still within its deadline, so the agents that watch its
 * file stay fenced by a lease that never lapsed; a live process holding a lease
 * of the same `instanceId` refuses this instance.
 *
 * Who holds a lease is in its file's body (instance id, pid, boot id, process
 * start time). Of several processes claiming one predecessor at once exactly
 * one wins: the claim is the `O_EXCL` creation of a ticket named after the
 * predecessor's process (`<leaseId>.<pid>-<start>.claim`), which no later claim
 * of that predecessor can make again; the winner then replaces the lease file's
 * body by an atomic rename, naming itself, so the lease file is never missing.
 */
import { join } from 'node:path';
import { LedgerInstanceInUseError } from '../../errors/index.js';
import { hasErrorCode, type LedgerFs, writeAll } from '../fs.js';
import { judgeProcess } from '../proc.js';
import { isClosed, type LeaseHolder, leaseBody, leasePath, parseLeaseBody } from './lease.js';
import { createExclusive, readLedgerFile } from './safe-fs.js';

/** What a claim is judged with. */
export interface ClaimContext {
  readonly fs: LedgerFs;
  /** The ledger directory. */
  readonly dir: string;
  /** The pool of the call that makes the first lease write (for errors), or `''`. */
  readonly pool: string;
  /** This instance: its instance id, pid, boot id and start time. */
  readonly self: LeaseHolder;
  /** The lease window. */
  readonly leaseTtlMs: number;
  /** What peers add to the deadline before they take a lease's rows. */
  readonly marginMs: number;
  /** The ledger's clock, epoch ms (lease files carry its times). */
  now(): number;
  /** Whether a pid exists. */
  probe(pid: number): boolean;
  /** A process's start time in clock ticks since boot. */
  startTimeOf(pid: number): number | undefined;
}

/** What the claim decided: continue a predecessor's lease (already renewed), or make a new one. */
export type ClaimResult = { kind: 'continued'; leaseId: string } | { kind: 'new' };

/** Lease bodies are one short JSON line. */
const MAX_BODY_BYTES = 4096;
const LEASE_FILE = /^([A-Za-z0-9_-]{1,128})\.lease$/;

/**
 * Whose a lease holder is: this process, another live process, a dead one, or
 * one in another PID namespace (its pid cannot be judged here: neither
 * continued nor a reason to refuse, as before leases could be continued).
 */
type HolderState = 'self' | 'alive' | 'alive-confirmed' | 'dead' | 'foreign';

/**
 * Continue a dead predecessor's lease or say a new one is needed.
 *
 * @throws LedgerInstanceInUseError when a live process holds a lease of this
 *   instance id, or another process won the claim of the predecessor's lease.
 * @throws A system error (`EROFS`, `ENOSPC`...) when the claim cannot be written.
 */
export function claimLease(ctx: ClaimContext): ClaimResult {
  const { fs, dir } = ctx;
  const now = ctx.now();
  let best: { leaseId: string; holder: LeaseHolder; mtimeMs: number } | undefined;
  for (const { leaseId, holder, mtimeMs, state } of scan(ctx, now, undefined)) {
    if (state !== 'dead' || now >= mtimeMs + ctx.leaseTtlMs || isClosed(fs, dir, leaseId)) continue;
    if (best === undefined || mtimeMs > best.mtimeMs) best = { leaseId, holder, mtimeMs };
  }
  if (best === undefined) return { kind: 'new' };
  const { leaseId, holder } = best;
  const ticket = join(dir, `${leaseId}.${holder.pid}-${holder.pidStartTime ?? 'x'}.claim`);
  let fd: number;
  try {
    fd = createExclusive(fs, ticket, 0o644);
  } catch (error) {
    if (!hasErrorCode(error, 'EEXIST')) throw error;
    // Another process claimed this predecessor first (and may be renewing it by now).
    const current = readLease(ctx, leaseId)?.holder;
    throw inUse(
      ctx,
      current !== undefined && current.pid !== holder.pid ? current.pid : undefined,
      leaseId,
    );
  }
  try {
    writeAll(fs, fd, leaseBody(ctx.self));
  } finally {
    fs.closeSync(fd);
  }
  // The ticket is ours: the lease is still the predecessor's, unless its deadline passed.
  const again = readLease(ctx, leaseId);
  if (
    again === undefined ||
    again.holder.pid !== holder.pid ||
    again.holder.pidStartTime !== holder.pidStartTime
  ) {
    throw inUse(ctx, again?.holder.pid, leaseId);
  }
  const at = ctx.now();
  if (at >= again.mtimeMs + ctx.leaseTtlMs) return { kind: 'new' };
  replaceBody(fs, leasePath(dir, leaseId)!, leaseBody(ctx.self), at);
  return { kind: 'continued', leaseId };
}

/**
 * Right after a new lease (`ownLeaseId`) was first written: no other live
 * process holds a lease of this instance id. Of two processes that made new
 * leases at the same instant, the one that looks second sees the first; if
 * both see each other, both are refused (and retry on their next call).
 *
 * @throws LedgerInstanceInUseError when one does.
 */
export function checkAlone(ctx: ClaimContext, ownLeaseId: string): void {
  scan(ctx, ctx.now(), ownLeaseId);
}

interface Seen {
  leaseId: string;
  holder: LeaseHolder;
  mtimeMs: number;
  state: HolderState;
}

// The lease files of this instance id and boot but `skip` (not this
// process's), each with its holder's state; throws for a live holder.
function scan(ctx: ClaimContext, now: number, skip: string | undefined): Seen[] {
  let names: string[];
  try {
    names = ctx.fs.readdirSync(ctx.dir);
  } catch (error) {
    if (hasErrorCode(error, 'ENOENT')) return [];
    throw error;
  }
  const seen: Seen[] = [];
  for (const name of names) {
    const leaseId = LEASE_FILE.exec(name)?.[1];
    if (leaseId === undefined || leaseId === skip) continue;
    const lease = readLease(ctx, leaseId);
    if (lease === undefined) continue;
    const state = holderState(ctx, lease.holder);
    if (state === 'self' || state === 'foreign') continue;
    if (
      state === 'alive-confirmed' ||
      (state === 'alive' && now - lease.mtimeMs <= windowOf(ctx))
    ) {
      throw inUse(ctx, lease.holder.pid, leaseId);
    }
    seen.push({ leaseId, ...lease, state });
  }
  return seen;
}

function windowOf(ctx: ClaimContext): number {
  return ctx.leaseTtlMs + ctx.marginMs;
}

// The holder and mtime of a lease file of this instance id and boot, or undefined.
function readLease(
  ctx: ClaimContext,
  leaseId: string,
): { holder: LeaseHolder; mtimeMs: number } | undefined {
  const file = leasePath(ctx.dir, leaseId);
  if (file === undefined) return undefined;
  try {
    const stat = ctx.fs.lstatSync(file, { throwIfNoEntry: false });
    if (stat === undefined || !stat.isFile()) return undefined;
    const text = readLedgerFile(ctx.fs, file, { pool: ctx.pool, maxBytes: MAX_BODY_BYTES });
    const holder = text === undefined ? undefined : parseLeaseBody(text);
    if (holder === undefined) return undefined;
    if (holder.instanceId !== ctx.self.instanceId || holder.bootId !== ctx.self.bootId) {
      return undefined;
    }
    return { holder, mtimeMs: stat.mtimeMs };
  } catch {
    // Unreadable or refused (not ours, a link...): not a lease this instance can continue.
    return undefined;
  }
}

// Is the holder this process, another live one (confirmed by its start time or
// not), or gone (no such pid, or the pid now names a newer process)?
function holderState(ctx: ClaimContext, holder: LeaseHolder): HolderState {
  const { self } = ctx;
  if (holder.pidNs !== undefined && holder.pidNs !== self.pidNs) return 'foreign';
  const state = judgeProcess(
    { pid: holder.pid, startTime: holder.pidStartTime },
    { pid: self.pid, startTime: () => self.pidStartTime },
    (pid) => ctx.probe(pid),
    (pid) => ctx.startTimeOf(pid),
  );
  return state === 'gone' || state === 'reused' ? 'dead' : state;
}

function inUse(
  ctx: ClaimContext,
  pid: number | undefined,
  leaseId: string,
): LedgerInstanceInUseError {
  const { instanceId } = ctx.self;
  const who = pid === undefined ? 'another process' : `process ${pid}`;
  return new LedgerInstanceInUseError(
    ctx.pool,
    instanceId,
    pid,
    `Instance ${JSON.stringify(instanceId)} is in use by ${who} on this host (its lease ${join(ctx.dir, `${leaseId}.lease`)} names it), so this ledger (pid ${ctx.self.pid}) writes nothing: two live processes must never write rows under one instanceId. Stop ${who === 'another process' ? 'the other process' : `process ${pid}`} (a restart continues its lease once it is gone), or give this process another instanceId.`,
  );
}

// Replace a lease file's body atomically (a temp file renamed over it, its
// mtime set first), so the file is never missing or torn for the agents that watch it.
function replaceBody(fs: LedgerFs, file: string, body: string, nowMs: number): void {
  const temp = `${file}.${process.pid}-${Math.random().toString(36).slice(2, 10)}.tmp`;
  const fd = createExclusive(fs, temp, 0o644);
  try {
    try {
      writeAll(fs, fd, body);
      fs.futimesSync(fd, nowMs / 1000, nowMs / 1000);
    } finally {
      fs.closeSync(fd);
    }
    fs.renameSync(temp, file);
  } catch (error) {
    try {
      fs.unlinkSync(temp);
    } catch {
      // Renamed or gone.
    }
    throw error;
  }
}
