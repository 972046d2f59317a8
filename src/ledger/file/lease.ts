/**
 * Leases: each ledger instance keeps a file `<dir>/<leaseId>.lease` fresh by
 * touching its mtime. Peers in any PID namespace can read the mtime, so a
 * peer whose lease has not been renewed for the lease window plus a margin,
 * while the judging instance renewed its own, is known to be gone.
 */
import { join } from 'node:path';
import type { LeaseState } from '../document/verdict.js';
import { hasErrorCode, type LedgerFs, writeAll } from '../fs.js';
import { createExclusive, openExistingForWrite } from './safe-fs.js';

const LEASE_ID = /^[A-Za-z0-9_-]{1,128}$/;

/** The lease file path for `leaseId`, or `undefined` when the id cannot name a file safely. */
export function leasePath(dir: string, leaseId: string): string | undefined {
  return LEASE_ID.test(leaseId) ? join(dir, `${leaseId}.lease`) : undefined;
}

/**
 * The closed marker of `leaseId`: `<dir>/<leaseId>.closed`, left by `close()`
 * after it removed the lease file. Its presence says the lease ended cleanly,
 * so any peer may reap the lease's rows at once (a missing lease file alone
 * may be a crash, judged after the lease and margin). `undefined` when the id
 * cannot name a file safely.
 */
export function closedPath(dir: string, leaseId: string): string | undefined {
  return LEASE_ID.test(leaseId) ? join(dir, `${leaseId}.closed`) : undefined;
}

/** Who holds a lease: what its lease file (and closed marker) says. */
export interface LeaseHolder {
  /** The ledger instance id. */
  instanceId: string;
  /** The holder's pid. */
  pid: number;
  /** The host's boot id when it was written. */
  bootId: string;
  /** The holder's start time (clock ticks since boot, `/proc/<pid>/stat` field 22), when known. */
  pidStartTime?: number;
  /** The holder's PID namespace (`/proc/self/ns/pid`), when known: its pid means nothing in another. */
  pidNs?: string;
}

/** The body of a lease file naming `holder` (one JSON line). */
export function leaseBody(holder: LeaseHolder): string {
  const { instanceId, pid, bootId, pidStartTime, pidNs } = holder;
  const body: LeaseHolder = { instanceId, pid, bootId };
  if (pidStartTime !== undefined) body.pidStartTime = pidStartTime;
  if (pidNs !== undefined) body.pidNs = pidNs;
  return `${JSON.stringify(body)}\n`;
}

/** The holder a lease file's body names, or `undefined` when it names none (torn, foreign). */
export function parseLeaseBody(text: string): LeaseHolder | undefined {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return undefined;
  }
  if (typeof value !== 'object' || value === null) return undefined;
  const { instanceId, pid, bootId, pidStartTime, pidNs } = value as Record<string, unknown>;
  if (typeof instanceId !== 'string' || typeof bootId !== 'string') return undefined;
  if (typeof pid !== 'number' || !Number.isSafeInteger(pid) || pid <= 0) return undefined;
  const holder: LeaseHolder = { instanceId, pid, bootId };
  if (typeof pidStartTime === 'number' && Number.isSafeInteger(pidStartTime) && pidStartTime >= 0) {
    holder.pidStartTime = pidStartTime;
  }
  if (typeof pidNs === 'string' && pidNs !== '') holder.pidNs = pidNs;
  return holder;
}

/**
 * Leave the closed marker of a lease whose file was just removed (best
 * effort: without it, peers judge the missing file after the lease and margin).
 */
export function markClosed(fs: LedgerFs, dir: string, leaseId: string, body: string): void {
  const file = closedPath(dir, leaseId);
  if (file === undefined) return;
  let fd: number | undefined;
  try {
    fd = createExclusive(fs, file, 0o644);
    writeAll(fs, fd, body);
  } catch {
    // Exists already (closed before), or the directory is not writable.
  } finally {
    if (fd !== undefined) fs.closeSync(fd);
  }
}

