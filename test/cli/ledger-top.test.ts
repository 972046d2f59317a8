/**
 * `ledger top`: as a real process (plain lines and JSON), and through `main` with a
 * terminal-like io (redraws).
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { MachineLedger } from 'scaler-primitives/ledger';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { main } from '../../src/cli/main.js';

const cli = join(import.meta.dirname, '../../src/cli/index.ts');
let dir: string;

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'ledger-top-'));
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

async function run(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await promisify(execFile)(
      process.execPath,
      ['--import', 'tsx', cli, ...args],
      { env: { ...process.env, SCALER_PRIMITIVES_LEDGER_DIR: dir } },
    );
    return { code: 0, stdout, stderr };
  } catch (error) {
    const e = error as { code: number; stdout: string; stderr: string };
    return { code: e.code, stdout: e.stdout, stderr: e.stderr };
  }
}

const GiB = 2 ** 30;

async function seed(): Promise<void> {
  const ledger = new MachineLedger({ instanceId: 'seed', dir, fsync: false });
  ledger.registerPool('build', { maxCpu: 8, maxMemoryBytes: 16 * GiB });
  ledger.registerPool('open', {});
  await ledger.reserve('build', 'a1', 2, 4 * GiB);
  await ledger.reserve('build', 'a2', 2, 0);
  await ledger.reserve('open', 'o1', 1, GiB);
  ledger.registerPool('gpus', { devices: { 'nvidia.com/gpu': ['0', '1', '2', '3'] } });
  await ledger.reserve('gpus', 'g1', 0, 0, { extended: { 'nvidia.com/gpu': 1 } });
  // Keep the rows live for the CLI (their lease file stays): no close().
  // A row of another boot: stale.
  const file = join(dir, 'stale.json');
  writeFileSync(
    file,
    JSON.stringify({
      version: 1,
      cap: { maxCpu: 4 },
      reservations: [
        {
          instanceId: 'x',
          pid: 1,
          bootId: 'other-boot',
          agentId: 'z',
          cpus: 1,
          memBytes: 0,
          reservedAt: 1,
        },
      ],
    }),
  );
}

describe('ledger top', () => {
  it('prints plain frames when stdout is not a terminal: rows, bars against the cap, stale rows', async () => {
    await seed();
    const { code, stdout } = await run('ledger', 'top', '--count', '2', '--interval', '0.1');
    expect(code).toBe(0);
    expect(stdout.includes('\u001b')).toBe(false);
    const frames = stdout.split(/^ledger top /m).filter(Boolean);
    expect(frames).toHaveLength(2);
    const build = frames[0]!.split('\n').find((l) => l.startsWith('build'))!;
    expect(build).toMatch(
      /^build\s+2\s+0\s+\[#{10}\.{10}\] 4\/8\s+\[#{5}\.{15}\] 4Gi\/16Gi\s+\d+s\s+-$/,
    );
    expect(frames[0]).toMatch(/^gpus\s+1\s+0\s.*\s+\d+s\s+nvidia\.com\/gpu 1\/4 free 1,2,3$/m);
    expect(frames[0]).toMatch(/^open\s+1\s+0\s+1 \(no cap\)\s+1Gi \(no cap\)/m);
    expect(frames[0]).toMatch(/^stale\s+0\s+1\s+\[\.{20}\] 0\/4/m);
  });

  it('streams one JSON object per interval with --json', async () => {
    await seed();
    const { code, stdout } = await run(
      'ledger',
      'top',
      '--json',
      '--count',
      '3',
      '--interval',
      '0.1',
    );
    expect(code).toBe(0);
    const lines = stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    expect(lines).toHaveLength(3);
    const build = lines[2].pools.find((p: { pool: string }) => p.pool === 'build');
    expect(build).toMatchObject({
      rows: 2,
      stale: 0,
      cpu: { used: 4, max: 8 },
      memoryBytes: { used: 4 * GiB, max: 16 * GiB },
    });
    expect(typeof build.oldestReservedAt).toBe('number');
    expect(lines[0].pools.map((p: { pool: string }) => p.pool)).toEqual([
      'build',
      'gpus',
      'open',
      'stale',
    ]);
    expect(lines[0].pools[1].extended).toEqual({
      'nvidia.com/gpu': { used: 1, max: 4, free: ['1', '2', '3'] },
    });
    expect(build.extended).toEqual({});
    expect(lines[0].dir).toBe(dir);
  });

  it('redraws in place on a terminal and shows a pool that appears between frames', async () => {
    const redraws: string[] = [];
    const out: string[] = [];
    const io = {
      out: (t: string) => out.push(t),
      err: (t: string) => out.push(t),
      env: { SCALER_PRIMITIVES_LEDGER_DIR: dir },
      isTTY: true,
      redraw: (t: string) => {
        redraws.push(t);
        if (redraws.length === 1) {
          writeFileSync(
            join(dir, 'late.json'),
            JSON.stringify({ version: 1, cap: {}, reservations: [] }),
          );
        }
      },
    };
    await seed();
    expect(await main(['ledger', 'top', '--count', '2', '--interval', '0.1'], io)).toBe(0);
    expect(out).toEqual([]);
    expect(redraws).toHaveLength(2);
    expect(redraws[0]).not.toMatch(/^late/m);
    expect(redraws[1]).toMatch(/^late\s+0\s+0/m);
  });

  it('names the flag of a bad value and refuses a pool argument', async () => {
    await seed();
    const bad = await run('ledger', 'top', '--interval', '0');
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/--interval must be a number of seconds from 0.1 to 3600, got "0"/);
    const count = await run('ledger', 'top', '--count', '1.5');
    expect(count.code).toBe(2);
    expect(count.stderr).toMatch(/--count must be a whole number >= 1, got "1.5"/);
    const pool = await run('ledger', 'top', 'build', '--count', '1');
    expect(pool.code).toBe(2);
    const help = await run('ledger', 'top', '--help');
    expect(help.code).toBe(0);
    expect(help.stdout).toMatch(/--interval S/);
  });
});
