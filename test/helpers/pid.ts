/** Is a process with this pid alive (signal 0 reaches it)? No test framework: fixtures use it too. */
export function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}
