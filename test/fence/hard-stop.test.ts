/**
 * The default hard stop, for real: an agent process whose lease is about to
 * run out is killed with SIGKILL, its process group with it (a build it
 * started goes too), and an `onExpire` that throws does not save it.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { leaseEnv } from 'scaler-primitives/fence';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { hasSystem } from '../helpers/system.js';

const agentScript = join(import.meta.dirname, '../fixtures/fence-agent.ts');

let dir: string;
let leaseFile: string;
let log: string;
const started: number[] = [];

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'fence-stop-'));
  leaseFile = join(dir, 'a.lease');
  log = join(dir, 'log');
  writeFileSync(leaseFile, '');
  writeFileSync(log, '');
});
afterEach(() => {
  for (const pid of started.splice(0)) {
    try {
      process.kill(-pid, 'SIGKILL');
    } catch {
      // Gone.
    }
  }
  rmSync(dir, { recursive: true, force: true });
});

/** Alive and not a zombie. */
function running(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2)[0] !== 'Z';
  } catch {
    return false;
  }
}

function lines(): Array<Record<string, unknown>> {
  return readFileSync(log, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((line) => JSON.parse(line) as Record<string, unknown>);
}

async function untilLogged(event: string, timeoutMs = 30_000): Promise<Record<string, unknown>> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const found = lines().find((line) => line.event === event);
    if (found) return found;
    if (Date.now() > end) throw new Error(`no "${event}" in the log: ${readFileSync(log, 'utf8')}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/**
 * Start the agent as its own process group leader (as a backend would,
 * `detached`); with `wrap`, under that command (e.g. `unshare`).
 */
function startAgent(config: Record<string, unknown>, leaseMs: number, wrap: string[] = []) {
  const command = [
    process.execPath,
    '--import',
    'tsx',
    agentScript,
    JSON.stringify({ log, agent: 'agent-1', ...config }),
  ];
  const [file, ...args] = [...wrap, ...command];
  const child = spawn(file!, args, {
    detached: true,
    stdio: ['ignore', 'ignore', 'pipe'],
    env: {
      ...process.env,
      ...leaseEnv({ location: { kind: 'file', path: leaseFile }, leaseMs, marginMs: 0 }),
    },
  });
  started.push(child.pid!);
  let stderr = '';
  child.stderr!.setEncoding('utf8').on('data', (chunk: string) => {
    stderr += chunk;
  });
  const exited = new Promise<{ signal: NodeJS.Signals | null; stderr: string }>((resolve) =>
    child.on('exit', (_code, signal) => resolve({ signal, stderr })),
  );
  return { child, exited };
}

describe('the default hard stop', () => {
  it('SIGKILLs the agent and its process group when the lease is not renewed', async () => {
    const leaseMs = 20_000;
    const agent = startAgent({ stop: 'default', child: true }, leaseMs);
    const { child: grandchild } = (await untilLogged('child')) as { child: number };
    expect(running(grandchild)).toBe(true);
    // Renewed until now; then the controller "dies": the fence fires 3/4 lease after.
    const stoppedRenewing = Date.now();
    utimesSync(leaseFile, stoppedRenewing / 1000 - 14, stoppedRenewing / 1000 - 14);
    const exit = await agent.exited;
    const firedAfter = Date.now() - stoppedRenewing;
    expect(exit.signal).toBe('SIGKILL');
    expect(exit.stderr).toMatch(
      /scaler-primitives\/fence: the controller's lease \(.*a\.lease\) was not renewed in time: stopping agent process \d+ with SIGKILL/,
    );
    // mtime + 3/4 lease = 1 s after we stopped renewing (one poll of 1 s at most later).
    expect(firedAfter).toBeGreaterThanOrEqual(900);
    expect(firedAfter).toBeLessThan(3000);
    const end = Date.now() + 2000;
    while (running(grandchild) && Date.now() < end) await new Promise((r) => setTimeout(r, 20));
    expect(running(grandchild)).toBe(false);
  });

  it.runIf(hasSystem(['root'], 'the fence as PID 1'))(
    'stops an agent that is PID 1 of its PID namespace (a container init cannot SIGKILL itself)',
    async () => {
      const agent = startAgent({ stop: 'default', child: true }, 20_000, [
        'unshare',
        '--pid',
        '--fork',
        '--kill-child',
        '--mount-proc',
      ]);
      const started = await untilLogged('child');
      expect(started.pid).toBe(1);
      const now = Date.now() / 1000;
      utimesSync(leaseFile, now - 14.5, now - 14.5);
      const exit = await agent.exited;
      // unshare passes on how its child ended: code 137, the agent's exit.
      expect(exit.stderr).toMatch(/stopping agent process 1 with SIGKILL/);
      expect(agent.child.exitCode).toBe(137);
    },
  );

  it('stops the agent even when its onExpire throws', async () => {
    const agent = startAgent({ stop: 'throws' }, 20_000);
    await untilLogged('start');
    rmSync(leaseFile); // the controller closed its ledger
    const exit = await agent.exited;
    expect(exit.signal).toBe('SIGKILL');
    expect(exit.stderr).toMatch(/lease \(.*\) file is gone: stopping agent process/);
  });

  it('a renewed lease keeps the agent running (the test above can tell)', async () => {
    const agent = startAgent({ stop: 'default' }, 1200);
    const renew = setInterval(() => {
      const now = Date.now() / 1000;
      utimesSync(leaseFile, now, now);
    }, 100);
    try {
      await untilLogged('start');
      await new Promise((resolve) => setTimeout(resolve, 2500));
      expect(agent.child.exitCode).toBeNull();
      expect(agent.child.signalCode).toBeNull();
    } finally {
      clearInterval(renew);
    }
    // Renewals stop: gone within the lease.
    const exit = await agent.exited;
    expect(exit.signal).toBe('SIGKILL');
  });
});
