/**
 * The `ledger` commands, run as a real process (`node --import tsx src/cli/index.ts`).
 */
import { execFile } from 'node:child_process';
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { MachineLedger } from '../../src/ledger/index.js';

const cli = join(import.meta.dirname, '../../src/cli/index.ts');
let dir: string;

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'ledger-cli-'));
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

async function run(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await promisify(execFile)(
      process.execPath,
      ['--import', 'tsx', cli, ...args],
      { env: { ...process.env, KICI_MACHINE_LEDGER_DIR: dir } },
    );
    return { code: 0, stdout, stderr };
  } catch (error) {
    const e = error as { code: number; stdout: string; stderr: string };
    return { code: e.code, stdout: e.stdout, stderr: e.stderr };
  }
}

const row = (over: Record<string, unknown>) => ({
  instanceId: 'peer',
  pid: 999_999,
  bootId: 'x',
  agentId: 'a',
  cpus: 1,
  memBytes: 1024,
  reservedAt: 0,
  ...over,
});

async function seed() {
  const ledger = new MachineLedger({ instanceId: 'orch-a', dir });
  ledger.registerPool('build', { maxCpu: 4, maxMemoryBytes: 8192 });
  await ledger.reserve('build', 'agent-1', 1.5, 2048);
  await ledger.reserve('build', 'agent-22', 0.25, 1024);
  // Keep orch-a's lease fresh for the duration of a test by not closing it yet.
  return ledger;
}

describe('scaler-primitives ledger', () => {
  it('ls prints an aligned table of live and stale rows in every pool', async () => {
    const ledger = await seed();
    writeFileSync(
      join(dir, 'gpu.json'),
      JSON.stringify({
        version: 1,
        cap: {},
        reservations: [row({ agentId: 'old', bootId: 'gone-boot' })],
      }),
    );
    const { code, stdout, stderr } = await run('ledger', 'ls');
    await ledger.close();
    expect(stderr).toBe('');
    expect(code).toBe(0);
    const lines = stdout.trimEnd().split('\n');
    expect(lines[0]).toMatch(
      /^POOL\s+AGENT\s+INSTANCE\s+PID\s+CPU\s+MEMORY\s+RESERVED_AT\s+STATE$/,
    );
    expect(lines).toHaveLength(4);
    expect(lines[1]).toMatch(/^build\s+agent-1\s+orch-a\s+\d+\s+1\.5\s+2Ki\s+\S+\s+live$/);
    expect(lines[2]).toMatch(/^build\s+agent-22\s+orch-a\s+\d+\s+250m\s+1Ki\s+\S+\s+live$/);
    expect(lines[3]).toMatch(/^gpu\s+old\s+peer\s+999999\s+1\s+1Ki\s+\S+\s+stale \(other-boot\)$/);
    // Aligned: every column starts at the same offset on every line.
    const stateColumn = lines[0]!.indexOf('STATE');
    for (const line of lines.slice(1)) expect(line.slice(stateColumn)).toMatch(/^(live|stale)/);
  });

  it('usage and ls --json for one pool', async () => {
    const ledger = await seed();
    const usage = await run('ledger', 'usage', 'build', '--json');
    const ls = await run('ledger', 'ls', 'build', '--json', '--dir', dir);
    const table = await run('ledger', 'usage');
    await ledger.close();
    expect(usage.code).toBe(0);
    expect(JSON.parse(usage.stdout)).toEqual([
      {
        pool: 'build',
        cpus: 1.75,
        maxCpu: 4,
        memBytes: 3072,
        maxMemoryBytes: 8192,
        live: 2,
        stale: 0,
      },
    ]);
    const parsed = JSON.parse(ls.stdout);
    expect(
      parsed[0].reservations.map((r: { agentId: string; state: string }) => [r.agentId, r.state]),
    ).toEqual([
      ['agent-1', 'live'],
      ['agent-22', 'live'],
    ]);
    expect(table.stdout).toMatch(/^POOL\s+CPU\s+MAX_CPU\s+MEMORY\s+MAX_MEMORY\s+LIVE\s+STALE\n/);
    expect(table.stdout).toMatch(/\nbuild\s+1\.75\s+4\s+3Ki\s+8Ki\s+2\s+0\n$/);
  });

  it('reap removes stale rows and release removes one agent', async () => {
    const ledger = await seed();
    await ledger.close(); // its lease ends: its rows become stale for others
    writeFileSync(
      join(dir, 'gpu.json'),
      JSON.stringify({
        version: 1,
        cap: {},
        reservations: [
          row({ bootId: 'gone-boot' }),
          row({
            agentId: 'kept',
            bootId: readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim(),
          }),
        ],
      }),
    );
    const reap = await run('ledger', 'reap', '--json');
    expect(reap.code).toBe(0);
    expect(JSON.parse(reap.stdout)).toEqual([
      { pool: 'build', reaped: 2 },
      { pool: 'gpu', reaped: 1 },
    ]);
    const none = await run(
      'ledger',
      'release',
      '--pool',
      'gpu',
      '--agent',
      'kept',
      '--instance',
      'other',
    );
    expect(none).toMatchObject({ code: 0 });
    expect(none.stdout).toMatch(/No reservation for agent kept of instance other/);
    const released = await run('ledger', 'release', '--pool', 'gpu', '--agent', 'kept');
    expect(released.stdout).toBe('Released agent kept in pool gpu\n');
    expect(JSON.parse(readFileSync(join(dir, 'gpu.json'), 'utf8')).reservations).toEqual([]);
  });

  it.each([
    [['ledger'], 2, /missing subcommand/],
    [['ledger', 'frobnicate'], 2, /unknown subcommand "frobnicate"/],
    [['ledger', 'ls', '--bogus'], 2, /unknown option --bogus/],
    [['ledger', 'release', '--pool', 'p'], 2, /needs --pool and --agent/],
    [['ledger', 'ls', '../etc'], 1, /Invalid pool name "\.\.\/etc"/],
    [['nope'], 2, /unknown command "nope"/],
  ])('%j exits %i with the reason on stderr', async (args, code, message) => {
    const result = await run(...args);
    expect(result.code).toBe(code);
    expect(result.stderr).toMatch(message);
    expect(result.stdout).toBe('');
  });

  it('a corrupt pool file: exit 1, the file named on stderr, left untouched', async () => {
    writeFileSync(join(dir, 'bad.json'), '{"version": 1, "cap": {}, "reserv');
    for (const args of [['ls'], ['reap', 'bad'], ['release', '--pool', 'bad', '--agent', 'a']]) {
      const result = await run('ledger', ...args);
      expect(result.code).toBe(1);
      expect(result.stderr).toContain(join(dir, 'bad.json'));
      expect(result.stderr).toContain('ERR_LEDGER_CORRUPT');
    }
    expect(readFileSync(join(dir, 'bad.json'), 'utf8')).toBe('{"version": 1, "cap": {}, "reserv');
  });

  it('a world-writable directory is refused', async () => {
    chmodSync(dir, 0o777);
    const result = await run('ledger', 'ls');
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(/world-writable.*ERR_LEDGER_DIR_UNSAFE/s);
  });

  it('--help prints usage on stdout and exits 0', async () => {
    const top = await run('--help');
    expect(top).toMatchObject({ code: 0, stderr: '' });
    expect(top.stdout).toMatch(/ledger\s+Inspect and repair/);
    const sub = await run('ledger', '--help');
    expect(sub.code).toBe(0);
    expect(sub.stdout).toMatch(/release --pool P --agent A \[--instance I\]/);
  });
});
