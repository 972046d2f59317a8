import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isInvalidInputError, isNftNotInstalledError } from '../../src/errors.js';
import {
  addIsolationRules,
  ensureKiciTable,
  type KiciNftOptions,
  kiciAgentId,
  parseRuleHandles,
  removeIsolationRules,
  validateNftablesAvailability,
} from '../../src/kici/index.js';
import { inNs, Namespaces } from '../helpers/netns.js';
import { hasSystem } from '../helpers/system.js';

describe('kiciAgentId', () => {
  it('keeps interface names, encodes others, prefixes addresses: never two identifiers on one id', () => {
    expect(kiciAgentId('veth-ab12')).toBe('veth-ab12');
    expect(kiciAgentId('tap@1')).toBe(`kici-ifname-hex-${Buffer.from('tap@1').toString('hex')}`);
    expect(kiciAgentId('172.30.0.5', 'saddr')).toBe('kici-saddr-172.30.0.5');
    expect(kiciAgentId('FD00::0:1', 'saddr')).toBe('kici-saddr-fd00__1');
    // An interface may be named like an address; the two stay distinct agents.
    expect(kiciAgentId('10.0.0.5')).not.toBe(kiciAgentId('10.0.0.5', 'saddr'));
  });

  it('refuses what is neither', () => {
    for (const [id, mode] of [
      ['veth/x', 'iifname'],
      ['a-very-long-interface', 'iifname'],
      ['10.0.0.0/8', 'saddr'],
      ['not-an-ip', 'saddr'],
      ['veth0', 'mac'],
    ] as const) {
      expect(() => kiciAgentId(id, mode as never), id).toThrow();
    }
  });
});

describe('parseRuleHandles (seed text, exact match)', () => {
  const listing = [
    'table ip kici {',
    '\tchain forward { # handle 1',
    '\t\ttype filter hook forward priority filter; policy accept;',
    '\t\tiifname "veth-ab" ip daddr 10.0.0.1 accept # handle 4',
    '\t\tiifname "veth-abc" ip daddr 10.0.0.0/8 drop # handle 5',
    '\t\tiifname "veth-ab" ip daddr 10.0.0.0/8 drop # handle 6',
    '\t\tip saddr 172.30.0.50 drop # handle 7',
    '\t}',
    '}',
  ].join('\n');

  it('finds only the identifier’s rules', () => {
    expect(parseRuleHandles(listing, 'veth-ab')).toEqual([4, 6]);
    expect(parseRuleHandles(listing, 'veth-abc')).toEqual([5]);
    expect(parseRuleHandles(listing, '172.30.0.5')).toEqual([]);
    expect(parseRuleHandles(listing, '172.30.0.50')).toEqual([7]);
  });

  it('checks its arguments', () => {
    expect(() => parseRuleHandles(undefined as never, 'x')).toThrow(TypeError);
  });
});

const ok = hasSystem(['nft', 'ip', 'root'], 'kici nftables adapter (system)');

