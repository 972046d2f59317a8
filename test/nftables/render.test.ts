import { readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import {
  buildIsolationPlan,
  type IsolationPolicy,
  renderIsolationPlan,
  renderPlan,
} from 'scaler-primitives/nftables';
import { describe, expect, it } from 'vitest';
import { isInvalidInputError } from '../../src/errors/input.js';
import { GOLDEN_CASES } from '../fixtures/nftables/golden-cases.js';

const dir = fileURLToPath(new URL('../fixtures/nftables/', import.meta.url));

describe('rendered plans match the golden files', () => {
  it.each(GOLDEN_CASES)('%s', (name, agentId, policy, opts) => {
    const text = renderIsolationPlan(agentId, policy, opts);
    const file = `${dir}${name}.nft`;
    if (process.env.UPDATE_GOLDEN === '1') writeFileSync(file, text);
    expect(text).toBe(readFileSync(file, 'utf8'));
  });
});

describe('plans', () => {
  it('are data: the rendered text is the rendering of the typed plan', () => {
    const plan = buildIsolationPlan('a', { iifname: 'veth-a' });
    expect(plan.family).toBe('inet');
    expect(plan.table).toBe('scaler_primitives');
    expect(renderPlan(plan)).toBe(renderIsolationPlan('a', { iifname: 'veth-a' }));
    expect(plan.commands[0]).toEqual({ op: 'create chain', chain: 'agent-a-fwd' });
    expect(plan.commands.at(-1)).toEqual({
      op: 'add element',
      map: 'in_iif',
      key: { kind: 'ifname', value: 'veth-a' },
      target: 'agent-a-in',
    });
  });

  it('carry the agent id and a policy digest in every rule comment', () => {
    const plan = buildIsolationPlan('a', { saddr: '10.0.0.2' }, { layout: 'rules' });
    const comments = plan.commands.map((c) => ('rule' in c ? c.rule.comment : undefined));
    expect(comments.every((c) => /^agent=a policy=[0-9a-f]{12}$/.test(c ?? ''))).toBe(true);
    expect(new Set(comments).size).toBe(1);
  });

  it('change digest when the policy changes, and only then', () => {
    const digest = (p: IsolationPolicy) =>
      /policy=([0-9a-f]+)/.exec(renderIsolationPlan('a', p))?.[1];
    expect(digest({ iifname: 'x', allowlist: ['10.1.0.0/16'] })).toBe(
      digest({ iifname: 'x', allowlist: ['10.1.0.0/16', '10.1.0.0/16'] }),
    );
    expect(digest({ iifname: 'x' })).not.toBe(digest({ iifname: 'x', denyAll: true }));
  });

  it('drop the metadata service before the allowlist can accept it', () => {
    const lines = renderIsolationPlan('a', {
      iifname: 'x',
      allowlist: ['169.254.0.0/16'],
    }).split('\n');
    const metadata = lines.findIndex((l) => l.includes('169.254.169.254 drop'));
    const allow = lines.findIndex((l) => l.includes('169.254.0.0/16 accept'));
    expect(metadata).toBeGreaterThan(-1);
    expect(allow).toBeGreaterThan(metadata);
  });

  it('for a table of family ip: IPv4 rules only, in both layouts, with and without skeleton', () => {
    const policy: IsolationPolicy = {
      iifname: 'veth-a',
      gateway: ['10.0.0.1', 'fd00::1'],
      allowlist: ['fd00:1::/64'],
      hostAccess: [22],
      denyAll: true,
    };
    for (const layout of ['vmap', 'rules'] as const) {
      const plan = buildIsolationPlan('a', policy, { family: 'ip', layout, includeTable: true });
      expect(plan.family).toBe('ip');
      const text = renderPlan(plan);
      expect(text).not.toMatch(/ip6|icmpv6|_v6|inet|fd00/);
      expect(text).toContain('ip daddr 10.0.0.1 accept');
      expect(text).toContain('tcp dport 22 accept');
      // Same shape as inet, minus what only IPv6 packets can match.
      const inet = renderIsolationPlan('a', policy, { layout, includeTable: true });
      const kept = inet
        .split('\n')
        .filter((l) => !/ip6|icmpv6|_v6/.test(l))
        .map((l) => l.replace(/ inet /, ' ip ').replace(/policy=[0-9a-f]+/, ''));
      expect(text.split('\n').map((l) => l.replace(/policy=[0-9a-f]+/, ''))).toEqual(kept);
    }
    // A skuid agent in an ip table: output chain, IPv4 only.
    const uid = renderIsolationPlan('u', { skuid: 1001, denyAll: true }, { family: 'ip' });
    expect(uid).toContain('add element ip scaler_primitives out_uid { 1001 : jump agent-u-out }');
    expect(uid).not.toMatch(/ip6/);
  });

  it('refuse an IPv6 agent address and an unknown family for an ip table', () => {
    let error: unknown;
    try {
      buildIsolationPlan('a', { saddr: 'FD00::5' }, { family: 'ip' });
    } catch (e) {
      error = e;
    }
    expect(isInvalidInputError(error)).toBe(true);
    expect((error as Error).message).toMatch(/fd00::5 is IPv6/);
    // An IPv4 agent's IPv6 entries are simply not its family: left out, as in inet.
    expect(() =>
      buildIsolationPlan('a', { saddr: '10.0.0.5', allowlist: ['fd00::/8'] }, { family: 'ip' }),
    ).not.toThrow();
    for (const family of ['ip6', 'inet6', 'arp', '', 6]) {
      expect(() => buildIsolationPlan('a', { iifname: 'x' }, { family: family as 'ip' })).toThrow(
        expect.toSatisfy(isInvalidInputError),
      );
    }
  });

  it('the rules layout skeleton has no verdict map (nor dispatch rule)', () => {
    for (const family of ['inet', 'ip'] as const) {
      const text = renderIsolationPlan(
        'a',
        { iifname: 'x' },
        { layout: 'rules', family, includeTable: true },
      );
      expect(text).not.toMatch(/map|vmap|dispatch/);
      expect(text.split('\n').slice(0, 4)).toEqual([
        `add table ${family} scaler_primitives`,
        `add chain ${family} scaler_primitives forward { type filter hook forward priority 0 ; policy accept ; }`,
        `add chain ${family} scaler_primitives input { type filter hook input priority 0 ; policy accept ; }`,
        `add chain ${family} scaler_primitives output { type filter hook output priority 0 ; policy accept ; }`,
      ]);
    }
  });

  it('keep only the agent family for a saddr identity', () => {
    const text = renderIsolationPlan('a', { saddr: '10.0.0.2', allowlist: ['fd00::/8'] });
    expect(text).not.toContain('ip6');
  });

  it('the renderer refuses unsafe strings even if a plan is built by hand', () => {
    expect(() =>
      renderPlan({
        family: 'inet',
        table: 'kici',
        commands: [
          {
            op: 'add rule',
            chain: 'forward',
            rule: { exprs: [{ type: 'iifname', name: 'a" ; flush ruleset ; "' }], verdict: 'drop' },
          },
        ],
      }),
    ).toThrow(expect.toSatisfy(isInvalidInputError));
    expect(() =>
      renderPlan({
        family: 'inet',
        table: 'kici',
        commands: [{ op: 'flush chain', chain: 'forward\nflush ruleset' }],
      }),
    ).toThrow(expect.toSatisfy(isInvalidInputError));
  });
});
