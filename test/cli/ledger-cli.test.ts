/**
 * The `ledger` commands, run as a real process (`node --import tsx src/cli/index.ts`).
 */
import { execFile, execFileSync } from 'node:child_process';
import {
  chmodSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { MachineLedger } from 'scaler-primitives/ledger';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';

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
      { env: { ...process.env, SCALER_PRIMITIVES_LEDGER_DIR: dir } },
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
      /^POOL\s+AGENT\s+INSTANCE\s+PID\s+CPU\s+MEMORY\s+DEVICES\s+RESERVED_AT\s+STATE$/,
    );
    expect(lines).toHaveLength(4);
    expect(lines[1]).toMatch(/^build\s+agent-1\s+orch-a\s+\d+\s+1\.5\s+2Ki\s+-\s+\S+\s+live$/);
    expect(lines[2]).toMatch(/^build\s+agent-22\s+orch-a\s+\d+\s+250m\s+1Ki\s+-\s+\S+\s+live$/);
    expect(lines[3]).toMatch(
      /^gpu\s+old\s+peer\s+999999\s+1\s+1Ki\s+-\s+\S+\s+stale \(other-boot\)$/,
    );
    // Aligned: every column starts at the same offset on every line.
    const stateColumn = lines[0]!.indexOf('STATE');
    for (const line of lines.slice(1)) expect(line.slice(stateColumn)).toMatch(/^(live|stale)/);
  });

  it("ls shows the device ids each row holds, and '?' for a row that counts a listed resource without ids", async () => {
    const gpu = 'nvidia.com/gpu';
    const ledger = new MachineLedger({ instanceId: 'orch-a', dir });
    ledger.registerPool('gpus', { maxCpu: 8, devices: { [gpu]: ['0', '1', '2', '3'] } });
    await ledger.reserve('gpus', 'two', 1, 0, { extended: { [gpu]: 2 } });
    await ledger.reserve('gpus', 'none', 1, 0);
    // A row of a writer that counts the resource and assigns no ids (kept live: no lease).
    const file = join(dir, 'gpus.json');
    const doc = JSON.parse(readFileSync(file, 'utf8'));
    doc.reservations.push(
      row({ agentId: 'unassigned', bootId: ledger.bootId, extended: { [gpu]: 1 } }),
    );
    writeFileSync(file, JSON.stringify(doc));
    const table = await run('ledger', 'ls', 'gpus');
    const json = await run('ledger', 'ls', 'gpus', '--json');
    const usage = await run('ledger', 'usage', 'gpus', '--json');
    const usageTable = await run('ledger', 'usage', 'gpus');
    await ledger.close();
    // Three held: two ids by `two`, one unknown id by `unassigned`; the ids no row holds.
    expect(JSON.parse(usage.stdout)[0].extended).toEqual({
      [gpu]: { used: 3, max: 4, free: ['2', '3'] },
    });
    expect(usageTable.stdout.trimEnd().split('\n')[1]).toMatch(
      /\s+nvidia\.com\/gpu 3\/4 free 2,3$/,
    );
    expect(table.stderr).toBe('');
    const lines = table.stdout.trimEnd().split('\n');
    expect(lines[0]).toMatch(/\sMEMORY\s+DEVICES\s+RESERVED_AT\s/);
    expect(
      lines.slice(1).map((line) => line.split(/\s+/).slice(0, 2).concat(line.split(/\s+/)[6]!)),
    ).toEqual([
      ['gpus', 'two', 'nvidia.com/gpu=0,1'],
      ['gpus', 'none', '-'],
      ['gpus', 'unassigned', 'nvidia.com/gpu=?'],
    ]);
    const [pool] = JSON.parse(json.stdout);
    expect(pool.cap.devices).toEqual({ [gpu]: ['0', '1', '2', '3'] });
    expect(pool.reservations.map((r: { devices?: unknown }) => r.devices)).toEqual([
      { [gpu]: ['0', '1'] },
      undefined,
      undefined,
    ]);
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
        extended: {},
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
    expect(table.stdout).toMatch(
      /^POOL\s+CPU\s+MAX_CPU\s+MEMORY\s+MAX_MEMORY\s+LIVE\s+STALE\s+EXTENDED\n/,
    );
    expect(table.stdout).toMatch(/\nbuild\s+1\.75\s+4\s+3Ki\s+8Ki\s+2\s+0\s+-\n$/);
  });

  it('reap removes rows of another boot (not lease-expired ones) and release removes one agent', async () => {
    const ledger = await seed();
    // Its lease file is gone without a closed marker (as after a crash), and a
    // one-shot command has not renewed a lease of its own for a window plus the
    // margin, so it judges no lease expired: those rows are left to the running
    // instances. (A clean close() leaves a marker: then any reaper takes them at once.)
    const leaseId = ledger.leaseId;
    await ledger.close();
    rmSync(join(dir, `${leaseId}.closed`));
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
      { pool: 'build', reaped: 0 },
      { pool: 'gpu', reaped: 1 },
    ]);
    expect(JSON.parse(readFileSync(join(dir, 'build.json'), 'utf8')).reservations).toHaveLength(2);
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
    expect(none.stdout).toMatch(/belongs to instance peer, not other; nothing to do/);
    const released = await run('ledger', 'release', '--pool', 'gpu', '--agent', 'kept');
    expect(released.stdout).toBe('Released agent kept in pool gpu (row of instance peer)\n');
    const again = await run('ledger', 'release', '--pool', 'gpu', '--agent', 'kept', '--json');
    expect(JSON.parse(again.stdout)).toEqual({
      pool: 'gpu',
      agent: 'kept',
      released: false,
      instanceId: null,
    });
    expect(JSON.parse(readFileSync(join(dir, 'gpu.json'), 'utf8')).reservations).toEqual([]);
  });

  it.each([
    [['ledger'], 2, /missing subcommand/],
    [['ledger', 'frobnicate'], 2, /unknown subcommand "frobnicate"/],
    [['ledger', 'ls', '--bogus'], 2, /unknown option --bogus/],
    [['ledger', 'ls', '--dir', ''], 2, /--dir needs a directory path, got an empty string/],
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

  it('a world-writable directory is refused even with the sticky bit, and a group-writable one', async () => {
    for (const mode of [0o1777, 0o770]) {
      chmodSync(dir, mode);
      const result = await run('ledger', 'usage');
      expect(result.code).toBe(1);
      expect(result.stderr).toContain(`mode ${mode.toString(8).padStart(4, '0')}`);
      expect(result.stderr).toContain(`chmod go-w ${dir}`);
      expect(result.stderr.trimEnd().split('\n')).toHaveLength(1);
    }
  });

  it('ls and usage with a mistyped --dir: exit 1, one line, nothing created', async () => {
    const typo = join(dir, 'no', 'such', 'ledger');
    for (const sub of ['ls', 'usage', 'reap']) {
      const result = await run('ledger', sub, '--dir', typo);
      expect(result.code).toBe(1);
      expect(result.stdout).toBe('');
      expect(result.stderr).toMatch(
        /No ledger directory: .* does not exist.*ERR_LEDGER_DIR_UNSAFE/,
      );
      expect(result.stderr.trimEnd().split('\n')).toHaveLength(1);
    }
    expect(existsSync(join(dir, 'no'))).toBe(false);
    const release = await run('ledger', 'release', '--pool', 'p', '--agent', 'a', '--dir', typo);
    expect(release.code).toBe(1);
    expect(existsSync(join(dir, 'no'))).toBe(false);
  });

  it('ls, usage and reap of a pool that does not exist: exit 1 naming it; nothing created', async () => {
    const ledger = await seed();
    await ledger.close();
    const before = readdirSync(dir).sort();
    for (const sub of ['ls', 'usage', 'reap']) {
      const result = await run('ledger', sub, 'nosuchpool');
      expect(result.code).toBe(1);
      expect(result.stderr).toMatch(/No pool "nosuchpool" in .*\(pools: build\)/);
      expect(result.stderr.trimEnd().split('\n')).toHaveLength(1);
    }
    expect(readdirSync(dir).sort()).toEqual(before);
    expect(existsSync(join(dir, 'nosuchpool.json'))).toBe(false);
  });

  it('ls of an empty existing directory says so, exit 0, and writes nothing', async () => {
    const result = await run('ledger', 'ls');
    expect(result).toMatchObject({ code: 0, stderr: '' });
    expect(result.stdout).toBe(`No pools in ${dir}\n`);
    expect(readdirSync(dir)).toEqual([]);
  });

  it('a dot pool name is refused', async () => {
    const result = await run('ledger', 'ls', '.hidden');
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(/Invalid pool name "\.hidden".*not starting with '\.'/);
  });

  it('a FIFO, a directory or a link to a secret at a pool path: exit 1 at once, never the contents', async () => {
    const secretDir = mkdtempSync(join(tmpdir(), 'ledger-cli-secret-'));
    try {
      const secret = join(secretDir, 'shadow');
      writeFileSync(secret, 'TOPSECRET-line\n');
      execFileSync('mkfifo', [join(dir, 'fifo.json')]);
      mkdirSync(join(dir, 'adir.json'));
      symlinkSync(secret, join(dir, 'link.json'));
      for (const [pool, what] of [
        ['fifo', /FIFO/],
        ['adir', /a directory/],
        ['link', /symbolic link/],
      ] as const) {
        const result = await run('ledger', 'ls', pool);
        expect(result.code).toBe(1);
        expect(result.stderr).toContain(join(dir, `${pool}.json`));
        expect(result.stderr).toMatch(what);
        expect(result.stderr).toContain('ERR_LEDGER_FILE_UNSAFE');
        expect(result.stderr).not.toContain('TOPSECRET');
      }
      // Listing every pool meets the same files and fails the same way, without hanging.
      const all = await run('ledger', 'ls');
      expect(all.code).toBe(1);
      expect(all.stderr).not.toContain('TOPSECRET');
      expect(readFileSync(secret, 'utf8')).toBe('TOPSECRET-line\n');
    } finally {
      rmSync(secretDir, { recursive: true, force: true });
    }
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
