import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { execa } from 'execa';
import {
  addIsolationRules,
  ensureTable,
  type IsolationPolicy,
  listIsolatedAgents,
  type NftOptions,
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
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  isNftCommandError,
  isNftNotInstalledError,
  isNftPermissionError,
} from '../../src/errors/nftables.js';
import type { NftLayoutName } from '../../src/nftables/layout.js';
import { skeletonCommands } from '../../src/nftables/layout.js';
import { agentFootprints, parseTableState } from '../../src/nftables/parse.js';
import { DEFAULT_TABLE } from '../../src/nftables/validate.js';
import { GOLDEN_CASES } from '../fixtures/nftables/golden-cases.js';
import { inNs, Namespaces } from '../helpers/netns.js';
import { hasSystem } from '../helpers/system.js';

const ok = hasSystem(['nft', 'ip', 'root'], 'nftables rules (system)');

describe.runIf(ok)('nftables rules in a throwaway network namespace', () => {
  const spaces = new Namespaces('sp-nft');
  let ns = '';
  let opts: NftOptions;

  const state = () =>
    parseTableState(
      inNs(ns, 'nft', ['-j', 'list', 'table', 'inet', 'scaler_primitives']),
      'scaler_primitives',
    );
  const footprint = (id: string) => agentFootprints(state()).get(id);

  beforeAll(() => {
    ns = spaces.add('rules');
    opts = { netns: ns };
  });
  afterAll(() => spaces.cleanup());

  it('nft is available in the namespace; a missing binary is reported as such', async () => {
    await validateNftablesAvailability(opts);
    await expect(
      validateNftablesAvailability({ ...opts, nftPath: 'nft-does-not-exist' }),
    ).rejects.toSatisfy(isNftNotInstalledError);
  });

  it('nft without CAP_NET_ADMIN is reported as NftPermissionError naming requireSudo', async () => {
    // Same namespace, but nft runs as nobody: `ip netns exec <ns> setpriv ... nft ...`.
    const runner: NftRunner = async (file, args, { input }) => {
      const [netns, exec, name, ...rest] = args;
      const dropped = [
        netns!,
        exec!,
        name!,
        'setpriv',
        '--reuid=65534',
        '--regid=65534',
        '--clear-groups',
        ...rest,
      ];
      const r = await execa(file, dropped, {
        reject: false,
        ...(input === undefined ? {} : { input }),
      });
      return { stdout: String(r.stdout), stderr: String(r.stderr), exitCode: r.exitCode ?? 1 };
    };
    const error = await validateNftablesAvailability({ ...opts, runner }).catch((e) => e);
    expect(isNftPermissionError(error)).toBe(true);
    expect(error.message).toMatch(/CAP_NET_ADMIN.*requireSudo/);
  });

  it('the golden files are valid nft (checked with nft -c against the kernel)', () => {
    for (const [name, , , planOpts] of GOLDEN_CASES) {
      const golden = readFileSync(
        fileURLToPath(new URL(`../fixtures/nftables/${name}.nft`, import.meta.url)),
        'utf8',
      );
      const skeleton = planOpts.includeTable
        ? ''
        : renderPlan({
            family: planOpts.family ?? 'inet',
            table: planOpts.table ?? DEFAULT_TABLE,
            commands: skeletonCommands(planOpts.family),
          });
      expect(() => inNs(ns, 'nft', ['-c', '-f', '-'], skeleton + golden), name).not.toThrow();
    }
  });

  it('ensureTable is idempotent', async () => {
    expect(await ensureTable(opts)).toBe(true);
    const before = inNs(ns, 'nft', ['list', 'ruleset']);
    expect(await ensureTable(opts)).toBe(false);
    expect(inNs(ns, 'nft', ['list', 'ruleset'])).toBe(before);
  });

  const agents: Array<[string, IsolationPolicy, NftLayoutName]> = [
    ['ab', { iifname: 'veth-ab', hostAccess: [8080], allowlist: ['10.1.0.0/16'] }, 'vmap'],
    ['abc', { iifname: 'veth-abc', denyAll: true }, 'vmap'],
    ['r1', { saddr: '10.47.6.2', gateway: '10.47.6.1' }, 'rules'],
    ['r10', { saddr: '10.47.6.20' }, 'rules'],
    ['v6', { saddr: 'fd47::2', hostAccess: [{ port: 53, protocol: 'udp' }] }, 'vmap'],
    ['u', { skuid: 1001, denyAll: true }, 'vmap'],
    ['u2', { skuid: 10011 }, 'rules'],
  ];

  it('applies every agent; nft -j shows exactly the planned rules', async () => {
    for (const [id, policy, layout] of agents) {
      await addIsolationRules(id, policy, { ...opts, layout });
      const planned = renderIsolationPlan(id, policy, { layout })
        .split('\n')
        .filter((l) => l.startsWith('add rule'));
      const found = footprint(id)!;
      expect(found.rules.length, id).toBe(planned.length);
      // Same comment on every rule, and the verdicts in the planned order.
      const comment = /comment "([^"]+)"/.exec(planned[0]!)![1];
      expect(
        found.rules.every((r) => r.comment === comment),
        id,
      ).toBe(true);
      expect(found.rules.map((r) => r.verdict)).toEqual(
        planned.map((l) => /\b(accept|drop) comment/.exec(l)![1]),
      );
      expect(await verifyIsolation(id, policy, { ...opts, layout })).toEqual({
        ok: true,
        problems: [],
        repaired: false,
      });
    }
    const listed = await listIsolatedAgents(opts);
    expect(listed.map((a) => [a.agentId, a.layout])).toEqual(
      agents.map(([id, , layout]) => [id, layout]).sort(),
    );
  });

  it('nft lists the very rules the plan rendered, chain by chain (text compared)', () => {
    // nft sorts set members when it prints; sort ours the same way before comparing.
    const norm = (body: string) =>
      body.replace(
        /\{ ([^}]*) \}/g,
        (_m, inner: string) => `{ ${inner.split(', ').sort().join(', ')} }`,
      );
    const listed = new Map<string, string[]>();
    let chain = '';
    for (const line of inNs(ns, 'nft', ['list', 'table', 'inet', 'scaler_primitives']).split(
      '\n',
    )) {
      const header = /^\tchain (\S+) \{$/.exec(line);
      if (header) chain = header[1]!;
      else if (line.startsWith('\t\t') && line.includes('comment "agent=')) {
        listed.set(chain, [...(listed.get(chain) ?? []), norm(line.trim())]);
      }
    }
    for (const [id, policy, layout] of agents) {
      const planned = new Map<string, string[]>();
      for (const line of renderIsolationPlan(id, policy, { layout }).split('\n')) {
        const m = /^add rule inet scaler_primitives (\S+) (.*)$/.exec(line);
        if (m) planned.set(m[1]!, [...(planned.get(m[1]!) ?? []), norm(m[2]!)]);
      }
      for (const [name, rules] of planned) {
        const mine = (listed.get(name) ?? []).filter((l) => l.includes(`"agent=${id} `));
        expect(mine, `${id} ${name}`).toEqual(rules);
      }
    }
  });

  it('re-applying is idempotent; a changed policy replaces the old rules', async () => {
    for (const [id, policy, layout] of agents) {
      const before = footprint(id)!.rules.length;
      const result = await addIsolationRules(id, policy, { ...opts, layout });
      expect(result.replaced).toBe(true);
      expect(footprint(id)!.rules.length).toBe(before);
    }
    const changed: IsolationPolicy = { iifname: 'veth-ab', denyAll: true };
    await addIsolationRules('ab', changed, opts);
    expect((await verifyIsolation('ab', changed, opts)).ok).toBe(true);
    expect((await verifyIsolation('ab', agents[0]![1], opts)).ok).toBe(false);
    await addIsolationRules('ab', agents[0]![1], opts);
  });

  it('rules carry exact identities: prefixes never match (text and JSON parsers)', () => {
    const forward = inNs(ns, 'nft', [
      '-a',
      'list',
      'chain',
      'inet',
      'scaler_primitives',
      'forward',
    ]);
    const json = inNs(ns, 'nft', ['-j', 'list', 'table', 'inet', 'scaler_primitives']);
    const overlap = (a: number[], b: number[]) => a.filter((h) => b.includes(h));
    const r1 = parseRuleHandles(forward, '10.47.6.2');
    const r10 = parseRuleHandles(forward, '10.47.6.20');
    expect(r1.length).toBeGreaterThan(0);
    expect(r10.length).toBeGreaterThan(0);
    expect(overlap(r1, r10)).toEqual([]);
    const ab = parseRuleHandlesJson(json, 'ab');
    expect(ab.length).toBeGreaterThan(0);
    expect(overlap(ab, parseRuleHandlesJson(json, 'abc'))).toEqual([]);
    expect(overlap(parseRuleHandlesJson(json, 'u'), parseRuleHandlesJson(json, 'u2'))).toEqual([]);
  });

  it('remove takes exactly one agent and leaves all others', async () => {
    const count = (id: string) => footprint(id)?.rules.length ?? 0;
    const before = Object.fromEntries(agents.map(([id]) => [id, count(id)]));
    expect(await removeIsolationRules('ab', opts)).toBe(before.ab);
    expect(await removeIsolationRules('r1', opts)).toBe(before.r1);
    expect(await removeIsolationRules('u', { ...opts, policy: agents[5]![1] })).toBe(before.u);
    expect(await removeIsolationRules('ab', opts)).toBe(0);
    for (const [id] of agents) {
      expect(count(id), id).toBe(['ab', 'r1', 'u'].includes(id) ? 0 : before[id]);
    }
    const s = state();
    expect([...s.chains].filter((c) => /^agent-(ab|u)-/.test(c))).toEqual([]);
    expect(s.elements.map((e) => e.key.value).sort()).toEqual([
      'fd47::2',
      'fd47::2',
      'veth-abc',
      'veth-abc',
    ]);
  });

  it('a guarded removal never deletes the dispatch of another agent with that identity', async () => {
    const policy: IsolationPolicy = { iifname: 'veth-g' };
    await addIsolationRules('g1', policy, opts);
    expect(await removeIsolationRules('g2', { ...opts, policy })).toBe(0);
    expect(await verifyIsolation('g1', policy, opts)).toMatchObject({ ok: true });
    expect(await removeIsolationRules('g1', { ...opts, policy })).toBe(5 + 3);
    expect(footprint('g1')).toBeUndefined();
  });

  it('sweep removes the orphans of agents that are gone', async () => {
    const result = await sweepIsolation(['abc', 'v6'], opts);
    expect(result.removedAgents).toEqual(['r10', 'u2']);
    expect((await listIsolatedAgents(opts)).map((a) => a.agentId)).toEqual(['abc', 'v6']);
  });

  it('verify detects rules wiped by `nft flush ruleset` and repairs them', async () => {
    const [, abcPolicy] = agents[1]!;
    inNs(ns, 'nft', ['flush', 'ruleset']);
    const seen = await verifyIsolation('abc', abcPolicy, opts);
    expect(seen.ok).toBe(false);
    expect(seen.problems.join(' ')).toMatch(/table does not exist/);
    const repaired = await verifyIsolation('abc', abcPolicy, { ...opts, repair: true });
    expect(repaired.repaired).toBe(true);
    expect(await verifyIsolation('abc', abcPolicy, opts)).toMatchObject({ ok: true });

    // A partial wipe: someone flushes the agent's chain only.
    inNs(ns, 'nft', ['flush', 'chain', 'inet', 'scaler_primitives', 'agent-abc-fwd']);
    expect((await verifyIsolation('abc', abcPolicy, opts)).problems.join(' ')).toMatch(
      /agent-abc-fwd: expected 6 rules, found 0/,
    );
    await verifyIsolation('abc', abcPolicy, { ...opts, repair: true });
    expect((await verifyIsolation('abc', abcPolicy, opts)).ok).toBe(true);
  });

  it('an nft failure surfaces as NftCommandError with nft stderr', async () => {
    const error = await addIsolationRules(
      'x',
      { iifname: 'veth-x' },
      {
        ...opts,
        runner: async () => ({
          stdout: '',
          stderr: 'Error: Could not process rule: No buffer space available',
          exitCode: 1,
        }),
      },
    ).catch((e) => e);
    expect(isNftCommandError(error)).toBe(true);
    expect(error.stderr).toMatch(/No buffer space/);
  });
});

