/**
 * CLI hygiene: one-line failures with a non-zero exit, suggestions for mistakes, usage
 * on the right stream, --version, --json shapes, and escaped output (no raw control
 * characters or terminal escapes), through `main` and once as a real process.
 */
import { execFile, execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { renderIsolationPlan } from 'scaler-primitives/nftables';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { main, VERSION } from '../../src/cli/main.js';

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'cli-hygiene-'));
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

async function cli(...argv: string[]) {
  let out = '';
  let err = '';
  const code = await main(argv, {
    out: (t) => {
      out += t;
    },
    err: (t) => {
      err += t;
    },
    env: { SCALER_PRIMITIVES_LEDGER_DIR: join(dir, 'ledger') },
  });
  return { code, out, err };
}

function file(name: string, content: string): string {
  const path = join(dir, name);
  writeFileSync(path, content);
  return path;
}

// Raw C0 (except newline), DEL, C1 (0x9b is a one-byte CSI) and bidi overrides.
// biome-ignore lint/suspicious/noControlCharactersInRegex: looking for them is the point.
const RAW_CONTROL = /[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/;

/** A failure: exactly one line on stderr, nothing on stdout, no stack frame. */
function oneLineFailure(result: { code: number; out: string; err: string }, code: number) {
  expect(result.code).toBe(code);
  expect(result.out).toBe('');
  expect(result.err.endsWith('\n')).toBe(true);
  expect(result.err.trimEnd().split('\n')).toHaveLength(1);
  expect(result.err).not.toMatch(/\n\s+at /);
  expect(result.err).not.toMatch(RAW_CONTROL);
}

describe('usage, help and version', () => {
  it('no arguments: usage on stderr, exit 2; --help: usage on stdout, exit 0', async () => {
    const none = await cli();
    expect(none).toMatchObject({ code: 2, out: '' });
    expect(none.err).toMatch(/^Usage: scaler-primitives /);
    const help = await cli('--help');
    expect(help).toMatchObject({ code: 0, err: '' });
    expect(help.out).toBe(none.err);
    expect((await cli('-h')).out).toBe(help.out);
  });

  it('--version and -v print the package version', async () => {
    expect(VERSION).toMatch(/^\d+\.\d+\.\d+/);
    expect(await cli('--version')).toEqual({ code: 0, out: `${VERSION}\n`, err: '' });
    expect(await cli('-v')).toEqual({ code: 0, out: `${VERSION}\n`, err: '' });
  });

  it.each([
    ['ledger', 'ls', /^Usage: scaler-primitives ledger ls/],
    ['ledger', 'usage', /^Usage: scaler-primitives ledger usage/],
    ['ledger', 'reap', /^Usage: scaler-primitives ledger reap/],
    ['ledger', 'release', /^Usage: scaler-primitives ledger release --pool P --agent A/],
    ['config', 'check', /^Usage: scaler-primitives config check/],
    ['nft', 'plan', /^Usage: scaler-primitives nft plan/],
    ['caps', 'encode', /^Usage: scaler-primitives caps encode/],
    ['caps', 'decode', /^Usage: scaler-primitives caps decode/],
    ['caps', 'dropin', /^Usage: scaler-primitives caps dropin/],
  ])('%s %s --help prints its own usage on stdout, exit 0', async (command, sub, usage) => {
    const result = await cli(command, sub, '--help');
    expect(result).toMatchObject({ code: 0, err: '' });
    expect(result.out).toMatch(usage);
    expect(result.out).toContain('Exit codes:');
  });
});

describe('mistakes are one line naming the option and the nearest valid one', () => {
  it.each<[string[], RegExp]>([
    [
      ['nft', 'plan', '--agnet', 'a', '--iifname', 'x'],
      /unknown option --agnet; did you mean --agent\?/,
    ],
    [
      ['caps', 'encode', '--cpu-qouta', '1%'],
      /unknown option --cpu-qouta; did you mean --cpu-quota\?/,
    ],
    [['config', 'check', 'f', '--jsn'], /unknown option --jsn; did you mean --json\?/],
    [['ledger', 'ls', '--dri', 'x'], /unknown option --dri; did you mean --dir\?/],
    [['nft', 'plan', '--agent'], /--agent needs a value/],
    [
      ['nft', 'plan', '--agent', '--iifname', 'x'],
      /--agent needs a value \(got the option --iifname\)/,
    ],
    [['caps', 'decode', '{}', '--json=yes'], /--json takes no value/],
    [
      ['nft', 'plan', '--agent', 'a', '--agent', 'b', '--iifname', 'x'],
      /--agent was given more than once/,
    ],
    [['ledger', 'lss'], /unknown subcommand "lss"; did you mean ls\?/],
    [['caps', 'encdoe'], /unknown subcommand "encdoe"; did you mean encode\?/],
    [['nft'], /missing subcommand: plan/],
    [['ledgr'], /unknown command "ledgr"; did you mean ledger\?/],
    [['--verison'], /unknown option "--verison"; did you mean --version\?/],
  ])('%j', async (argv, message) => {
    const result = await cli(...argv);
    oneLineFailure(result, 2);
    expect(result.err).toMatch(message);
  });

  it('an unknown subcommand of ledger creates no ledger directory', async () => {
    await cli('ledger', 'lss');
    expect(() => execFileSync('test', ['-e', join(dir, 'ledger')])).toThrow();
  });
});

describe('every failure is one line on stderr with a non-zero exit', () => {
  it('a missing --file, a directory, a FIFO and an oversized file', async () => {
    const missing = await cli('caps', 'decode', '--file', join(dir, 'nope.json'));
    oneLineFailure(missing, 1);
    expect(missing.err).toMatch(/ENOENT.*nope\.json/);

    mkdirSync(join(dir, 'adir'));
    const directory = await cli('caps', 'decode', '--file', join(dir, 'adir'));
    oneLineFailure(directory, 1);
    expect(directory.err).toMatch(/not a regular file/);

    // A FIFO with no writer: refused at once, never waited on.
    execFileSync('mkfifo', [join(dir, 'fifo')]);
    const fifo = await cli('nft', 'plan', '--agent', 'a', '--policy', join(dir, 'fifo'));
    oneLineFailure(fifo, 1);
    expect(fifo.err).toMatch(/not a regular file/);

    const big = file('big.json', ' '.repeat(1024 * 1024 + 1));
    const large = await cli('config', 'check', big);
    oneLineFailure(large, 1);
    expect(large.err).toMatch(/at most 1 MiB/);
  });

  it('malformed JSON and invalid values are one line with their code', async () => {
    const policy = await cli('nft', 'plan', '--agent', 'a', '--policy', file('p.json', '{'));
    oneLineFailure(policy, 1);
    expect(policy.err).toMatch(/not valid JSON/);
    const caps = await cli('caps', 'decode', '{"cpu_quota":"4 cores"}');
    oneLineFailure(caps, 1);
    expect(caps.err).toMatch(/\[ERR_CAPS_VALUE\]$/m);
  });

  it('nft plan --policy with a typo (denyall) fails closed, naming denyAll', async () => {
    const path = file('typo.json', JSON.stringify({ iifname: 'tap-a', denyall: true }));
    const result = await cli('nft', 'plan', '--agent', 'a', '--policy', path);
    oneLineFailure(result, 1);
    expect(result.err).toContain(
      'Unknown key "denyall" in isolation policy. Did you mean `denyAll`?',
    );
    expect(result.err).toContain('[ERR_INVALID_INPUT]');
  });

  it('hints name the CLI flag, not the library option behind it', async () => {
    const nft = await cli('nft', 'plan', '--agent', 'a', '--skuid', '1000', '--host-port', '22');
    oneLineFailure(nft, 1);
    expect(nft.err).toContain('remove `--host-port`');
    expect(nft.err).not.toContain('`hostAccess`');
    const caps = await cli('caps', 'encode', '--memory-max', '50%');
    oneLineFailure(caps, 1);
    expect(caps.err).toContain('`--allow-memory-percent`');
    expect(caps.err).not.toContain('`allowMemoryPercent`');
  });
});

describe('output is escaped', () => {
  const hostile = 'a\u001b[2J\u009b31m\u202ex';

  it('a value with terminal escapes is escaped in tables (caps decode --raw)', async () => {
    const value = JSON.stringify({ cpu_quota: hostile });
    const result = await cli('caps', 'decode', value, '--raw');
    expect(result.code).toBe(0);
    expect(result.out).not.toMatch(RAW_CONTROL);
    expect(result.out).toContain('a\\x1b[2J\\x9b31m\\u202ex');
  });

  it('--json escapes them too, and stays the same JSON value', async () => {
    const value = JSON.stringify({ memory_max: hostile });
    const result = await cli('caps', 'decode', value, '--raw', '--json');
    expect(result.out).not.toMatch(RAW_CONTROL);
    expect(JSON.parse(result.out)).toEqual({ memoryMax: hostile });
  });

  it('ids and names from a pool file are escaped in ledger ls and usage', async () => {
    const ledgerDir = join(dir, 'ledger');
    mkdirSync(ledgerDir, { mode: 0o700 });
    writeFileSync(
      join(ledgerDir, 'pool.json'),
      JSON.stringify({
        version: 1,
        cap: { maxCpu: 4 },
        reservations: [
          {
            instanceId: `i${hostile}`,
            pid: 1,
            bootId: 'other-boot',
            agentId: `agent${hostile}`,
            cpus: 1,
            memBytes: 1024,
            reservedAt: 0,
          },
        ],
      }),
      { mode: 0o600 },
    );
    for (const sub of ['ls', 'usage']) {
      const text = await cli('ledger', sub);
      expect(text.out + text.err).not.toMatch(RAW_CONTROL);
      const json = await cli('ledger', sub, '--json');
      expect(json.out + json.err).not.toMatch(RAW_CONTROL);
    }
    const ls = await cli('ledger', 'ls');
    expect(ls.code).toBe(0);
    expect(ls.out).toContain('agenta\\x1b[2J\\x9b31m\\u202ex');
    const json = await cli('ledger', 'ls', '--json');
    expect(JSON.parse(json.out)[0].reservations[0].agentId).toBe(`agent${hostile}`);
  });

  it('a file name with control characters is escaped in the error', async () => {
    const result = await cli('config', 'check', join(dir, `x${hostile}.json`));
    oneLineFailure(result, 1);
  });
});

describe('config check', () => {
  it('reports schema and cross-field problems together in one pass, each with its path', async () => {
    const doc = {
      globalMaxAgents: 4,
      machinePools: { host: { maxCpu: 8 } },
      scalers: [
        {
          name: 'a',
          type: 'container',
          maxAgents: -3,
          machinePool: 'nope',
          labelSets: [{ labels: ['linux'] }],
          typo: 1,
        },
        {
          name: 'a',
          type: 'container',
          maxAgents: 2,
          labelSets: [{ labels: ['scaler-primitives:x'] }],
        },
      ],
    };
    const result = await cli('config', 'check', file('c.json', JSON.stringify(doc)));
    expect(result.code).toBe(1);
    expect(result.err).toContain('5 problems');
    for (const path of [
      'scalers[0].maxAgents:',
      'scalers[0]: Unknown key "typo" (did you mean "type"?); accepted keys: name, type, maxAgents,',
      'scalers[0].machinePool: Unknown machine pool "nope"',
      'scalers[1].name:',
      'scalers[1].labelSets[0].labels[0]:',
    ]) {
      expect(result.err).toContain(`  ${path}`);
    }
    const json = JSON.parse((await cli('config', 'check', join(dir, 'c.json'), '--json')).out);
    expect(json.ok).toBe(false);
    expect(json.errors).toHaveLength(5);
    expect(json.errors[0]).toEqual({
      path: ['scalers', 0, 'maxAgents'],
      message: expect.any(String),
    });
  });
});

describe('--json shapes', () => {
  it('nft plan --json: agent, family, table, layout, script, commands', async () => {
    const result = await cli('nft', 'plan', '--agent', 'a', '--iifname', 'tap-a', '--json');
    expect(result.code).toBe(0);
    const doc = JSON.parse(result.out);
    expect(Object.keys(doc)).toEqual(['agent', 'family', 'table', 'layout', 'script', 'commands']);
    expect(doc).toMatchObject({
      agent: 'a',
      family: 'inet',
      table: 'scaler_primitives',
      layout: 'vmap',
    });
    expect(doc.script).toBe(renderIsolationPlan('a', { iifname: 'tap-a' }, { includeTable: true }));
    expect(doc.commands[0]).toEqual({ op: 'add table' });
  });

  it('caps encode --json and dropin --json', async () => {
    const encode = JSON.parse((await cli('caps', 'encode', '--cpus', '2', '--json')).out);
    expect(encode).toEqual({ value: '{"cpu_quota":"200%"}', caps: { cpuQuota: '200%' } });
    const dropin = JSON.parse(
      (await cli('caps', 'dropin', '--memory-max', '1G', '--section', 'Scope', '--json')).out,
    );
    expect(dropin).toEqual({
      section: 'Scope',
      caps: { memoryMax: '1G' },
      text: '[Scope]\nMemoryMax=1G\n',
    });
  });
});

describe('the bin', () => {
  it('as a process: --version, no arguments (exit 2), an unknown option (exit 2, one line)', async () => {
    const bin = join(import.meta.dirname, '../../src/cli/index.ts');
    const run = promisify(execFile);
    const version = await run(process.execPath, ['--import', 'tsx', bin, '--version']);
    expect(version.stdout).toBe(`${VERSION}\n`);
    await expect(run(process.execPath, ['--import', 'tsx', bin])).rejects.toMatchObject({
      code: 2,
      stdout: '',
      stderr: expect.stringMatching(/^Usage: /),
    });
    await expect(
      run(process.execPath, ['--import', 'tsx', bin, 'caps', 'encode', '--cpuz', '1']),
    ).rejects.toMatchObject({
      code: 2,
      stderr: expect.stringMatching(
        /^scaler-primitives caps: unknown option --cpuz; did you mean --cpus\?.*\n$/,
      ),
    });
  });
});
