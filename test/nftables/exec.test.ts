import { readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import {
  addIsolationRules,
  ensureTable,
  listIsolatedAgents,
  type NftRunner,
  removeIsolationRules,
  renderIsolationPlan,
  sweepIsolation,
  validateNftablesAvailability,
  verifyIsolation,
} from 'scaler-primitives/nftables';
import { describe, expect, it } from 'vitest';
import {
  isNftCommandError,
  isNftNotInstalledError,
  isNftPermissionError,
  type NftPermissionError,
} from '../../src/errors/nftables.js';
import type { NftRunResult } from '../../src/nftables/session.js';
import { codeOf } from '../helpers/source.js';

const fixtures = fileURLToPath(new URL('../fixtures/nftables/', import.meta.url));
const listing = readFileSync(`${fixtures}listing.json`, 'utf8');

interface Call {
  argv: string[];
  input: string | undefined;
}

/** A runner that records every call and answers from a script, in order. */
function scripted(...answers: Array<Partial<NftRunResult> | Error>) {
  const calls: Call[] = [];
  const runner: NftRunner = async (file, args, { input }) => {
    calls.push({ argv: [file, ...args], input });
    const answer = answers.shift() ?? {};
    if (answer instanceof Error) throw answer;
    return { stdout: '', stderr: '', exitCode: 0, ...answer };
  };
  return { calls, runner };
}

const ok = (stdout = ''): Partial<NftRunResult> => ({ stdout });
const fail = (stderr: string): Partial<NftRunResult> => ({ stderr, exitCode: 1 });
const noTable = fail('Error: No such file or directory\nlist table inet scaler_primitives\n');
const enoent = () => Object.assign(new Error('spawn nft ENOENT'), { code: 'ENOENT' });

describe('running nft', () => {
  it.each<[string, object, string[]]>([
    ['plain', {}, ['nft', 'list', 'tables']],
    ['sudo', { requireSudo: true }, ['sudo', '-n', 'nft', 'list', 'tables']],
    ['netns', { netns: 'ns1' }, ['ip', 'netns', 'exec', 'ns1', 'nft', 'list', 'tables']],
    [
      'sudo + netns + path',
      { requireSudo: true, netns: 'ns1', nftPath: '/usr/sbin/nft' },
      ['sudo', '-n', 'ip', 'netns', 'exec', 'ns1', '/usr/sbin/nft', 'list', 'tables'],
    ],
  ])('%s', async (_name, opts, argv) => {
    const { calls, runner } = scripted(ok());
    await validateNftablesAvailability({ ...opts, runner });
    expect(calls.map((c) => c.argv)).toEqual([argv]);
  });

  it('reports a missing binary as NftNotInstalledError', async () => {
    const { runner } = scripted(enoent());
    await expect(validateNftablesAvailability({ runner })).rejects.toSatisfy(
      isNftNotInstalledError,
    );
    const inNetns = scripted(fail('exec of "nft" failed: No such file or directory'));
    await expect(
      validateNftablesAvailability({ runner: inNetns.runner, netns: 'x' }),
    ).rejects.toSatisfy(isNftNotInstalledError);
  });

  it.each([
    'Error: Could not process rule: Operation not permitted',
    'netlink: Error: cache initialization failed: Operation not permitted',
    'sudo: a password is required',
  ])('reports %j as NftPermissionError naming CAP_NET_ADMIN and requireSudo', async (stderr) => {
    const { runner } = scripted(fail(stderr));
    const error = (await validateNftablesAvailability({ runner }).catch(
      (e) => e,
    )) as NftPermissionError;
    expect(isNftPermissionError(error)).toBe(true);
    expect(error.message).toMatch(/CAP_NET_ADMIN/);
    expect(error.message).toMatch(/requireSudo/);
    expect(error.stderr).toBe(stderr);
    expect(error.command).toBe('nft list tables');
  });

  it('reports other failures as NftCommandError with the command and stderr', async () => {
    const { runner } = scripted(fail('Error: syntax error, unexpected junk'));
    const error = await validateNftablesAvailability({ runner }).catch((e) => e);
    expect(isNftCommandError(error)).toBe(true);
    expect(error.message).toContain('syntax error');
    expect(error.command).toBe('nft list tables');
  });
});

describe('ensureTable', () => {
  it('creates the whole skeleton in one transaction when the table is missing', async () => {
    const { calls, runner } = scripted(noTable, ok());
    expect(await ensureTable({ runner })).toBe(true);
    expect(calls.map((c) => c.argv.slice(1))).toEqual([
      ['-j', 'list', 'table', 'inet', 'scaler_primitives'],
      ['-f', '-'],
    ]);
    const script = calls[1]!.input!;
    expect(script.split('\n')[0]).toBe('create table inet scaler_primitives');
    expect(script).toContain(
      'add map inet scaler_primitives fwd_iif { typeof iifname : verdict ; }',
    );
    expect(script).toContain(
      'add rule inet scaler_primitives output meta skuid vmap @out_uid comment "dispatch"',
    );
  });

  it('family ip: lists and creates `ip <table>`, maps without ip6, no ICMPv6', async () => {
    const missing = fail('Error: No such file or directory\nlist table ip kici\n');
    const { calls, runner } = scripted(missing, ok());
    expect(await ensureTable({ runner, family: 'ip', table: 'kici' })).toBe(true);
    expect(calls[0]!.argv.slice(1)).toEqual(['-j', 'list', 'table', 'ip', 'kici']);
    const script = calls[1]!.input!;
    expect(script.split('\n')[0]).toBe('create table ip kici');
    expect(script).toContain('add map ip kici fwd_v4 { typeof ip saddr : verdict ; }');
    expect(script).not.toMatch(/ip6|_v6|inet/);
  });

  it('the rules layout needs no map: its skeleton is the table and the base chains', async () => {
    const { calls, runner } = scripted(noTable, ok());
    expect(await ensureTable({ runner, layout: 'rules' })).toBe(true);
    expect(calls[1]!.input).toBe(
      [
        'create table inet scaler_primitives',
        'add chain inet scaler_primitives forward { type filter hook forward priority 0 ; policy accept ; }',
        'add chain inet scaler_primitives input { type filter hook input priority 0 ; policy accept ; }',
        'add chain inet scaler_primitives output { type filter hook output priority 0 ; policy accept ; }',
        '',
      ].join('\n'),
    );
    // A table made by a vmap user is complete for the rules layout too.
    const full = scripted(ok(listing));
    expect(await ensureTable({ runner: full.runner, layout: 'rules' })).toBe(false);
  });

  it('reads only its own family: the inet listing is no `ip` table', async () => {
    // `nft -j list table ip scaler_primitives` cannot answer with inet objects, but a
    // ruleset listing can hold both: the parser keeps the family it was asked for.
    const { calls, runner } = scripted(ok(listing), ok());
    expect(await ensureTable({ runner, family: 'ip' })).toBe(true);
    expect(calls[1]!.input!.split('\n')[0]).toBe('create table ip scaler_primitives');
  });

  it('refuses a family it does not know, before nft runs', async () => {
    const { calls, runner } = scripted();
    for (const family of ['ip6', 'bridge', 'inet ', 'INET', 4]) {
      await expect(ensureTable({ runner, family: family as 'ip' })).rejects.toThrow(
        /table family.*`inet`.*`ip`/,
      );
    }
    expect(calls).toEqual([]);
  });

  it('does nothing when everything is there', async () => {
    const { calls, runner } = scripted(ok(listing));
    expect(await ensureTable({ runner })).toBe(false);
    expect(calls).toHaveLength(1);
  });

  it('re-reads after losing a creation race', async () => {
    const { calls, runner } = scripted(
      noTable,
      fail('Error: Could not process rule: File exists'),
      ok(listing),
    );
    expect(await ensureTable({ runner })).toBe(false);
    expect(calls).toHaveLength(3);
  });

  it('re-inserts a dispatch rule someone flushed', async () => {
    const doc = JSON.parse(listing) as {
      nftables: Array<Record<string, { chain?: string; comment?: string }>>;
    };
    doc.nftables = doc.nftables.filter(
      (i) => !(i.rule?.chain === 'output' && i.rule.comment === 'dispatch'),
    );
    const { calls, runner } = scripted(ok(JSON.stringify(doc)), ok());
    expect(await ensureTable({ runner })).toBe(true);
    expect(calls[1]!.input).toBe(
      'insert rule inet scaler_primitives output meta skuid vmap @out_uid comment "dispatch"\n',
    );
  });
});

describe('addIsolationRules', () => {
  const policy = { iifname: 'veth-new', hostAccess: [8080] };

  it('vmap: a first application is one nft process running the rendered plan', async () => {
    const { calls, runner } = scripted(ok());
    const result = await addIsolationRules('new', policy, { runner });
    expect(result).toEqual({ rules: 9, nftCalls: 1, replaced: false });
    expect(calls).toEqual([
      { argv: ['nft', '-f', '-'], input: renderIsolationPlan('new', policy) },
    ]);
  });

  it('vmap: applying again replaces the agent in one transaction, touching nobody else', async () => {
    const { calls, runner } = scripted(
      fail('Error: Could not process rule: File exists'),
      ok(listing),
      ok(),
    );
    const result = await addIsolationRules('ab', { iifname: 'veth-ab' }, { runner });
    expect(result).toEqual({ rules: 8, nftCalls: 3, replaced: true });
    const script = calls[2]!.input!;
    const lines = script.trim().split('\n');
    expect(lines.slice(0, 6)).toEqual([
      'delete element inet scaler_primitives fwd_iif { "veth-ab" }',
      'delete element inet scaler_primitives in_iif { "veth-ab" }',
      'flush chain inet scaler_primitives agent-ab-fwd',
      'delete chain inet scaler_primitives agent-ab-fwd',
      'flush chain inet scaler_primitives agent-ab-in',
      'delete chain inet scaler_primitives agent-ab-in',
    ]);
    expect(script.slice(script.indexOf('create chain'))).toBe(
      renderIsolationPlan('ab', { iifname: 'veth-ab' }),
    );
    expect(script).not.toMatch(/agent-abc|veth-abc/);
  });

  it('vmap: takes over an identity still claimed by another (crashed) agent', async () => {
    const { calls, runner } = scripted(fail('Error: File exists'), ok(listing), ok());
    await addIsolationRules('fresh', { iifname: 'veth-abc' }, { runner });
    const script = calls[2]!.input!;
    expect(script.split('\n').slice(0, 2)).toEqual([
      'delete element inet scaler_primitives fwd_iif { "veth-abc" }',
      'delete element inet scaler_primitives in_iif { "veth-abc" }',
    ]);
    expect(script).not.toMatch(/delete chain/);
  });

  it('rules: reads the table, then replaces the agent rules by handle in one transaction', async () => {
    const { calls, runner } = scripted(ok(listing), ok());
    const result = await addIsolationRules(
      'r1',
      { saddr: '10.47.6.2' },
      { runner, layout: 'rules' },
    );
    expect(result).toMatchObject({ nftCalls: 2, replaced: true });
    const deletes = calls[1]!.input!.split('\n').filter((l) => l.startsWith('delete rule'));
    expect(deletes).toEqual(
      [
        ['forward', 46],
        ['forward', 47],
        ['forward', 48],
        ['forward', 50],
        ['input', 51],
        ['input', 52],
      ].map(([c, h]) => `delete rule inet scaler_primitives ${c} handle ${h}`),
    );
  });

  it('rules: creates the table when it is missing', async () => {
    const { calls, runner } = scripted(noTable, ok());
    await addIsolationRules('x', { iifname: 'eth1' }, { runner, layout: 'rules', table: 'iso' });
    expect(calls[1]!.input!.split('\n')[0]).toBe('create table inet iso');
  });

  it('does not retry on a permission error', async () => {
    const { calls, runner } = scripted(fail('Operation not permitted'));
    await expect(addIsolationRules('x', policy, { runner })).rejects.toSatisfy(
      isNftPermissionError,
    );
    expect(calls).toHaveLength(1);
  });
});

describe('removeIsolationRules', () => {
  it('removes exactly one agent (vmap) and returns its rule count', async () => {
    const { calls, runner } = scripted(ok(listing), ok());
    expect(await removeIsolationRules('ab', { runner })).toBe(9);
    const script = calls[1]!.input!;
    expect(script).toContain('delete chain inet scaler_primitives agent-ab-fwd');
    expect(script).not.toMatch(/abc/);
  });

  it('removes exactly one agent (rules) by handle', async () => {
    const { calls, runner } = scripted(ok(listing), ok());
    expect(await removeIsolationRules('r10', { runner })).toBe(5);
    expect(calls[1]!.input).toBe(
      [53, 54, 56]
        .map((h) => `delete rule inet scaler_primitives forward handle ${h}`)
        .concat([57, 58].map((h) => `delete rule inet scaler_primitives input handle ${h}`))
        .join('\n')
        .concat('\n'),
    );
  });

  it('vmap with the policy: one transaction, guarded so another agent is never touched', async () => {
    const { calls, runner } = scripted(ok());
    expect(await removeIsolationRules('ab', { runner, policy: { iifname: 'veth-ab' } })).toBe(8);
    expect(calls).toHaveLength(1);
    expect(calls[0]!.input!.split('\n').slice(0, 4)).toEqual([
      'add element inet scaler_primitives fwd_iif { "veth-ab" : jump agent-ab-fwd }',
      'delete element inet scaler_primitives fwd_iif { "veth-ab" }',
      'flush chain inet scaler_primitives agent-ab-fwd',
      'delete chain inet scaler_primitives agent-ab-fwd',
    ]);
  });

  it('vmap with a policy that does not match the table: falls back to reading it', async () => {
    const { calls, runner } = scripted(
      fail('Error: Could not process rule: File exists'),
      ok(listing),
      ok(),
    );
    expect(await removeIsolationRules('ab', { runner, policy: { iifname: 'veth-abc' } })).toBe(9);
    expect(calls.map((c) => c.argv.slice(1, 3))).toEqual([
      ['-f', '-'],
      ['-j', 'list'],
      ['-f', '-'],
    ]);
    expect(calls[2]!.input).not.toMatch(/veth-abc|agent-abc/);
  });

  it('returns 0 without writing for an unknown agent or a missing table', async () => {
    for (const answer of [ok(listing), noTable]) {
      const { calls, runner } = scripted(answer);
      expect(await removeIsolationRules('a', { runner })).toBe(0);
      expect(calls).toHaveLength(1);
    }
  });

  it('best effort never throws and reports the error', async () => {
    const errors: unknown[] = [];
    const { runner } = scripted(enoent());
    await expect(
      removeIsolationRules('ab', { runner, bestEffort: true, onError: (e) => errors.push(e) }),
    ).resolves.toBe(0);
    expect(errors).toHaveLength(1);
    expect(isNftNotInstalledError(errors[0])).toBe(true);
    await expect(removeIsolationRules('bad id', { runner, bestEffort: true })).resolves.toBe(0);
  });
});

describe('listing, sweeping, verifying', () => {
  it('lists agents with their layout and identities', async () => {
    const { runner } = scripted(ok(listing));
    const agents = await listIsolatedAgents({ runner });
    expect(agents.map((a) => [a.agentId, a.layout, a.rules, a.identities])).toEqual([
      ['ab', 'vmap', 9, ['veth-ab']],
      ['abc', 'vmap', 9, ['veth-abc']],
      ['r1', 'rules', 6, ['10.47.6.2']],
      ['r10', 'rules', 5, ['10.47.6.20']],
      ['u', 'vmap', 5, [1001]],
    ]);
  });

  it('sweeps every agent not alive, in one transaction', async () => {
    const { calls, runner } = scripted(ok(listing), ok());
    const result = await sweepIsolation(['ab', 'r1'], { runner });
    expect(result).toEqual({ removedAgents: ['abc', 'r10', 'u'], removedRules: 19 });
    expect(calls).toHaveLength(2);
    expect(calls[1]!.input).not.toMatch(/agent-ab-|veth-ab"|handle 4[6-9]|handle 5[0-2]\b/);
  });

  it('verify: in place', async () => {
    const { runner } = scripted(ok(listing));
    expect(
      await verifyIsolation('ab', { iifname: 'veth-ab', hostAccess: [8080] }, { runner }),
    ).toEqual({
      ok: true,
      problems: [],
      repaired: false,
    });
  });

  it('verify: a different policy or a wiped table is reported, and repaired on request', async () => {
    const changed = scripted(ok(listing));
    const result = await verifyIsolation('ab', { iifname: 'veth-ab' }, { runner: changed.runner });
    expect(result.ok).toBe(false);
    expect(result.problems.join('\n')).toMatch(/agent-ab-in: expected 3 rules, found 4/);

    const wiped = scripted(noTable, noTable, ok());
    const repaired = await verifyIsolation(
      'ab',
      { iifname: 'veth-ab' },
      { runner: wiped.runner, repair: true },
    );
    expect(repaired).toMatchObject({ ok: false, repaired: true });
    expect(repaired.problems[0]).toMatch(/table does not exist/);
    expect(wiped.calls[2]!.input).toMatch(/^create table inet scaler_primitives\n/);
  });
});

describe('imports', () => {
  it('only the runner (session.ts) mentions execa, and only as a lazy import', () => {
    const dir = fileURLToPath(new URL('../../src/nftables/', import.meta.url));
    for (const file of readdirSync(dir)) {
      const source = codeOf(readFileSync(`${dir}${file}`, 'utf8'));
      expect(source).not.toMatch(/^import .*execa/m);
      if (file !== 'session.ts') expect(source).not.toMatch(/['"]execa['"]/);
      for (const [, spec] of source.matchAll(/from '([^']+)'/g)) {
        // errors, and the pure internal helpers that import only errors (or nothing).
        expect(spec).toMatch(
          /^(node:|\.\/|\.\.\/errors(\/[a-z-]+)?\.js$|\.\.\/internal\/(strict-keys|live-ids)\.js$)/,
        );
      }
    }
  });
});

describe('family ip', () => {
  it('one transaction with IPv4 rules only; the digest differs from the inet one', async () => {
    const { calls, runner } = scripted(ok());
    const policy = { iifname: 'veth-ab', allowlist: ['10.1.0.0/16', 'fd00:1::/64'] };
    await addIsolationRules('ab', policy, { runner, family: 'ip', table: 'kici' });
    const script = calls[0]!.input!;
    expect(script.split('\n')[0]).toBe('create chain ip kici agent-ab-fwd');
    expect(script).toContain('ip daddr 10.1.0.0/16 accept');
    expect(script).not.toMatch(/ip6|icmpv6|fd00/);
    const inet = renderIsolationPlan('ab', policy);
    const digest = (text: string) => /policy=([0-9a-f]{12})/.exec(text)![1];
    expect(digest(script)).not.toBe(digest(inet));
  });

  it('an IPv6 agent address is refused before nft runs: such a table never sees it', async () => {
    const { calls, runner } = scripted();
    const opts = { runner, family: 'ip' as const };
    for (const attempt of [
      () => addIsolationRules('v6', { saddr: 'fd00::5' }, opts),
      () => verifyIsolation('v6', { saddr: 'fd00::5' }, opts),
    ]) {
      const error = await attempt().catch((e) => e);
      expect(error.message).toMatch(/fd00::5 is IPv6.*`family: 'inet'`/);
    }
    expect(calls).toEqual([]);
    // Removal with that policy is best effort: reported, not thrown, and nothing runs.
    const errors: unknown[] = [];
    await removeIsolationRules('v6', {
      ...opts,
      policy: { saddr: 'fd00::5' },
      bestEffort: true,
      onError: (e) => errors.push(e),
    });
    expect(errors).toHaveLength(1);
    expect(calls).toEqual([]);
  });
});
