import {
  addIsolationRules,
  ensureKiciTable,
  KICI_NFT_TABLE,
  type KiciNftOptions,
  kiciAgentId,
  parseRuleHandles,
  removeIsolationRules,
  validateNftablesAvailability,
} from 'scaler-primitives/kici';
import {
  addIsolationRules as coreAdd,
  removeIsolationRules as coreRemove,
  listIsolatedAgents,
  renderIsolationPlan,
} from 'scaler-primitives/nftables';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isInvalidInputError } from '../../src/errors/input.js';
import { isNftNotInstalledError } from '../../src/errors/nftables.js';
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
  const kiciTable = () => inNs(ns, 'nft', ['list', 'table', 'ip', 'kici']);
  const kiciChain = (chain: string) =>
    inNs(ns, 'nft', ['-a', 'list', 'chain', 'ip', 'kici', chain]);
  const coreTable = () => inNs(ns, 'nft', ['list', 'table', 'inet', 'scaler_primitives']);
  // A kici (seed) orchestrator's own agent: its rules carry no tag.
  const SEED_RULES = [
    'iifname "veth-k" ip daddr 10.0.0.1 accept',
    'iifname "veth-k" ip daddr 10.0.0.0/8 drop',
  ];
  const seedLines = () =>
    kiciChain('forward')
      .split('\n')
      .map((l) => l.trim().replace(/ # handle \d+$/, ''))
      .filter((l) => l.includes('"veth-k"'));

  beforeAll(() => {
    ns = spaces.add('kici');
    opts = { netns: ns };
    // kici's table, as the seed makes it, with one of its agents' rules.
    inNs(
      ns,
      'nft',
      ['-f', '-'],
      [
        'add table ip kici',
        'add chain ip kici forward { type filter hook forward priority 0; policy accept; }',
        'add chain ip kici output { type filter hook output priority 0; policy accept; }',
        ...SEED_RULES.map((r) => `add rule ip kici forward ${r}`),
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

  it('ensureKiciTable keeps kici’s ip kici table and its rules, adding only an input chain', async () => {
    await ensureKiciTable(opts);
    const once = kiciTable();
    await ensureKiciTable(opts);
    expect(kiciTable()).toBe(once);
    const tables = inNs(ns, 'nft', ['list', 'tables']);
    expect(tables).toMatch(/^table ip kici$/m);
    expect(tables).not.toMatch(/inet/);
    const chains = [...once.matchAll(/chain (\w+) \{\n\s+type filter hook (\w+) priority/g)];
    expect(chains.map((m) => [m[1], m[2]])).toEqual([
      ['forward', 'forward'],
      ['output', 'output'],
      ['input', 'input'],
    ]);
    // The seed's layout: no verdict map, no dispatch rule; kici's own rules as they were.
    expect(once).not.toMatch(/map|vmap|dispatch/);
    expect(seedLines()).toEqual(SEED_RULES);
  });

  it('adds an interface agent’s rules in the seed’s order, to kici’s forward chain, tagged', async () => {
    await addIsolationRules('veth-ab', '10.0.0.1', { allowlist: ['10.1.2.0/24'] }, 'iifname', {
      ...opts,
      hostAccess: [8080],
    });
    const forward = kiciChain('forward')
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
    expect(forward.every((l) => /comment "agent=veth-ab policy=[0-9a-f]{12}"/.test(l))).toBe(true);
    // Appended after kici's own rules, which stay first and untouched.
    expect(seedLines()).toEqual(SEED_RULES);
    const lines = kiciChain('forward').split('\n');
    expect(lines.findIndex((l) => l.includes('"veth-k"'))).toBeLessThan(
      lines.findIndex((l) => l.includes('"veth-ab"')),
    );
    // The host is reachable on the given port only; nothing IPv6 in an ip table.
    expect(kiciChain('input')).toMatch(/iifname "veth-ab".*tcp dport 8080 accept/);
    expect(kiciTable()).not.toMatch(/ip6|icmpv6/);
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

  it('coexists with the core’s inet scaler_primitives: each side adds and removes only its own', async () => {
    // The core's default table in the same namespace, with an agent of the same id.
    const kiciBefore = kiciTable();
    await coreAdd('veth-ab', { iifname: 'veth-ab', hostAccess: [8080] }, { netns: ns });
    await coreAdd('ci-6', { saddr: 'fd47::2', denyAll: true }, { netns: ns });
    expect(kiciTable()).toBe(kiciBefore);
    expect((await listIsolatedAgents({ netns: ns })).map((a) => a.agentId)).toEqual([
      'ci-6',
      'veth-ab',
    ]);
    expect(
      (await listIsolatedAgents({ netns: ns, ...KICI_NFT_TABLE })).map((a) => a.agentId),
    ).toEqual(['veth-ab']);

    // The adapter adds and removes: the core table does not change.
    const coreBefore = coreTable();
    await addIsolationRules('veth-cd', '10.0.0.1', undefined, 'iifname', opts);
    await removeIsolationRules('veth-ab', opts);
    expect(coreTable()).toBe(coreBefore);
    expect(kiciTable()).not.toMatch(/"veth-ab"/);
    expect(seedLines()).toEqual(SEED_RULES);

    // The core removes: kici's table does not change.
    const kiciNow = kiciTable();
    expect(await coreRemove('veth-ab', { netns: ns })).toBeGreaterThan(0);
    expect(await coreRemove('ci-6', { netns: ns })).toBeGreaterThan(0);
    expect(kiciTable()).toBe(kiciNow);
    expect(kiciTable()).toMatch(/"veth-cd"/);
    await removeIsolationRules('veth-cd', opts);
    expect(kiciTable()).not.toMatch(/veth-cd/);
  });

  it('nft -c accepts both tables: the listed ruleset and the rendered plans', async () => {
    await addIsolationRules('veth-ef', '10.0.0.1', { denyAll: true }, 'iifname', opts);
    await coreAdd('ci-7', { iifname: 'veth-ef', allowlist: ['fd00:1::/64'] }, { netns: ns });
    const listed = inNs(ns, 'nft', ['list', 'ruleset']);
    expect(listed).toMatch(/table ip kici/);
    expect(listed).toMatch(/table inet scaler_primitives/);
    const fresh = spaces.add('check');
    expect(() => inNs(fresh, 'nft', ['-c', '-f', '-'], listed)).not.toThrow();
    const plans =
      renderIsolationPlan(
        kiciAgentId('172.30.0.9', 'saddr'),
        { saddr: '172.30.0.9', gateway: '172.30.0.1' },
        { ...KICI_NFT_TABLE, includeTable: true },
      ) + renderIsolationPlan('ci-8', { iifname: 'tap-8' }, { includeTable: true });
    expect(() => inNs(fresh, 'nft', ['-c', '-f', '-'], plans)).not.toThrow();
    await removeIsolationRules('veth-ef', opts);
    await coreRemove('ci-7', { netns: ns });
  });

  it('removes exactly one agent: veth-ab never takes veth-abc, nor kici’s own rules', async () => {
    await addIsolationRules('veth-ab', '10.0.0.1', undefined, undefined, opts);
    await addIsolationRules('veth-abc', '10.0.0.1', undefined, undefined, opts);
    await removeIsolationRules('veth-ab', opts);
    const after = kiciChain('forward');
    expect(after).not.toMatch(/"veth-ab"/);
    expect(after).toMatch(/"veth-abc"/);
    expect(seedLines()).toEqual(SEED_RULES);
    // kici's own agent's rules carry no tag: removing that identifier leaves them to kici.
    await removeIsolationRules('veth-k', opts);
    expect(seedLines()).toEqual(SEED_RULES);
    await removeIsolationRules('veth-abc', opts);
    expect(kiciChain('forward')).not.toMatch(/veth-abc/);
  });

  it('isolates and removes by source address, exactly; an IPv6 address needs an inet table', async () => {
    await addIsolationRules('172.30.0.5', '172.30.0.1', undefined, 'saddr', opts);
    await addIsolationRules('172.30.0.50', '172.30.0.1', undefined, 'saddr', opts);
    expect(kiciChain('forward')).toMatch(/ip saddr 172\.30\.0\.5 /);
    await removeIsolationRules('172.30.0.5', opts);
    const forward = kiciChain('forward');
    expect(forward).not.toMatch(/ip saddr 172\.30\.0\.5 /);
    expect(forward).toMatch(/ip saddr 172\.30\.0\.50 /);
    await removeIsolationRules('172.30.0.50', opts);
    expect(kiciChain('forward')).not.toMatch(/172\.30\.0\.50/);

    const error = await addIsolationRules('fd47::5', 'fd47::1', undefined, 'saddr', opts).catch(
      (e) => e,
    );
    expect(isInvalidInputError(error)).toBe(true);
    expect(error.message).toMatch(/fd47::5 is IPv6.*family: 'inet'/);
    const v6 = { ...opts, family: 'inet', table: 'kici6' } as const;
    await addIsolationRules('fd47::5', 'fd47::1', undefined, 'saddr', v6);
    expect(inNs(ns, 'nft', ['list', 'table', 'inet', 'kici6'])).toMatch(/ip6 saddr fd47::5 /);
    await removeIsolationRules('fd47::5', v6);
    expect(inNs(ns, 'nft', ['list', 'table', 'inet', 'kici6'])).not.toMatch(/fd47::5/);
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
    await expect(
      addIsolationRules('veth-q', '10.0.0.1', undefined, 'iifname', {
        ...opts,
        family: 'ip6' as never,
      }),
    ).rejects.toSatisfy(isInvalidInputError);
    expect(kiciChain('forward')).not.toMatch(/veth-q/);
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
