/**
 * examples/11-controller.ts with real child-process agents and a real
 * MachineLedger: run to the end, and interrupted by SIGINT midway. Either way
 * no agent process and no pool row is left behind.
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { MachineLedger } from 'scaler-primitives/ledger';
import { afterEach, describe, expect, it } from 'vitest';

const root = join(import.meta.dirname, '..');
const dirs: string[] = [];

afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

interface Run {
  stdout: () => string;
  exited: Promise<number | null>;
  kill: (signal: NodeJS.Signals) => void;
  waitFor: (pattern: RegExp, count?: number) => Promise<void>;
}

function startController(dir: string): Run {
  const child = spawn(process.execPath, ['--import', 'tsx', join('examples', '11-controller.ts')], {
    cwd: root,
    env: { ...process.env, CONTROLLER_LEDGER_DIR: dir },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let out = '';
  const waiters: Array<() => void> = [];
  child.stdout.on('data', (chunk: Buffer) => {
    out += chunk.toString();
    for (const wake of waiters.splice(0)) wake();
  });
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  return {
    stdout: () => out,
    exited,
    kill: (signal) => child.kill(signal),
    async waitFor(pattern, count = 1) {
      const global = new RegExp(pattern.source, 'g');
      while ((out.match(global) ?? []).length < count) {
        const more = new Promise<void>((resolve) => waiters.push(resolve));
        const ended = exited.then(() => {
          throw new Error(`The controller exited before printing ${pattern} x${count}:\n${out}`);
        });
        await Promise.race([more, ended]);
      }
    },
  };
}

function pids(stdout: string): number[] {
  return [...stdout.matchAll(/spawned \S+ pid (\d+)/g)].map((m) => Number(m[1]));
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ESRCH') return false;
    throw error;
  }
}

async function poolRows(dir: string) {
  const ledger = new MachineLedger({ instanceId: 'examples-controller-check', dir });
  try {
    return await ledger.list('this-host');
  } finally {
    await ledger.close();
  }
}

describe('examples/11-controller.ts', () => {
  it('runs its queue to the end and exits 0, leaving no process and no row', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'controller-test-'));
    dirs.push(dir);
    const run = startController(dir);
    expect(await run.exited).toBe(0);
    const out = run.stdout();
    expect(out).toMatch(/queue drained: 10 done, 1 failed, 0 busy agent\(s\)/);
    expect(out).toMatch(/msi +failed \(no-match\)/);
    expect(out).toMatch(/\(small, warm\)/); // a warm agent took a job
    expect(out).toMatch(/shut down: 0 child process\(es\) left, exit 0/);
    const spawned = pids(out);
    expect(spawned.length).toBeGreaterThanOrEqual(5);
    expect(spawned.filter(alive)).toEqual([]);
    expect(existsSync(join(dir, 'this-host.json'))).toBe(true); // rows were written, then released
    expect(await poolRows(dir)).toEqual([]);
  }, 120_000);

  it('on SIGINT midway shuts down with nothing left behind', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'controller-test-'));
    dirs.push(dir);
    const run = startController(dir);
    // Midway: agents spawned, jobs running, none finished yet.
    await run.waitFor(/spawned \S+ pid \d+/, 3);
    await run.waitFor(/ -> \S+ \(/, 1);
    expect(run.stdout()).not.toMatch(/queue drained/);
    const before = pids(run.stdout());
    expect(before.filter(alive).length).toBeGreaterThan(0);
    expect((await poolRows(dir)).length).toBeGreaterThan(0);
    run.kill('SIGINT');
    expect(await run.exited).toBe(130);
    const out = run.stdout();
    expect(out).toMatch(/SIGINT: shutting down/);
    expect(out).toMatch(/shut down: 0 child process\(es\) left, exit 130/);
    expect(pids(out).filter(alive)).toEqual([]);
    expect(await poolRows(dir)).toEqual([]);
  }, 120_000);
});
