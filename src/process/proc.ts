/**
 * What `/proc` says about the agents' processes: a process's state and start
 * time (to tell a zombie from a live process and a reused pid from the agent),
 * and which processes are still in a process group.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { bootIdFrom, type ProcStat, parseProcStat } from '../internal/proc-stat.js';

/** Read and parse `/proc/<pid>/stat`; `undefined` when it cannot be read (no such process, no `/proc`). */
export function readProcStat(pid: number): ProcStat | undefined {
  if (!Number.isInteger(pid) || pid <= 0) return undefined;
  try {
    return parseProcStat(readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return undefined;
  }
}

/** The Linux boot id; `unknown-boot` where `/proc` has none. */
export function readBootId(): string {
  return bootIdFrom(() => readFileSync('/proc/sys/kernel/random/boot_id', 'utf8'));
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