describe.runIf(ok)('tables of family ip and inet side by side in one namespace', () => {
  const spaces = new Namespaces('sp-nftfam');
  let ns = '';
  let inet: NftOptions;
  let ip: NftOptions;
  const ipAgents: Array<[string, IsolationPolicy, NftLayoutName]> = [
    ['a', { iifname: 'veth-a', gateway: ['10.0.0.1', 'fd00::1'], hostAccess: [8080] }, 'vmap'],
    ['b', { saddr: '172.30.0.5', allowlist: ['10.1.0.0/16'], denyAll: true }, 'vmap'],
    ['c', { iifname: 'veth-c' }, 'rules'],
    ['u', { skuid: 1001, denyAll: true }, 'rules'],
  ];

  beforeAll(() => {
    ns = spaces.add('fam');
    // One table name, two families: nft keeps them apart, and so must we.
    inet = { netns: ns, table: 'shared' };
    ip = { netns: ns, table: 'shared', family: 'ip' };
  });
  afterAll(() => spaces.cleanup());

  const ipState = () =>
    parseTableState(inNs(ns, 'nft', ['-j', 'list', 'table', 'ip', 'shared']), 'shared', 'ip');

  it('each family gets its own table; an ip table holds no IPv6 map or rule', async () => {
    expect(await ensureTable(ip)).toBe(true);
    expect(await ensureTable(inet)).toBe(true);
    expect(await ensureTable(ip)).toBe(false);
    expect(inNs(ns, 'nft', ['list', 'tables'])).toMatch(/table ip shared\n.*table inet shared/s);
    const text = inNs(ns, 'nft', ['list', 'table', 'ip', 'shared']);
    expect(text).toMatch(/map fwd_v4/);
    expect(text).not.toMatch(/ip6|_v6/);
  });

  it('applies agents of both layouts in the ip table: the planned rules, verified', async () => {
    for (const [id, policy, layout] of ipAgents) {
      await addIsolationRules(id, policy, { ...ip, layout });
      // The same agent id in the inet table is another agent.
      await addIsolationRules(id, policy, { ...inet, layout });
      const planned = renderIsolationPlan(id, policy, { layout, family: 'ip' })
        .split('\n')
        .filter((l) => l.startsWith('add rule'));
      const found = agentFootprints(ipState()).get(id)!;
      expect(found.rules.length, id).toBe(planned.length);
      expect(await verifyIsolation(id, policy, { ...ip, layout })).toMatchObject({ ok: true });
      expect(await verifyIsolation(id, policy, { ...inet, layout })).toMatchObject({ ok: true });
    }
    expect(inNs(ns, 'nft', ['list', 'table', 'ip', 'shared'])).not.toMatch(/ip6|icmpv6|fd00/);
    const ids = ipAgents.map(([id]) => id).sort();
    expect((await listIsolatedAgents(ip)).map((a) => a.agentId)).toEqual(ids);
    expect((await listIsolatedAgents(inet)).map((a) => a.agentId)).toEqual(ids);
  });

  it('remove, sweep and repair in one family never touch the other', async () => {
    const inetBefore = inNs(ns, 'nft', ['list', 'table', 'inet', 'shared']);
    expect(await removeIsolationRules('a', { ...ip, policy: ipAgents[0]![1] })).toBeGreaterThan(0);
    expect(await removeIsolationRules('c', ip)).toBeGreaterThan(0);
    expect(await sweepIsolation(['b'], ip)).toEqual({
      removedAgents: ['u'],
      removedRules: expect.any(Number),
    });
    expect((await listIsolatedAgents(ip)).map((a) => a.agentId)).toEqual(['b']);
    expect(inNs(ns, 'nft', ['list', 'table', 'inet', 'shared'])).toBe(inetBefore);

    // Wipe the ip table only: verify notices, repair puts it back, inet is unchanged.
    inNs(ns, 'nft', ['delete', 'table', 'ip', 'shared']);
    const [, policy, layout] = ipAgents[1]!;
    expect((await verifyIsolation('b', policy, { ...ip, layout })).ok).toBe(false);
    await verifyIsolation('b', policy, { ...ip, layout, repair: true });
    expect(await verifyIsolation('b', policy, { ...ip, layout })).toMatchObject({ ok: true });
    expect(inNs(ns, 'nft', ['list', 'table', 'inet', 'shared'])).toBe(inetBefore);
  });

  it('nft itself refuses ip6 in an ip table; we refuse it first, naming the command', () => {
    const script = 'add rule ip shared forward ip6 daddr fc00::/7 drop\n';
    expect(() => inNs(ns, 'nft', ['-c', '-f', '-'], script)).toThrow();
    expect(() =>
      renderPlan({
        family: 'ip',
        table: 'shared',
        commands: [
          {
            op: 'add rule',
            chain: 'forward',
            rule: {
              exprs: [{ type: 'daddr', family: 'ip6', addrs: ['fc00::/7'] }],
              verdict: 'drop',
            },
          },
        ],
      }),
    ).toThrow(/command 1 \(`add rule` in chain forward\).*`ip6 daddr fc00::\/7`/);
  });
});
