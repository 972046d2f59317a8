/**
 * Facts about processes and the host, read from `/proc`: the boot id, whether a
 * pid is alive, and a process's start time (to tell a reused pid from its first owner).
 */
import { bootIdFrom, parseProcStat } from '../internal/proc-stat.js';
import type { LedgerFs } from './fs.js';
import { hasErrorCode } from './fs.js';

/** Read the Linux boot id; `unknown-boot` where `/proc` has none (then only pids and leases decide). */
export function readBootId(fs: LedgerFs): string {
  return bootIdFrom(() => fs.readFileSync('/proc/sys/kernel/random/boot_id', 'utf8'));
}

/**
 * Whether a pid exists, by `kill(pid, 0)`. `EPERM` means the process exists but
 * belongs to another user, so it counts as alive.
 */
export function isProcessAlive(pid: number): boolean {
  if (!Number.isInteger(pid) || pid <= 0) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return hasErrorCode(error, 'EPERM');
  }
}

/**
 * A process's start time: `/proc/<pid>/stat` field 22, in clock ticks since boot.
 * `undefined` when it cannot be read (no such process, no `/proc`, another PID namespace).
 */
export function readProcessStartTime(fs: LedgerFs, pid: number): number | undefined {
  if (!Number.isInteger(pid) || pid <= 0) return undefined;
  let text: string;
  try {
    text = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return undefined;
  }
  return parseProcStat(text)?.startTime;
}

/**
 * This process's PID namespace (`/proc/self/ns/pid`, e.g. `pid:[4026531836]`):
 * pids name the same processes only within one. `undefined` where it cannot be read.
 */
export function readPidNamespace(fs: LedgerFs): string | undefined {
  try {
    const link = fs.readlinkSync('/proc/self/ns/pid', 'utf8');
    return typeof link === 'string' && link !== '' ? link : undefined;
  } catch {
    return undefined;
  }
}

/**
 * How a process recorded as `pid` (started at `startTime` clock ticks, when
 * known) stands now: this process (`self`), `gone` (no such pid), `reused`
 * (the pid names a process started at another time), or alive, `confirmed`
 * when its start time matched. A record without a start time, or a pid whose
 * start time cannot be read, counts as alive unconfirmed (never as gone).
 * `own` is this process's start time, read only when the pid is this one's.
 */
export function judgeProcess(
  recorded: { pid: number; startTime: number | undefined },
  own: { pid: number; startTime: () => number | undefined },
  probe: (pid: number) => boolean,
  startTimeOf: (pid: number) => number | undefined,
): 'self' | 'gone' | 'reused' | 'alive' | 'alive-confirmed' {
  if (recorded.pid === own.pid) {
    if (recorded.startTime === undefined) return 'self';
    const ownStart = own.startTime();
    return ownStart === undefined || ownStart === recorded.startTime ? 'self' : 'reused';
  }
  if (!probe(recorded.pid)) return 'gone';
  if (recorded.startTime === undefined) return 'alive';
  const start = startTimeOf(recorded.pid);
  if (start === undefined) return 'alive';
  return start === recorded.startTime ? 'alive-confirmed' : 'reused';
}