describe.runIf(ok)('kici nftables functions in a throwaway network namespace', () => {
  const spaces = new Namespaces('sp-kici-nft');
  let ns = '';
  let opts: KiciNftOptions;
  const ruleset = () => inNs(ns, 'nft', ['-a', 'list', 'ruleset']);
  const ourChain = (chain: string) =>
    inNs(ns, 'nft', ['-a', 'list', 'chain', 'inet', 'kici', chain]);

  beforeAll(() => {
    ns = spaces.add('kici');
    opts = { netns: ns };
    // A kici (seed) orchestrator's table, as it makes it, with one of its agents' rules.
    inNs(
      ns,
      'nft',
      ['-f', '-'],
      [
        'add table ip kici',
        'add chain ip kici forward { type filter hook forward priority 0; policy accept; }',
        'add chain ip kici output { type filter hook output priority 0; policy accept; }',
        'add rule ip kici forward iifname "veth-ab" ip daddr 10.0.0.1 accept',
        'add rule ip kici forward iifname "veth-ab" ip daddr 10.0.0.0/8 drop',
        '',
      ].join('\n'),
    );
  });
  afterAll(() => spaces.cleanup());

  it('validates availability and reports a missing nft', async () => {
    await validateNftablesAvailability(opts);
    await expect(
      validateNftablesAvailability({ ...opts, nftPath: 'nft-does-not-exist' }),
    ).rejects.toSatisfy(isNftNotInstalledError);
  });

  it('ensureKiciTable is idempotent and leaves the seed’s ip kici table alone', async () => {
    const before = inNs(ns, 'nft', ['list', 'table', 'ip', 'kici']);
    await ensureKiciTable(opts);
    await ensureKiciTable(opts);
    expect(inNs(ns, 'nft', ['list', 'tables'])).toMatch(/table inet kici/);
    expect(inNs(ns, 'nft', ['list', 'table', 'ip', 'kici'])).toBe(before);
  });

  it('adds an interface agent’s rules in the seed’s order, in the shared chains', async () => {
    await addIsolationRules('veth-ab', '10.0.0.1', { allowlist: ['10.1.2.0/24'] }, 'iifname', {
      ...opts,
      hostAccess: [8080],
    });
    const forward = ourChain('forward')
      .split('\n')
      .filter((l) => l.includes('"veth-ab"'));
    const order = [
      '10.0.0.1 accept',
      '169.254.169.254 drop',
      '10.1.2.0/24 accept',
      '10.0.0.0/8, 100.64.0.0/10, 169.254.0.0/16, 172.16.0.0/12, 192.168.0.0/16 } drop',
    ];
    let last = -1;
    for (const needle of order) {
      const index = forward.findIndex((l, i) => i > last && l.includes(needle));
      expect(index, needle).toBeGreaterThan(last);
      last = index;
    }
    expect(forward.every((l) => l.includes('comment "agent=veth-ab'))).toBe(true);
    // The host is reachable on the given port only.
    const input = ourChain('input');
    expect(input).toMatch(/iifname "veth-ab".*tcp dport 8080 accept/);
  });

  it('re-applying replaces the rules instead of adding a second set', async () => {
    const count = () => (ruleset().match(/agent=veth-ab /g) ?? []).length;
    const first = count();
    await addIsolationRules('veth-ab', '10.0.0.1', { allowlist: ['10.1.2.0/24'] }, 'iifname', {
      ...opts,
      hostAccess: [8080],
    });
    expect(count()).toBe(first);
    await addIsolationRules('veth-ab', '10.0.0.1', { denyAll: true }, 'iifname', opts);
    expect(ruleset()).not.toMatch(/10\.1\.2\.0\/24/);
  });

  it('removes exactly one agent: veth-ab never takes veth-abc, nor the seed’s own rules', async () => {
    await addIsolationRules('veth-abc', '10.0.0.1', undefined, undefined, opts);
    const seedBefore = inNs(ns, 'nft', ['list', 'table', 'ip', 'kici']);
    await removeIsolationRules('veth-ab', opts);
    const after = ourChain('forward');
    expect(after).not.toMatch(/"veth-ab"/);
    expect(after).toMatch(/"veth-abc"/);
    expect(inNs(ns, 'nft', ['list', 'table', 'ip', 'kici'])).toBe(seedBefore);
    await removeIsolationRules('veth-abc', opts);
    expect(ourChain('forward')).not.toMatch(/veth-abc/);
  });

  it('isolates and removes by source address, exactly', async () => {
    await addIsolationRules('172.30.0.5', '172.30.0.1', undefined, 'saddr', opts);
    await addIsolationRules('172.30.0.50', '172.30.0.1', undefined, 'saddr', opts);
    expect(ourChain('forward')).toMatch(/ip saddr 172\.30\.0\.5 /);
    await removeIsolationRules('172.30.0.5', opts);
    const forward = ourChain('forward');
    expect(forward).not.toMatch(/ip saddr 172\.30\.0\.5 /);
    expect(forward).toMatch(/ip saddr 172\.30\.0\.50 /);
    await removeIsolationRules('172.30.0.50', opts);
    expect(ourChain('forward')).not.toMatch(/172\.30\.0\.50/);
  });

  it('refuses bad input before nft runs', async () => {
    await expect(
      addIsolationRules('veth"x', '10.0.0.1', undefined, 'iifname', opts),
    ).rejects.toSatisfy(isInvalidInputError);
    await expect(
      addIsolationRules('veth-q', '10.0.0.1;', undefined, 'iifname', opts),
    ).rejects.toSatisfy(isInvalidInputError);
    await expect(
      addIsolationRules('veth-q', '10.0.0.1', { allowlist: ['x'] }, 'iifname', opts),
    ).rejects.toSatisfy(isInvalidInputError);
    await expect(
      addIsolationRules('veth-q', '10.0.0.1', { hostAccess: ['*:8080'] }, 'iifname', opts),
    ).rejects.toThrow(/opts\.hostAccess/);
    await expect(
      addIsolationRules('veth-q', '10.0.0.1', { denyall: true } as never, 'iifname', opts),
    ).rejects.toSatisfy(isInvalidInputError);
    expect(ourChain('forward')).not.toMatch(/veth-q/);
  });

  it('removal is best effort: it never throws and reports to onError', async () => {
    const errors: unknown[] = [];
    await expect(
      removeIsolationRules('veth-z', {
        ...opts,
        nftPath: 'nft-does-not-exist',
        onError: (e) => errors.push(e),
      }),
    ).resolves.toBeUndefined();
    expect(errors.some(isNftNotInstalledError)).toBe(true);
    const invalid: unknown[] = [];
    await removeIsolationRules('bad/name', { ...opts, onError: (e) => invalid.push(e) });
    expect(invalid.some(isInvalidInputError)).toBe(true);
    // An agent with no rules: nothing to do, no error.
    const none: unknown[] = [];
    await removeIsolationRules('veth-none', { ...opts, onError: (e) => none.push(e) });
    expect(none).toEqual([]);
  });
});
