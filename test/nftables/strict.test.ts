// Fail closed: every exported nftables function refuses unknown keys, wrong values and
// oversized input itself, before any nft text exists or any process runs.

import {
  addIsolationRules,
  buildIsolationPlan,
  ensureTable,
  type IsolationPolicy,
  listIsolatedAgents,
  type NftPlan,
  type NftRunner,
  parseRuleHandles,
  parseRuleHandlesJson,
  removeIsolationRules,
  renderIsolationPlan,
  renderPlan,
  sweepIsolation,
  validateNftablesAvailability,
  verifyIsolation,
} from 'scaler-primitives/nftables';
import { describe, expect, it } from 'vitest';
import type { InvalidInputError } from '../../src/errors/input.js';
import { isInvalidInputError } from '../../src/errors/input.js';

function refused(fn: () => unknown): InvalidInputError {
  try {
    fn();
  } catch (error) {
    expect(isInvalidInputError(error), String(error)).toBe(true);
    return error as InvalidInputError;
  }
  throw new Error('expected an InvalidInputError, nothing was thrown');
}

describe('the isolation policy is strict', () => {
  it('a typo `denyall: true` is refused, naming the key and suggesting denyAll (not a policy without deny-all)', () => {
    const policy = { iifname: 'tap-a', denyall: true } as unknown as IsolationPolicy;
    const error = refused(() => renderIsolationPlan('a', policy));
    expect(error.message).toContain('"denyall"');
    expect(error.message).toContain('Did you mean `denyAll`?');
    expect(error.message).toContain('`hostAccess`');
    expect(error.value).toBe('denyall');
  });

  it.each([
    ['allowList', 'allowlist'],
    ['gateways', 'gateway'],
    ['host_access', 'hostAccess'],
    ['blockd', 'blocked'],
    ['metdata', 'metadata'],
    ['iifName', 'iifname'],
  ])('%s suggests %s', (typo, key) => {
    const policy = { saddr: '10.0.0.2', [typo]: [] } as unknown as IsolationPolicy;
    expect(refused(() => buildIsolationPlan('a', policy)).message).toContain(
      `Did you mean \`${key}\`?`,
    );
  });

  it('a key with no near match lists the accepted keys without a guess', () => {
    const policy = { skuid: 1000, zzzzzzzzzz: 1 } as unknown as IsolationPolicy;
    const message = refused(() => buildIsolationPlan('a', policy)).message;
    expect(message).not.toContain('Did you mean');
    expect(message).toContain('Accepted keys: `iifname`');
  });

  it('symbol keys and an inherited-looking __proto__ own key are refused too', () => {
    const withSymbol = { iifname: 'tap-a', [Symbol('x')]: 1 } as unknown as IsolationPolicy;
    refused(() => buildIsolationPlan('a', withSymbol));
    const proto = JSON.parse('{"iifname":"tap-a","__proto__":{"denyAll":false}}');
    refused(() => buildIsolationPlan('a', proto));
  });

  it('host access entries are strict: `{ port, proto }` is refused, not read as TCP', () => {
    const policy = { iifname: 'tap-a', hostAccess: [{ port: 53, proto: 'udp' }] };
    expect(
      refused(() => buildIsolationPlan('a', policy as unknown as IsolationPolicy)).message,
    ).toContain('Did you mean `protocol`?');
  });

  it('lists are bounded (256 entries) and addresses are length-limited before parsing', () => {
    const many = Array.from({ length: 257 }, (_, i) => `10.${i >> 8}.${i & 255}.0/24`);
    expect(
      refused(() => buildIsolationPlan('a', { iifname: 'x', allowlist: many })).message,
    ).toMatch(/257 entries, at most 256/);
    expect(() =>
      buildIsolationPlan('a', { iifname: 'x', allowlist: many.slice(0, 256) }),
    ).not.toThrow();
    const long = `10.0.0.0/${'0'.repeat(100_000)}8`;
    const error = refused(() => buildIsolationPlan('a', { iifname: 'x', blocked: [long] }));
    // The message is bounded too: it never echoes 100k characters back.
    expect(error.message.length).toBeLessThan(600);
    expect(() => buildIsolationPlan('a', { iifname: 'x', gateway: 'fd00::1' })).not.toThrow();
    expect(() =>
      buildIsolationPlan('a', { iifname: 'x', gateway: 42 as unknown as string }),
    ).toThrow(TypeError);
  });

  it('plan options are strict', () => {
    const opts = { includeTables: true } as unknown as { includeTable: boolean };
    expect(refused(() => renderIsolationPlan('a', { iifname: 'x' }, opts)).message).toContain(
      'Did you mean `includeTable`?',
    );
    expect(() =>
      renderIsolationPlan('a', { iifname: 'x' }, { includeTable: 'yes' as unknown as boolean }),
    ).toThrow(TypeError);
  });
});

