/**
 * examples/11-controller.ts runs its agents with ProcessBackend: when an agent
 * dies in the middle of its job (its process group SIGKILLed from outside),
 * the backend's `onExit` tells the controller, which fails that job instead of
 * leaving it "running", frees the agent's capacity and drains the rest of its
 * queue. Real processes and a real MachineLedger.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { MachineLedger } from 'scaler-primitives/ledger';
import { afterEach, describe, expect, it } from 'vitest';
import { alive, groupMembers, until } from '../helpers/process-agents.js';

const root = join(import.meta.dirname, '..', '..');
const dirs: string[] = [];

afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

describe('examples/11-controller.ts when an agent dies mid-job', () => {
  it('fails that job, frees its capacity and drains the rest of the queue', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'controller-agent-dies-'));
    dirs.push(dir);
    const child = spawn(
      process.execPath,
      ['--import', 'tsx', join('examples', '11-controller.ts')],
      {
        cwd: root,
        env: { ...process.env, CONTROLLER_LEDGER_DIR: dir },
        stdio: ['ignore', 'pipe', 'inherit'],
      },
    );
    let out = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
      out += chunk;
    });
    const exited = new Promise<number | null>((resolve) => child.on('exit', resolve));
    try {
      // `build` (1.2 s) starts on a large agent: kill that agent's whole group.
      await until(
        () => `build to start:\n${out}`,
        () => / build -> \S+ \(large\)/.test(out),
      );
      const agentId = / build -> (\S+) \(large\)/.exec(out)![1]!;
      const pid = Number(new RegExp(`spawned ${agentId} pid (\\d+)`).exec(out)![1]);
      expect(alive(pid)).toBe(true);
      process.kill(-pid, 'SIGKILL');
      expect(await exited).toBe(0);
      expect(groupMembers(pid)).toEqual([]);
    } finally {
      child.kill('SIGKILL');
    }
    expect(out).toMatch(/build +failed: agent exited \(SIGKILL\)/);
    expect(out).toMatch(/build +failed \(agent exited \(SIGKILL\)\)/);
    expect(out).toMatch(/queue drained: 9 done, 2 failed, 0 busy agent\(s\)/);
    expect(out).toMatch(/shut down: 0 child process\(es\) left, exit 0/);
    const ledger = new MachineLedger({ instanceId: 'agent-dies-check', dir });
    try {
      expect(await ledger.list('this-host')).toEqual([]);
    } finally {
      await ledger.close();
    }
  }, 120_000);
});
