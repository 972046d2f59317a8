/**
 * The quickstart of docs/process.md (its first ```ts block) reaches a running
 * agent with a real process in under 20 lines. The block runs as it is shown
 * (under tsx, in a child process; test/docs/ts-blocks.test.ts type-checks it
 * against the built package), with two strings replaced: the state directory
 * and the agent's path, by a temp directory and a small agent script.
 */
import { spawn } from 'node:child_process';
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ProcessBackend } from 'scaler-primitives/process';
import { afterEach, describe, expect, it } from 'vitest';
import { tsFenceAt } from '../helpers/doc-project.js';
import { alive, readWhenWritten, until } from '../helpers/process-agents.js';

const root = join(import.meta.dirname, '..', '..');
const DIR = '/var/lib/my-ci/agents';
const AGENT = '/usr/local/bin/agent';
const cleanups: Array<() => Promise<void> | void> = [];

afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/** The body of the first ```ts block of docs/process.md. */
function firstTsBlock(): string[] {
  const lines = readFileSync(join(root, 'docs', 'process.md'), 'utf8').split('\n');
  for (let i = 0; i < lines.length; i++) {
    const fence = tsFenceAt(lines, i);
    if (fence) return fence.body;
  }
  throw new Error('docs/process.md has no ```ts block');
}

/** How many times `part` occurs in `text`. */
function count(text: string, part: string): number {
  return text.split(part).length - 1;
}

describe('the quickstart of docs/process.md', () => {
  it('is under 20 lines and, run as shown, starts a real agent process the backend records', async () => {
    const body = firstTsBlock();
    expect(body.length).toBeLessThan(20);
    const code = body.join('\n');
    expect(count(code, DIR)).toBe(1);
    expect(count(code, AGENT)).toBe(1);

    const work = mkdtempSync(join(tmpdir(), 'process-quickstart-'));
    cleanups.push(() => rmSync(work, { recursive: true, force: true }));
    const dir = join(work, 'agents');
    const agent = join(work, 'agent');
    // A small agent: says what it was given, then works until it is stopped.
    writeFileSync(
      agent,
      `#!/bin/sh\nprintf '%s\\n' "$@" > "${work}/args.tmp" && mv "${work}/args.tmp" "${work}/args"\nexec sleep 300\n`,
    );
    chmodSync(agent, 0o755);
    // A user's project is ESM (the block awaits at top level).
    writeFileSync(join(work, 'package.json'), JSON.stringify({ type: 'module', private: true }));
    writeFileSync(join(work, 'quickstart.ts'), code.replace(DIR, dir).replace(AGENT, agent));

    const controller = spawn(process.execPath, ['--import', 'tsx', join(work, 'quickstart.ts')], {
      cwd: root,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    cleanups.push(async () => {
      // The agent outlives its controller: stop it through a backend over the same directory.
      if (controller.exitCode === null && controller.signalCode === null) {
        const gone = new Promise((resolve) => controller.once('exit', resolve));
        controller.kill('SIGKILL');
        await gone;
      }
      await new ProcessBackend({ dir, command: ['false'] }).shutdown();
    });
    let out = '';
    let err = '';
    controller.stdout.setEncoding('utf8').on('data', (chunk: string) => {
      out += chunk;
    });
    controller.stderr.setEncoding('utf8').on('data', (chunk: string) => {
      err += chunk;
    });
    await until(
      () => `the quickstart to print its result (stdout: ${out}; stderr: ${err})`,
      () => /agentId: '[^']+'/.test(out),
    );
    expect(out).toMatch(/kind: 'spawned'/);
    const agentId = /agentId: '([^']+)'/.exec(out)![1]!;

    // A new backend over the directory lists the agent, and its process runs.
    const backend = new ProcessBackend({ dir, command: ['false'] });
    expect(await backend.list()).toEqual([agentId]);
    const record = JSON.parse(readFileSync(join(dir, `${agentId}.json`), 'utf8')) as {
      pid: number;
      command: string[];
    };
    expect(alive(record.pid)).toBe(true);
    expect(record.command).toEqual([agent, '--id', agentId, '--cpus', '1']);
    // The agent itself got the rendered argv.
    const args = (await readWhenWritten(join(work, 'args'))).split('\n');
    expect(args).toEqual(['--id', agentId, '--cpus', '1']);
  }, 60_000);
});