describe('renderPlan checks the whole plan, whoever built it', () => {
  const valid = buildIsolationPlan(
    'a',
    { iifname: 'tap-a', hostAccess: [22] },
    { includeTable: true },
  );
  const plan = (commands: unknown[], extra: Partial<Record<'family' | 'table', unknown>> = {}) =>
    ({ family: 'inet', table: 'kici', commands, ...extra }) as unknown as NftPlan;
  const rule = (r: unknown) => plan([{ op: 'add rule', chain: 'forward', rule: r }]);

  it('the plans the builder makes render unchanged', () => {
    expect(renderPlan(valid)).toBe(
      renderIsolationPlan('a', { iifname: 'tap-a', hostAccess: [22] }, { includeTable: true }),
    );
  });

  it.each<[string, NftPlan]>([
    [
      'a verdict that smuggles a second command',
      rule({ exprs: [], verdict: 'accept\nflush ruleset' }),
    ],
    ['a verdict outside accept/drop', rule({ exprs: [], verdict: 'jump evil' })],
    ['the family', plan([{ op: 'add table' }], { family: 'ip6' })],
    ['the family (bridge)', plan([{ op: 'add table' }], { family: 'bridge' })],
    ['the family (injection)', plan([{ op: 'add table' }], { family: 'inet x\nflush ruleset\n' })],
    ['the table', plan([{ op: 'add table' }], { table: 'k ici' })],
    ['the hook', plan([{ op: 'add chain', chain: 'forward', hook: 'prerouting; policy drop' }])],
    ['the map key', plan([{ op: 'add map', map: 'fwd_iif', key: 'ip saddr' }])],
    ['an unknown map key', plan([{ op: 'add map', map: 'fwd_iif', key: 'ether saddr' }])],
    ['an unknown map', plan([{ op: 'add map', map: 'evil', key: 'iifname' }])],
    [
      'the protocol',
      rule({ exprs: [{ type: 'dport', protocol: 'sctp', ports: [1] }], verdict: 'drop' }),
    ],
    ['an unknown op', plan([{ op: 'flush ruleset' }])],
    ['a missing op', plan([{ chain: 'forward' }])],
    ['an unknown key on a command', plan([{ op: 'add table', chain: 'x' }])],
    ['a typo in a rule (verdit)', rule({ exprs: [], verdit: 'drop' })],
    ['an empty rule', rule({ exprs: [] })],
    [
      'a rule with both vmap and verdict',
      rule({ exprs: [{ type: 'vmap', key: 'iifname', map: 'fwd_iif' }], verdict: 'accept' }),
    ],
    [
      'a vmap not last',
      rule({
        exprs: [
          { type: 'vmap', key: 'iifname', map: 'fwd_iif' },
          { type: 'skuid', uid: 1 },
        ],
      }),
    ],
    [
      'a vmap on the wrong key',
      rule({ exprs: [{ type: 'vmap', key: 'ip saddr', map: 'fwd_iif' }] }),
    ],
    ['an unknown expression type', rule({ exprs: [{ type: 'meta', name: 'x' }], verdict: 'drop' })],
    [
      'an interface name with a wildcard',
      rule({ exprs: [{ type: 'iifname', name: 'veth*' }], verdict: 'drop' }),
    ],
    [
      'a non-normalized address',
      rule({ exprs: [{ type: 'daddr', family: 'ip', addrs: ['010.0.0.1'] }], verdict: 'drop' }),
    ],
    [
      'an address of the other family',
      rule({ exprs: [{ type: 'daddr', family: 'ip', addrs: ['fd00::1'] }], verdict: 'drop' }),
    ],
    [
      'an empty address set',
      rule({ exprs: [{ type: 'daddr', family: 'ip', addrs: [] }], verdict: 'drop' }),
    ],
    [
      'a duplicate port',
      rule({ exprs: [{ type: 'dport', protocol: 'tcp', ports: [22, 22] }], verdict: 'accept' }),
    ],
    [
      'port 0',
      rule({ exprs: [{ type: 'dport', protocol: 'tcp', ports: [0] }], verdict: 'accept' }),
    ],
    ['a ct state', rule({ exprs: [{ type: 'ctState', states: ['invalid'] }], verdict: 'accept' })],
    [
      'an icmpv6 type',
      rule({ exprs: [{ type: 'icmpv6Type', types: ['echo-request'] }], verdict: 'accept' }),
    ],
    ['a uid', rule({ exprs: [{ type: 'skuid', uid: -1 }], verdict: 'accept' })],
    ['a comment with a quote', rule({ exprs: [], verdict: 'drop', comment: 'x" accept' })],
    [
      'a comment over 128 characters',
      rule({ exprs: [], verdict: 'drop', comment: 'a'.repeat(129) }),
    ],
    ['a chain name that is a keyword', plan([{ op: 'add chain', chain: 'accept' }])],
    ['a chain name with a space', plan([{ op: 'flush chain', chain: 'forward input' }])],
    ['a handle of 0', plan([{ op: 'delete rule', chain: 'forward', handle: 0 }])],
    ['a fractional handle', plan([{ op: 'delete rule', chain: 'forward', handle: 1.5 }])],
    [
      'an element key of the wrong kind',
      plan([
        {
          op: 'add element',
          map: 'fwd_v4',
          key: { kind: 'ifname', value: 'x' },
          target: 'agent-a-fwd',
        },
      ]),
    ],
    [
      'an IPv6 element in the IPv4 map',
      plan([{ op: 'delete element', map: 'fwd_v4', key: { kind: 'addr', value: 'fd00::1' } }]),
    ],
    [
      'a network as a map element',
      plan([{ op: 'delete element', map: 'fwd_v4', key: { kind: 'addr', value: '10.0.0.0/8' } }]),
    ],
    [
      'an element that jumps to a base chain',
      plan([
        {
          op: 'add element',
          map: 'fwd_iif',
          key: { kind: 'ifname', value: 'x' },
          target: 'forward',
        },
      ]),
    ],
    ['an unknown key on the plan', { ...plan([]), tabel: 'x' } as unknown as NftPlan],
  ])('refuses %s', (_name, bad) => {
    expect(() => renderPlan(bad)).toSatisfy((fn: () => unknown) => {
      try {
        fn();
        return false;
      } catch (error) {
        return isInvalidInputError(error) || error instanceof TypeError;
      }
    });
  });

  it('an unknown op is refused by name, never rendered as an empty line', () => {
    const error = refused(() => renderPlan(plan([{ op: 'frobnicate' }])));
    expect(error.message).toContain('"frobnicate"');
    expect(error.message).toContain('`add rule`');
  });

  it('commands that are not objects are TypeErrors; so is a plan that is not one', () => {
    expect(() => renderPlan(plan([null]))).toThrow(TypeError);
    expect(() => renderPlan('add table inet kici' as unknown as NftPlan)).toThrow(TypeError);
  });

  it('a family `ip` plan: accepted without IPv6, IPv6 parts refused naming the command', () => {
    const ip = (commands: unknown[]) => plan(commands, { family: 'ip' });
    expect(renderPlan(ip([{ op: 'add table' }]))).toBe('add table ip kici\n');
    expect(
      renderPlan(
        ip([
          {
            op: 'add rule',
            chain: 'forward',
            rule: {
              exprs: [{ type: 'daddr', family: 'ip', addrs: ['10.0.0.0/8'] }],
              verdict: 'drop',
            },
          },
        ]),
      ),
    ).toBe('add rule ip kici forward ip daddr 10.0.0.0/8 drop\n');
    const cases: Array<[unknown, RegExp]> = [
      [
        {
          op: 'add rule',
          chain: 'agent-a-fwd',
          rule: {
            exprs: [{ type: 'daddr', family: 'ip6', addrs: ['fc00::/7'] }],
            verdict: 'drop',
            comment: 'agent=a',
          },
        },
        /command 2 \(`add rule` in chain agent-a-fwd \(comment "agent=a"\)\).*`ip6 daddr fc00::\/7`/,
      ],
      [
        {
          op: 'insert rule',
          chain: 'forward',
          rule: { exprs: [{ type: 'saddr', family: 'ip6', addrs: ['fd00::5'] }], verdict: 'drop' },
        },
        /`insert rule` in chain forward.*`ip6 saddr fd00::5`/,
      ],
      [
        {
          op: 'add rule',
          chain: 'input',
          rule: {
            exprs: [{ type: 'icmpv6Type', types: ['nd-neighbor-solicit'] }],
            verdict: 'accept',
          },
        },
        /`icmpv6 type nd-neighbor-solicit`/,
      ],
      [
        {
          op: 'add rule',
          chain: 'forward',
          rule: { exprs: [{ type: 'vmap', key: 'ip6 saddr', map: 'fwd_v6' }] },
        },
        /`ip6 saddr vmap @fwd_v6`/,
      ],
      [{ op: 'add map', map: 'in_v6', key: 'ip6 saddr' }, /map in_v6 keyed by `ip6 saddr`/],
      [
        {
          op: 'add element',
          map: 'fwd_v6',
          key: { kind: 'addr', value: 'fd00::5' },
          target: 'agent-a-fwd',
        },
        /an element of map fwd_v6/,
      ],
      [
        { op: 'delete element', map: 'in_v6', key: { kind: 'addr', value: 'fd00::5' } },
        /`delete element` on map in_v6/,
      ],
    ];
    for (const [command, message] of cases) {
      const error = refused(() => renderPlan(ip([{ op: 'add table' }, command])));
      expect(error.what).toBe('rule for an `ip` table');
      expect(error.message).toMatch(message);
      expect(error.message).toMatch(/family `ip`.*Use family `inet`/);
      // The same command is fine in an `inet` table.
      expect(() => renderPlan(plan([{ op: 'add table' }, command]))).not.toThrow();
    }
  });

  it('an oversized plan is refused before anything is rendered', () => {
    const commands = Array.from({ length: 10_001 }, () => ({ op: 'add table' }));
    expect(refused(() => renderPlan(plan(commands))).message).toMatch(/at most 10000/);
  });
});

