import { readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { isInvalidInputError } from '../../src/errors.js';
import {
  buildIsolationPlan,
  type IsolationPolicy,
  renderIsolationPlan,
  renderPlan,
} from '../../src/nftables/index.js';
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