/**
 * Create or touch a lease file, setting its mtime to `nowMs`. The file is opened
 * without following a link and checked (a regular file of ours, not writable by
 * others) before its times are set through the descriptor; a new one is created
 * with `O_EXCL`, so nothing planted at the path is ever written through.
 *
 * @throws LedgerFileError when something other than our lease file is at the path.
 */
export async function touchLease(
  fs: LedgerFs,
  file: string,
  nowMs: number,
  body: string,
): Promise<void> {
  touchLeaseSync(fs, file, nowMs, body);
}

/** {@link touchLease}, synchronously (it is a few syscalls; used under the pool lock). */
export function touchLeaseSync(fs: LedgerFs, file: string, nowMs: number, body: string): void {
  const time = nowMs / 1000;
  // Two rounds: a file removed between the two calls (a peer's sweep) is recreated.
  for (let attempt = 0; ; attempt++) {
    let fd = openExistingForWrite(fs, file, '');
    if (fd === undefined) {
      try {
        fd = createExclusive(fs, file, 0o644);
        writeAll(fs, fd, body);
      } catch (error) {
        if (fd !== undefined) {
          fs.closeSync(fd);
          // A body cut short (a full disk) is not left behind.
          try {
            fs.unlinkSync(file);
          } catch {
            // Gone already.
          }
        }
        if (hasErrorCode(error, 'EEXIST') && attempt === 0) continue;
        throw error;
      }
    }
    try {
      fs.futimesSync(fd, time, time);
    } finally {
      fs.closeSync(fd);
    }
    return;
  }
}

/** How a peer's lease is judged (see {@link leaseState}). */
export interface LeaseJudgement {
  /** The lease window. */
  ttlMs: number;
  /** What is added to the window before a lease counts as expired (clock drift, timer delays). */
  marginMs: number;
  /**
   * Since when this instance has renewed its own lease without a break
   * (ledger clock, epoch ms); `undefined` while it is not renewing (no lease
   * yet, a failed renewal, a stall): then no peer is judged expired.
   */
  healthySince: number | undefined;
}

/**
 * Is a peer's lease fresh at `nowMs`? No instance judges others from its own
 * outage: the lease is `expired` only when it was seen not renewing for
 * `ttlMs + marginMs` while this instance was renewing its own, that is
 * `nowMs - max(mtime, healthySince) > ttlMs + marginMs`. A missing file counts
 * as renewed never; a missing file with the lease's closed marker (see
 * {@link closedPath}: a clean `close()`) is `expired` at once, whoever judges.
 * `fresh` within the window; `unknown` (rows kept) past it while this instance
 * cannot judge, and for an unreadable file or anything but a regular file (a
 * link is not followed). Synchronous: it runs under the pool lock and is one
 * `lstat` (two for a missing file).
 */
export function leaseState(
  fs: LedgerFs,
  dir: string,
  leaseId: string,
  nowMs: number,
  judgement: LeaseJudgement,
): LeaseState {
  const file = leasePath(dir, leaseId);
  if (file === undefined) return 'unknown';
  let mtimeMs: number;
  try {
    const stat = fs.lstatSync(file);
    if (!stat.isFile()) return 'unknown';
    mtimeMs = stat.mtimeMs;
  } catch (error) {
    if (!hasErrorCode(error, 'ENOENT')) return 'unknown';
    if (isClosed(fs, dir, leaseId)) return 'expired';
    mtimeMs = Number.NEGATIVE_INFINITY;
  }
  const window = judgement.ttlMs + judgement.marginMs;
  if (nowMs - mtimeMs <= window) return 'fresh';
  const { healthySince } = judgement;
  if (healthySince === undefined) return 'unknown';
  return nowMs - Math.max(mtimeMs, healthySince) > window ? 'expired' : 'unknown';
}

/** True when the closed marker of `leaseId` is in `dir` (a regular file; a link is not followed). */
export function isClosed(fs: LedgerFs, dir: string, leaseId: string): boolean {
  const file = closedPath(dir, leaseId);
  if (file === undefined) return false;
  try {
    return fs.lstatSync(file, { throwIfNoEntry: false })?.isFile() === true;
  } catch {
    return false;
  }
}