describe('functions that run nft refuse bad input before running anything', () => {
  let calls = 0;
  const runner: NftRunner = async () => {
    calls++;
    return { stdout: '', stderr: '', exitCode: 0 };
  };

  it.each<[string, () => Promise<unknown>]>([
    [
      'validateNftablesAvailability',
      () => validateNftablesAvailability({ runner, tabel: 'x' } as never),
    ],
    ['ensureTable', () => ensureTable({ runner, netns: 'a b' })],
    ['listIsolatedAgents', () => listIsolatedAgents({ runner, layout: 'flat' as never })],
    [
      'addIsolationRules (policy)',
      () => addIsolationRules('a', { iifname: 'x', denyall: true } as never, { runner }),
    ],
    [
      'addIsolationRules (options)',
      () => addIsolationRules('a', { iifname: 'x' }, { runner, requireSudo: 'yes' } as never),
    ],
    [
      'removeIsolationRules (options)',
      () => removeIsolationRules('a', { runner, besteffort: true } as never),
    ],
    [
      'removeIsolationRules (policy)',
      () => removeIsolationRules('a', { runner, policy: { iifname: 'x', denyal: true } as never }),
    ],
    [
      'verifyIsolation',
      () => verifyIsolation('a', { iifname: 'x' }, { runner, repiar: true } as never),
    ],
    ['sweepIsolation (options)', () => sweepIsolation([], { runner, dryRun: true } as never)],
    ['sweepIsolation (ids)', () => sweepIsolation([1 as unknown as string], { runner })],
    ['nftPath', () => ensureTable({ runner, nftPath: 'nft\0x' })],
  ])('%s', async (_name, fn) => {
    calls = 0;
    await expect(fn()).rejects.toSatisfy(
      (error: unknown) => isInvalidInputError(error) || error instanceof TypeError,
    );
    expect(calls).toBe(0);
  });

  it('bestEffort does not swallow bad options (they are the caller mistake, not nft failing)', async () => {
    await expect(
      removeIsolationRules('a', { runner, bestEffort: true, onErorr: () => {} } as never),
    ).rejects.toSatisfy(isInvalidInputError);
  });
});

