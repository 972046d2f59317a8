/**
 * Every flag that takes a value, of every command: a bad value's error names the flag the
 * user typed (`--cpu-quota`), not the library option behind it (`cpuQuota`).
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CapsValueError, InvalidInputError } from 'scaler-primitives/errors';
import { afterAll, describe, expect, it } from 'vitest';
import { capsCommand } from '../../src/cli/commands/caps.js';
import { configCommand } from '../../src/cli/commands/config.js';
import { ledgerCommand } from '../../src/cli/commands/ledger.js';
import { nftCommand } from '../../src/cli/commands/nft.js';
import { flagMessage } from '../../src/cli/flags.js';
import { main } from '../../src/cli/main.js';
import type { CliCommand } from '../../src/cli/registry.js';

const dir = mkdtempSync(join(tmpdir(), 'cli-flags-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const ledgerDir = join(dir, 'ledger');
const aFile = join(dir, 'a-file');
const badCaps = join(dir, 'bad-caps.json');
const missing = join(dir, 'missing.json');
writeFileSync(aFile, 'not a directory');
writeFileSync(badCaps, '{"cpu_quota":"4"}');
mkdirSync(ledgerDir, { mode: 0o700 });

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
    env: {},
  });
  return { code, out, err };
}

const long = 'x'.repeat(300);
const nft = ['nft', 'plan', '--agent', 'ci-1'];

// [the flag, the command line with its bad value, the exit code]
const rows: Array<[CliCommand, string, string[], 1 | 2]> = [
  [capsCommand, '--cpu-quota', ['caps', 'encode', '--cpu-quota', '400'], 1],
  [capsCommand, '--memory-max', ['caps', 'encode', '--memory-max', '8X'], 1],
  [capsCommand, '--cpus', ['caps', 'encode', '--cpus', 'abc'], 1],
  [capsCommand, '--cpus', ['caps', 'dropin', '--cpus', '0'], 1],
  [capsCommand, '--memory', ['caps', 'encode', '--memory', '8 GiB'], 1],
  [capsCommand, '--file', ['caps', 'decode', '--file', missing], 1],
  [capsCommand, '--file', ['caps', 'decode', '--file', badCaps], 1],
  [capsCommand, '--from-value', ['caps', 'dropin', '--from-value', '{"cpu_quota":"4"}'], 1],
  [capsCommand, '--section', ['caps', 'dropin', '--cpus', '1', '--section', 'Unit'], 2],
  [nftCommand, '--agent', ['nft', 'plan', '--agent', 'a b', '--iifname', 'tap0'], 1],
  [nftCommand, '--iifname', [...nft, '--iifname', 'tap 0'], 1],
  [nftCommand, '--saddr', [...nft, '--saddr', '10.0.0.300'], 1],
  [nftCommand, '--skuid', [...nft, '--skuid', '4294967295'], 1],
  [nftCommand, '--skuid', [...nft, '--skuid', 'root'], 2],
  [nftCommand, '--gateway', [...nft, '--iifname', 'tap0', '--gateway', '10.0.0.0/8'], 1],
  [nftCommand, '--allow', [...nft, '--iifname', 'tap0', '--allow', '10.0.0.1/8'], 1],
  [nftCommand, '--host-port', [...nft, '--iifname', 'tap0', '--host-port', '70000'], 1],
  [nftCommand, '--host-port', [...nft, '--iifname', 'tap0', '--host-port', '80/sctp'], 2],
  [nftCommand, '--metadata', [...nft, '--iifname', 'tap0', '--metadata', 'metadata'], 1],
  [nftCommand, '--blocked', [...nft, '--iifname', 'tap0', '--blocked', '10.0.0.0/33'], 1],
  [nftCommand, '--policy', [...nft, '--policy', missing], 1],
  [nftCommand, '--policy', [...nft, '--policy', aFile], 1],
  [nftCommand, '--table', [...nft, '--iifname', 'tap0', '--table', 'my table'], 1],
  [nftCommand, '--family', [...nft, '--iifname', 'tap0', '--family', 'ip6'], 2],
  [nftCommand, '--layout', [...nft, '--iifname', 'tap0', '--layout', 'flat'], 2],
  [ledgerCommand, '--dir', ['ledger', 'ls', '--dir', aFile], 1],
  [ledgerCommand, '--dir', ['ledger', 'usage', '--dir', join(dir, 'none')], 1],
  [
    ledgerCommand,
    '--pool',
    ['ledger', 'release', '--dir', ledgerDir, '--pool', 'a/b', '--agent', 'x'],
    1,
  ],
  [
    ledgerCommand,
    '--agent',
    ['ledger', 'release', '--dir', ledgerDir, '--pool', 'p', '--agent', long],
    1,
  ],
  [
    ledgerCommand,
    '--instance',
    ['ledger', 'release', '--dir', ledgerDir, '--pool', 'p', '--agent', 'a', '--instance', long],
    1,
  ],
  [ledgerCommand, '--interval', ['ledger', 'top', '--dir', ledgerDir, '--interval', '0'], 2],
  [ledgerCommand, '--count', ['ledger', 'top', '--dir', ledgerDir, '--count', '1.5'], 2],
];

// The library's option names for a flag's value (`cpuQuota`, `agentId`): camelCase words.
function optionNames(command: CliCommand, flag: string): string[] {
  return (command.flags?.[flag] ?? []).filter((n) => /^[a-z]+[A-Z][A-Za-z]*$/.test(n));
}

describe('a bad value names the flag', () => {
  it.each(rows.map(([command, ...rest]) => [command.name, ...rest, command] as const))(
    '%s %s: %j',
    async (_name, flag, argv, exit, command) => {
      const { code, out, err } = await cli(...argv);
      expect(code).toBe(exit);
      expect(out).toBe('');
      expect(err.trimEnd().split('\n')).toHaveLength(1);
      expect(err).toMatch(new RegExp(`(^|[^\\w-])${flag}([^\\w-]|$)`));
      for (const name of optionNames(command, flag)) {
        // The library's name appears only as part of the flag, never alone.
        expect(err).not.toMatch(new RegExp(`(^|[^\\w-])${name}([^\\w-]|$)`));
      }
    },
  );

  it('covers every flag that takes a value, of every command', () => {
    for (const command of [capsCommand, configCommand, ledgerCommand, nftCommand]) {
      const valued = Object.entries(command.options ?? {})
        .filter(([, spec]) => spec.type === 'string')
        .map(([name]) => `--${name}`);
      const tested = rows.filter(([c]) => c === command).map(([, flag]) => flag);
      expect(new Set(tested)).toEqual(new Set(valued));
    }
    // config has no flag with a value (only --json).
    expect(Object.values(configCommand.options ?? {}).map((o) => o.type)).toEqual(['boolean']);
  });

  it('the exact messages of the issue', async () => {
    expect((await cli('caps', 'encode', '--cpu-quota', '400')).err).toContain(
      'scaler-primitives caps: Invalid --cpu-quota "400": expected a positive percentage',
    );
    expect((await cli('caps', 'encode', '--memory-max', '50%')).err).toContain(
      'Invalid --memory-max "50%": expected bytes',
    );
    expect((await cli('caps', 'encode', '--memory-max', '50%')).err).toContain(
      'unless `--allow-memory-percent` is set',
    );
    expect((await cli('caps', 'encode', '--cpus', 'abc')).err).toContain(
      'scaler-primitives caps: --cpus: Invalid CPU quantity "abc".',
    );
  });

  it('a policy file keeps its own key names; only a flag given is named', async () => {
    const policy = join(dir, 'typo.json');
    writeFileSync(policy, JSON.stringify({ iifname: 'tap 0', denyAll: true }));
    const result = await cli(...nft, '--policy', policy);
    expect(result.err).toContain('--policy: Invalid interface name "tap 0"');
    writeFileSync(policy, JSON.stringify({ iifname: 'tap0', denyall: true }));
    expect((await cli(...nft, '--policy', policy)).err).toContain('Did you mean `denyAll`?');
    // A positional pool is not the --pool flag.
    const ls = await cli('ledger', 'ls', 'a/b', '--dir', ledgerDir);
    expect(ls.err).toContain('Invalid pool name "a/b"');
  });
});

describe('flagMessage', () => {
  const names = { '--cpu-quota': ['cpuQuota'], '--iifname': ['interface name', 'iifname'] };

  it('replaces the first name of the value, puts the flag first otherwise', () => {
    const caps = new CapsValueError('cpuQuota', '4', 'Invalid cpuQuota "4": expected "400%".');
    expect(flagMessage(caps, names, ['--cpu-quota', '4'])).toBe(
      'Invalid --cpu-quota "4": expected "400%".',
    );
    const input = new InvalidInputError(
      'interface name',
      'a b',
      'Invalid interface name "a b": expected a Linux interface name.',
    );
    expect(flagMessage(input, names, ['--iifname=a b'])).toBe(
      'Invalid --iifname "a b": expected a Linux interface name.',
    );
    const other = new InvalidInputError('iifname', 'x', 'Bad value.');
    expect(flagMessage(other, names, ['--iifname', 'x'])).toBe('--iifname: Bad value.');
  });

  it('names no flag that was not given (or given after --)', () => {
    const caps = new CapsValueError('cpuQuota', '4', 'Invalid cpuQuota "4".');
    expect(flagMessage(caps, names, [])).toBe('Invalid cpuQuota "4".');
    expect(flagMessage(caps, names, ['--', '--cpu-quota'])).toBe('Invalid cpuQuota "4".');
  });
});
