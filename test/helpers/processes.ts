import { type ChildProcess, spawn } from 'node:child_process';
import { join } from 'node:path';
import { expect } from 'vitest';

const fixtures = join(import.meta.dirname, '../fixtures');

/** One JSON line a fixture printed. */
export type FixtureEvent = { event: string; [key: string]: unknown };

/** A running fixture process and what it printed so far. */
export interface FixtureProcess {
  child: ChildProcess;
  events: FixtureEvent[];
  stderr: () => string;
  /** Resolves with the first event of this name (rejects if the process exits first). */
  waitFor(event: string, timeoutMs?: number): Promise<FixtureEvent>;
  /** Resolves when the process has exited. */
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

/**
 * Start `test/fixtures/<script>` under `node --import tsx` (works from a clean
 * clone after `npm ci`).
 */
export function startFixture(
  script: string,
  args: string[],
  options: { wrap?: string[] } = {},
): FixtureProcess {
  const command = [process.execPath, '--import', 'tsx', join(fixtures, script), ...args];
  const [file, ...rest] = options.wrap ? [...options.wrap, ...command] : command;
  const child = spawn(file!, rest, { stdio: ['ignore', 'pipe', 'pipe'] });
  const events: FixtureEvent[] = [];
  const waiters: Array<() => void> = [];
  let err = '';
  let buffer = '';
  child.stdout!.setEncoding('utf8').on('data', (chunk: string) => {
    buffer += chunk;
    let newline = buffer.indexOf('\n');
    while (newline >= 0) {
      const line = buffer.slice(0, newline);
      buffer = buffer.slice(newline + 1);
      try {
        events.push(JSON.parse(line) as FixtureEvent);
      } catch {
        err += `stdout: ${line}\n`;
      }
      newline = buffer.indexOf('\n');
    }
    for (const wake of waiters.splice(0)) wake();
  });
  child.stderr!.setEncoding('utf8').on('data', (chunk: string) => {
    err += chunk;
  });
  let hasExited = false;
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => {
    child.on('exit', (code, signal) => {
      // Let the last stdout chunk arrive.
      setImmediate(() => {
        hasExited = true;
        for (const wake of waiters.splice(0)) wake();
        resolve({ code, signal });
      });
    });
  });
  return {
    child,
    events,
    stderr: () => err,
    exited,
    waitFor(event, timeoutMs = 30_000) {
      return new Promise((resolve, reject) => {
        const timer = setTimeout(
          () => reject(new Error(`timed out waiting for ${event} from ${script}; stderr: ${err}`)),
          timeoutMs,
        );
        const check = () => {
          const found = events.find((e) => e.event === event);
          if (found) {
            clearTimeout(timer);
            resolve(found);
          } else if (hasExited) {
            clearTimeout(timer);
            reject(new Error(`${script} exited before ${event}; stderr: ${err}`));
          } else {
            waiters.push(check);
          }
        };
        check();
      });
    },
  };
}

/**
 * Wait for a fixture to exit, assert it exited with code 0 (showing its stderr
 * when not), and return its `done` event.
 */
export async function finishFixture(fixture: FixtureProcess): Promise<FixtureEvent> {
  const exit = await fixture.exited;
  expect(exit, fixture.stderr()).toEqual({ code: 0, signal: null });
  return fixture.events.find((e) => e.event === 'done')!;
}

/** Kill a fixture if it is still running (for afterEach). */
export async function stopFixture(fixture: FixtureProcess, signal: NodeJS.Signals = 'SIGKILL') {
  if (fixture.child.exitCode === null && fixture.child.signalCode === null) {
    fixture.child.kill('SIGCONT');
    fixture.child.kill(signal);
  }
  await fixture.exited;
}
