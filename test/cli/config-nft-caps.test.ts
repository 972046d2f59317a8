/**
 * The `config`, `nft` and `caps` commands, through the CLI's `main` (output and exit
 * codes captured) and once as a real process.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { main } from '../../src/cli/main.js';

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'cli-'));
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
    env: {},
  });
  return { code, out, err };
}

const good = {
  globalMaxAgents: 4,
  machinePools: { host: { maxCpu: 8 } },
  scalers: [
    {
      name: 'small',
      type: 'container',
      maxAgents: 3,
      machinePool: 'host',
      resourceCap: { maxCpu: '4', maxMemory: '8Gi' },
      labelSets: [{ labels: ['linux'] }, { labels: ['linux', 'docker'] }],
      warmPool: { size: 1 },
    },
  ],
};

function file(name: string, content: string): string {
  const path = join(dir, name);
  writeFileSync(path, content);
  return path;
}

describe('config check', () => {
  it('prints a summary of a valid file and exits 0', async () => {
    const path = file('ok.json', JSON.stringify(good));
    const { code, out } = await cli('config', 'check', path);
    expect(code).toBe(0);
    expect(out).toContain('valid. 1 scaler, globalMaxAgents 4, 1 machine pool (host)');
    expect(out).toMatch(
      /small\s+container\s+3\s+\[linux\] \[linux,docker\]\s+-\s+host\s+4 cpu, 8Gi\s+1 \(idle 300s\)/,
    );
  });

  it('lists every machine pool of a scaler that draws from several', async () => {
    const multi = {
      globalMaxAgents: 4,
      machinePools: {
        host: { maxCpu: 8, maxMemory: '16Gi' },
        'gpu-box': { devices: { 'nvidia.com/gpu': ['0', '1'] } },
      },
      scalers: [
        {
          name: 'gpu',
          type: 'container',
          maxAgents: 2,
          machinePools: ['host', 'gpu-box'],
          labelSets: [{ labels: ['gpu'] }],
        },
      ],
    };
    const { code, out } = await cli('config', 'check', file('multi.json', JSON.stringify(multi)));
    expect(code).toBe(0);
    expect(out).toMatch(/gpu\s+container\s+2\s+\[gpu\]\s+-\s+host,gpu-box\s/);
  });

  it('prints every problem with its path and exits 1', async () => {
    const bad = structuredClone(good) as Record<string, unknown> & typeof good;
    bad.globalMaxAgents = -1;
    (bad.scalers[0] as Record<string, unknown>).machinePool = 'nope';
    (bad.scalers[0] as Record<string, unknown>).labelSets = [{ labels: ['scaler-primitives:x'] }];
    const { code, err } = await cli('config', 'check', file('bad.json', JSON.stringify(bad)));
    expect(code).toBe(1);
    expect(err).toContain('3 problems');
    expect(err).toContain('  globalMaxAgents: ');
    expect(err).toContain('  scalers[0].machinePool: Unknown machine pool "nope"');
    expect(err).toContain(
      '  scalers[0].labelSets[0].labels[0]: Label "scaler-primitives:x" uses the reserved prefix',
    );
  });

  it('schema errors and cross-field errors together, in one pass (exit 1)', async () => {
    // A mistyped maxAgents (an unknown key, and maxAgents missing) beside an unknown
    // machinePool in the same scaler, and a duplicate name in a scaler with a type error.
    const bad = structuredClone(good) as { scalers: Array<Record<string, unknown>> };
    const first = bad.scalers[0]!;
    delete first.maxAgents;
    first.maxAgnets = 3;
    first.machinePool = 'gpu';
    bad.scalers.push({ ...structuredClone(good.scalers[0]), type: 7, warmPool: undefined });
    const path = file('mixed.json', JSON.stringify(bad));
    const { code, err } = await cli('config', 'check', path);
    expect(code).toBe(1);
    expect(err.split('\n').slice(1, -1)).toEqual([
      '  scalers[0].maxAgents: Invalid input: expected number, received undefined',
      expect.stringMatching(
        /^ {2}scalers\[0\]: Unknown key "maxAgnets" \(did you mean "maxAgents"\?\); accepted keys: name, type, maxAgents, /,
      ),
      '  scalers[1].type: Invalid input: expected string, received number',
      '  scalers[0].machinePool: Unknown machine pool "gpu"; declare it under machinePools (known: host)',
      '  scalers[1].name: Scaler name "small" is already used by scalers[0]',
    ]);
    expect(err).toContain('5 problems');
    const json = JSON.parse((await cli('config', 'check', path, '--json')).out);
    expect(json.errors.map((e: { path: unknown[] }) => e.path)).toEqual([
      ['scalers', 0, 'maxAgents'],
      ['scalers', 0],
      ['scalers', 1, 'type'],
      ['scalers', 0, 'machinePool'],
      ['scalers', 1, 'name'],
    ]);
  });

  it('--json prints the parsed config or the errors', async () => {
    const ok = await cli('config', 'check', file('ok.json', JSON.stringify(good)), '--json');
    expect(JSON.parse(ok.out).config.scalers[0].resourceCap).toEqual({
      maxCpu: 4,
      maxMemoryBytes: 8 * 2 ** 30,
    });
    const bad = await cli('config', 'check', file('b.json', '{"scalers":[]}'), '--json');
    expect(bad.code).toBe(1);
    expect(JSON.parse(bad.out)).toEqual({
      ok: false,
      errors: [{ path: ['globalMaxAgents'], message: expect.any(String) }],
    });
  });

  it('reports unreadable and malformed files', async () => {
    expect((await cli('config', 'check', join(dir, 'missing.json'))).err).toContain('ENOENT');
    const broken = await cli('config', 'check', file('x.json', '{"globalMaxAgents": 1,'));
    expect(broken.code).toBe(1);
    expect(broken.err).toContain('not valid JSON');
  });

  it('reads YAML when the yaml package is installed (it is, in this dev tree)', async () => {
    const text = [
      'globalMaxAgents: 2',
      'scalers:',
      '  - name: small',
      '    type: container',
      '    maxAgents: two',
      '    labelSets: [{ labels: [linux] }]',
    ].join('\n');
    const { code, err } = await cli('config', 'check', file('c.yaml', text));
    expect(code).toBe(1);
    expect(err).toContain('scalers[0].maxAgents:');
  });

  it.each([
    [['config'], /missing subcommand: check/],
    [['config', 'lint', 'x'], /unknown subcommand "lint"/],
    [['config', 'check'], /missing <file>/],
    [['config', 'check', 'a', 'b'], /expected one file/],
    [['config', 'check', 'a', '--bogus'], /unknown option --bogus/],
  ])('usage errors exit 2: %j', async (argv, message) => {
    const { code, err } = await cli(...argv);
    expect(code).toBe(2);
    expect(err).toMatch(message);
    expect(err).toContain('--help');
  });
});

describe('nft plan', () => {
  it('prints the plan for flags, as renderIsolationPlan would', async () => {
    const { code, out } = await cli(
      'nft',
      'plan',
      '--agent',
      'ci-42',
      '--iifname',
      'tap-ci-42',
      '--allow',
      '10.20.30.0/24',
      '--host-port',
      '8080',
      '--host-port',
      '53/udp',
    );
    expect(code).toBe(0);
    expect(out).toContain(
      'add rule inet scaler_primitives agent-ci-42-fwd ip daddr 10.20.30.0/24 accept',
    );
    expect(out).toContain('tcp dport 8080 accept');
    expect(out).toContain('udp dport 53 accept');
    expect(out).toContain(
      'add element inet scaler_primitives fwd_iif { "tap-ci-42" : jump agent-ci-42-fwd }',
    );
    // The plan declares its table: `nft -c -f -` accepts it on a host without the table.
    expect(out.split('\n')[0]).toBe('add table inet scaler_primitives');
    expect(out.indexOf('add map inet scaler_primitives fwd_iif ')).toBeLessThan(
      out.indexOf('create chain inet scaler_primitives agent-ci-42-fwd'),
    );
  });

  it('--agent-only prints only the agent part, as addIsolationRules adds to a table that exists', async () => {
    const args = ['nft', 'plan', '--agent', 'ci-42', '--iifname', 'tap-ci-42'];
    const whole = await cli(...args);
    const agent = await cli(...args, '--agent-only');
    expect(agent.code).toBe(0);
    expect(agent.out.split('\n')[0]).toBe('create chain inet scaler_primitives agent-ci-42-fwd');
    expect(agent.out).not.toContain('add table');
    expect(agent.out).not.toContain('add map');
    expect(whole.out.endsWith(agent.out)).toBe(true);
    const json = JSON.parse((await cli(...args, '--agent-only', '--json')).out);
    expect(json.commands[0]).toEqual({ op: 'create chain', chain: 'agent-ci-42-fwd' });
  });

  it('reads a policy file; --table and --layout are passed on', async () => {
    const policy = file('p.json', JSON.stringify({ saddr: '172.30.0.5', denyAll: true }));
    const { code, out } = await cli(
      'nft',
      'plan',
      '--agent',
      'ci-7',
      '--policy',
      policy,
      '--table',
      'ci',
      '--layout',
      'rules',
    );
    expect(code).toBe(0);
    expect(out).toContain('table inet ci');
    expect(out).toContain('172.30.0.5');
  });

  it('--family ip plans an IPv4-only table: no IPv6 rule or map; inet is the default', async () => {
    const args = ['nft', 'plan', '--agent', 'ci-42', '--iifname', 'tap-ci-42'];
    const ip = await cli(...args, '--family', 'ip');
    expect(ip.code).toBe(0);
    expect(ip.out).toContain('add table ip scaler_primitives\n');
    expect(ip.out).toContain('create chain ip scaler_primitives agent-ci-42-fwd\n');
    expect(ip.out).toContain('add map ip scaler_primitives fwd_v4 ');
    expect(ip.out).not.toContain('fwd_v6');
    expect(ip.out).not.toContain('ip6');
    expect(ip.out).not.toContain('icmpv6');
    expect(ip.out).not.toContain(' inet ');
    const inet = await cli(...args);
    expect(inet.code).toBe(0);
    expect(inet.out).toContain('add table inet scaler_primitives\n');
    expect(inet.out).toContain('add map inet scaler_primitives fwd_v6 ');
    expect((await cli(...args, '--family', 'inet')).out).toBe(inet.out);
    const json = JSON.parse(
      (await cli(...args, '--family', 'ip', '--table', 'kici', '--json')).out,
    );
    expect(json).toMatchObject({ family: 'ip', table: 'kici' });
    expect(json.script).toContain('add table ip kici\n');
  });

  it('--family ip refuses an IPv6 agent address, also from a policy file (exit 1)', async () => {
    const flags = await cli('nft', 'plan', '--agent', 'a', '--saddr', 'fd00::5', '--family', 'ip');
    expect(flags.code).toBe(1);
    expect(flags.out).toBe('');
    expect(flags.err).toContain('fd00::5 is IPv6');
    expect(flags.err).toContain('Use `--family inet`');
    const policy = file('v6.json', JSON.stringify({ saddr: 'fd00::5' }));
    const fromFile = await cli('nft', 'plan', '--agent', 'a', '--policy', policy, '--family', 'ip');
    expect(fromFile.code).toBe(1);
    expect(fromFile.err).toContain('Use `--family inet`');
    expect((await cli('nft', 'plan', '--agent', 'a', '--policy', policy)).code).toBe(0);
  });

  it('refuses unsafe input before it reaches nft (exit 1, message names the value)', async () => {
    const { code, err } = await cli('nft', 'plan', '--agent', 'ci-1', '--iifname', 'eth0";flush');
    expect(code).toBe(1);
    expect(err).toContain('eth0\\";flush');
  });

  it.each([
    [['nft', 'plan', '--iifname', 'tap0'], /missing --agent/],
    [['nft', 'plan', '--agent', 'a'], /give the agent identity/],
    [['nft', 'plan', '--agent', 'a', '--iifname', 't', '--saddr', '10.0.0.1'], /give one identity/],
    [
      ['nft', 'plan', '--agent', 'a', '--iifname', 't', '--host-port', '80/sctp'],
      /--host-port expects/,
    ],
    [['nft', 'plan', '--agent', 'a', '--skuid', 'root'], /--skuid expects a numeric/],
    [['nft', 'plan', '--agent', 'a', '--iifname', 't', '--layout', 'flat'], /--layout must be/],
    [
      ['nft', 'plan', '--agent', 'a', '--iifname', 't', '--family', 'ip6'],
      /--family must be inet \(IPv4 and IPv6\) or ip \(IPv4 only\), got "ip6"/,
    ],
    [['nft', 'plan', '--agent', 'a', '--iifname', 't', '--family', 'INET'], /got "INET"/],
    [['nft', 'plan', '--agent', 'a', '--iifname', 't', '--family'], /--family needs a value/],
    [['nft', 'plan', '--agent', 'a', '--policy', 'p', '--iifname', 't'], /cannot be combined/],
    [['nft', 'apply'], /unknown subcommand "apply"/],
  ])('usage errors exit 2: %j', async (argv, message) => {
    const { code, err } = await cli(...argv);
    expect(code).toBe(2);
    expect(err).toMatch(message);
  });
});

describe('caps', () => {
  it('encode from systemd values or from resources', async () => {
    expect((await cli('caps', 'encode', '--cpu-quota', '400%', '--memory-max', '8G')).out).toBe(
      '{"cpu_quota":"400%","memory_max":"8G"}\n',
    );
    expect((await cli('caps', 'encode', '--cpus', '3.5', '--memory', '6Gi')).out).toBe(
      '{"cpu_quota":"350%","memory_max":"6G"}\n',
    );
  });

  it('decode prints the caps and what they mean; --json; --file', async () => {
    const value = '{"cpu_quota":"150%","memory_max":"512M","io_weight":"9"}';
    const { code, out } = await cli('caps', 'decode', value);
    expect(code).toBe(0);
    expect(out).toMatch(/cpu_quota\s+CPUQuota=\s+150%\s+1\.5 cores/);
    expect(out).toMatch(/memory_max\s+MemoryMax=\s+512M\s+512Mi/);
    expect(JSON.parse((await cli('caps', 'decode', value, '--json')).out)).toEqual({
      cpuQuota: '150%',
      memoryMax: '512M',
    });
    const path = file('v.json', value);
    expect((await cli('caps', 'decode', '--file', path, '--json')).code).toBe(0);
  });

  it('dropin renders the unit section', async () => {
    expect((await cli('caps', 'dropin', '--cpu-quota', '200%', '--section', 'Scope')).out).toBe(
      '[Scope]\nCPUQuota=200%\n',
    );
    expect((await cli('caps', 'dropin', '--from-value', '{"memory_max":"4G"}')).out).toBe(
      '[Service]\nMemoryMax=4G\n',
    );
  });

  it('invalid systemd values exit 1 naming the field', async () => {
    const enc = await cli('caps', 'encode', '--cpu-quota', '4');
    expect(enc.code).toBe(1);
    expect(enc.err).toContain('Invalid --cpu-quota "4"');
    const dec = await cli('caps', 'decode', '{"memory_max":"50%"}');
    expect(dec.code).toBe(1);
    expect(
      (await cli('caps', 'decode', '{"memory_max":"50%"}', '--allow-memory-percent')).code,
    ).toBe(0);
    expect((await cli('caps', 'decode', 'not json')).err).toContain('not UTF-8 JSON');
  });

  it.each([
    [['caps'], /missing subcommand/],
    [['caps', 'encode'], /give at least one of/],
    [['caps', 'encode', '--cpus', '1', '--cpu-quota', '100%'], /not both/],
    [['caps', 'decode'], /missing value/],
    [['caps', 'dropin', '--cpus', '1', '--section', 'Unit'], /--section must be/],
    [['caps', 'dropin', '--from-value', '{}', '--cpus', '1'], /cannot be combined/],
  ])('usage errors exit 2: %j', async (argv, message) => {
    const { code, err } = await cli(...argv);
    expect(code).toBe(2);
    expect(err).toMatch(message);
  });
});

describe('the bin', () => {
  it('runs as a process: help for every command, exit codes', async () => {
    const bin = join(import.meta.dirname, '../../src/cli/index.ts');
    const run = promisify(execFile);
    for (const command of ['config', 'nft', 'caps']) {
      const { stdout } = await run(process.execPath, ['--import', 'tsx', bin, command, '--help']);
      expect(stdout).toMatch(/^Usage: scaler-primitives /);
      expect(stdout).toContain('Exit codes:');
    }
    const top = await run(process.execPath, ['--import', 'tsx', bin, '--help']);
    expect(top.stdout).toMatch(/config\s+Validate/);
    await expect(
      run(process.execPath, ['--import', 'tsx', bin, 'config', 'check', join(dir, 'none.json')]),
    ).rejects.toMatchObject({ code: 1 });
  });
});
