/**
 * What `/proc` says about the agents' processes: a process's state and start
 * time (to tell a zombie from a live process and a reused pid from the agent),
 * and which processes are still in a process group.
 */
import { readdirSync, readFileSync } from 'node:fs';

/** A process's state letter (`R`, `S`, `Z`...) and start time in clock ticks since boot. */
export interface ProcStat {
  state: string;
  startTime: number;
  pgrp: number;
}

/** Parse `/proc/<pid>/stat`; `undefined` when it cannot be read (no such process, no `/proc`). */
export function readProcStat(pid: number): ProcStat | undefined {
  if (!Number.isInteger(pid) || pid <= 0) return undefined;
  let text: string;
  try {
    text = readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return undefined;
  }
  // Field 2 (comm) is in parentheses and may hold spaces or ')': split after the last ')'.
  const rest = text.slice(text.lastIndexOf(')') + 2).split(' ');
  // rest[0] is field 3 (state), rest[2] field 5 (pgrp), rest[19] field 22 (starttime).
  const startTime = Number(rest[19]);
  const pgrp = Number(rest[2]);
  if (!Number.isSafeInteger(startTime) || !Number.isSafeInteger(pgrp)) return undefined;
  return { state: rest[0] ?? '?', startTime, pgrp };
}

/** The Linux boot id; `unknown-boot` where `/proc` has none. */
export function readBootId(): string {
  try {
    return readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim() || 'unknown-boot';
  } catch {
    return 'unknown-boot';
  }
}

/**
 * How the process recorded as `pid`, started at `startTime`, stands now:
 * `running` (same start time, not a zombie), `gone` (no such process, or a
 * zombie: it has exited and waits to be reaped), or `reused` (the pid names a
 * process started at another time: a stranger).
 */
export function judgeAgentProcess(pid: number, startTime: number): 'running' | 'gone' | 'reused' {
  const stat = readProcStat(pid);
  if (stat === undefined) return 'gone';
  if (stat.startTime !== startTime) return 'reused';
  return stat.state === 'Z' || stat.state === 'X' ? 'gone' : 'running';
}

/** The pids of the live (not zombie) processes in process group `pgid`. */
export function groupMembers(pgid: number): number[] {
  // No process at all in the group (not even a zombie): no need to scan /proc.
  try {
    process.kill(-pgid, 0);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ESRCH') return [];
  }
  let names: string[];
  try {
    names = readdirSync('/proc');
  } catch {
    return [];
  }
  const members: number[] = [];
  for (const name of names) {
    if (!/^\d+$/.test(name)) continue;
    const stat = readProcStat(Number(name));
    if (stat && stat.pgrp === pgid && stat.state !== 'Z' && stat.state !== 'X') {
      members.push(Number(name));
    }
  }
  return members;
}
