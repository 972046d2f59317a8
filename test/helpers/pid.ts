import { readdirSync, readFileSync } from 'node:fs';
import { parseProcStat } from '../../src/internal/proc-stat.js';

/** Is a process with this pid alive (signal 0 reaches it)? No test framework: fixtures use it too. */
export function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/**
 * Send SIGSTOP to `pid` and resolve once every thread of it is stopped.
 * `kill` returns before the stop is in force: a thread running on another CPU
 * goes on until the kernel interrupts it, and on a loaded machine a server
 * has been seen answering requests sent right after the signal (state still
 * `R` in /proc). A test that needs the process stopped waits for it here.
 */
export async function stopProcess(pid: number, timeoutMs = 10_000): Promise<void> {
  process.kill(pid, 'SIGSTOP');
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const states = readdirSync(`/proc/${pid}/task`).map((tid) => {
      try {
        return parseProcStat(readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8'))?.state ?? '?';
      } catch {
        return 'gone';
      }
    });
    // T: stopped by a signal (t: stopped by a tracer); a thread that ended is gone.
    if (states.every((state) => state === 'T' || state === 't' || state === 'gone')) return;
    if (Date.now() > deadline) throw new Error(`pid ${pid} not stopped: ${states.join(' ')}`);
    await new Promise((resolve) => setTimeout(resolve, 1));
  }
}