describe('helpers check their input', () => {
  it('agentChainName refuses an invalid agent id or part', async () => {
    const { agentChainName } = await import('../../src/nftables/names.js');
    expect(agentChainName('ci-7', 'fwd')).toBe('agent-ci-7-fwd');
    refused(() => agentChainName('a b', 'fwd'));
    refused(() => agentChainName('a', 'fwd accept' as never));
  });
});

describe('parsers check their input', () => {
  it('parseRuleHandles and parseRuleHandlesJson refuse a non-string or oversized identifier', () => {
    expect(() => parseRuleHandles('', 'x'.repeat(65))).toThrow(TypeError);
    expect(() => parseRuleHandles('', '')).toThrow(TypeError);
    expect(() => parseRuleHandles(42 as unknown as string, 'a')).toThrow(TypeError);
    expect(() => parseRuleHandlesJson('{"nftables":[]}', 7 as unknown as string)).toThrow(
      TypeError,
    );
    expect(parseRuleHandles('', 'a')).toEqual([]);
  });
});

describe('renderPlan refuses a rule no packet can match', () => {
  const plan = (exprs: unknown[]) => ({
    family: 'inet',
    table: 'scaler_primitives',
    commands: [{ op: 'add rule', chain: 'forward', rule: { exprs, verdict: 'accept' } }],
  });
  it('two transport protocols: icmpv6 and tcp (nft: "conflicting protocols")', () => {
    expect(() =>
      renderPlan(
        plan([
          { type: 'icmpv6Type', types: ['nd-neighbor-solicit'] },
          { type: 'dport', protocol: 'tcp', ports: [22] },
        ]) as never,
      ),
    ).toThrow(/two transport protocols \(icmpv6 and tcp\)/);
  });
  it('two network protocols: ip saddr and ip6 daddr', () => {
    expect(() =>
      renderPlan(
        plan([
          { type: 'saddr', family: 'ip', addrs: ['10.0.0.1'] },
          { type: 'daddr', family: 'ip6', addrs: ['fd00::1'] },
        ]) as never,
      ),
    ).toThrow(/two network protocols \(ip and ip6\)/);
  });
  it('one protocol of each kind is fine', () => {
    expect(
      renderPlan(
        plan([
          { type: 'saddr', family: 'ip', addrs: ['10.0.0.1'] },
          { type: 'dport', protocol: 'tcp', ports: [22] },
        ]) as never,
      ),
    ).toContain('ip saddr 10.0.0.1 tcp dport 22 accept');
  });
});
