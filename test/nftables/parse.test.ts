import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import fc from 'fast-check';
import { parseRuleHandles, parseRuleHandlesJson } from 'scaler-primitives/nftables';
import { describe, expect, it } from 'vitest';
import { isNftCommandError } from '../../src/errors/nftables.js';
import { agentFootprints, parseTableState } from '../../src/nftables/parse.js';

const dir = fileURLToPath(new URL('../fixtures/nftables/', import.meta.url));
// Captured from nft 1.0.6 (table renamed to the default, scaler_primitives): agents ab, abc (vmap, iifname veth-ab / veth-abc), r1 and r10
// (rules layout, saddr 10.47.6.2 / 10.47.6.20) and u (vmap, skuid 1001).
const listing = readFileSync(`${dir}listing.json`, 'utf8');
const forwardText = readFileSync(`${dir}forward-chain.txt`, 'utf8');

describe('parseRuleHandles (nft -a list chain text)', () => {
  const seedStyle = [
    'table ip kici {',
    '\tchain forward { # handle 1',
    '\t\ttype filter hook forward priority filter; policy accept;',
    '\t\tiifname "veth-ab" ip daddr 10.0.0.1 accept # handle 2',
    '\t\tiifname "veth-abc" ip daddr 10.0.0.1 accept # handle 3',
    '\t\tiifname "veth-ab" ip daddr { 10.0.0.0/8, 172.16.0.0/12 } drop # handle 4',
    '\t\tiifname "xveth-ab" drop # handle 5',
    '\t\tmeta skuid 1001 drop # handle 6',
    '\t\tmeta skuid 10011 drop # handle 7',
    '\t}',
    '}',
  ].join('\n');

  it.each<[string, number[]]>([
    ['veth-ab', [2, 4]],
    ['veth-abc', [3]],
    ['veth-a', []],
    ['1001', [6]],
    ['10.0.0.1', [2, 3]],
    ['10.0.0.0/8', [4]],
    ['10.0.0.0', []],
    ['drop', []],
  ])('seed-style lines: %s -> %j', (identifier, handles) => {
    // Values after iifname/saddr/daddr/skuid are compared whole; verdicts never match.
    expect(parseRuleHandles(seedStyle, identifier)).toEqual(handles);
  });

  it('matches saddr values and agent comments exactly in real nft output', () => {
    const r1 = parseRuleHandles(forwardText, '10.47.6.2');
    const r10 = parseRuleHandles(forwardText, '10.47.6.20');
    expect(r1.length).toBe(4);
    expect(r10.length).toBe(3);
    expect(r1.some((h) => r10.includes(h))).toBe(false);
    expect(parseRuleHandles(forwardText, 'r1')).toEqual(r1);
    expect(parseRuleHandles(forwardText, 'r10')).toEqual(r10);
    expect(parseRuleHandles(forwardText, 'r')).toEqual([]);
  });

  it('ignores chain headers and lines without a handle', () => {
    expect(parseRuleHandles('chain forward { # handle 1\n}', 'forward')).toEqual([]);
    expect(parseRuleHandles('', 'x')).toEqual([]);
  });

  it('property: a name never matches a rule of a longer name it prefixes', () => {
    fc.assert(
      fc.property(
        fc.stringMatching(/^[a-z0-9-]{1,10}$/),
        fc.stringMatching(/^[a-z0-9-]{1,4}$/),
        (name, suffix) => {
          const text = `\t\tiifname "${name}${suffix}" drop # handle 9\n\t\tiifname "${name}" drop # handle 8`;
          expect(parseRuleHandles(text, name)).toEqual([8]);
        },
      ),
    );
  });
});

describe('parseRuleHandlesJson (nft -j output)', () => {
  it('matches the text parser on the same table', () => {
    for (const id of ['10.47.6.2', '10.47.6.20', 'r1', 'r10', 'veth-ab', 'veth-abc']) {
      const fromJson = parseRuleHandlesJson(listing, id).filter((h) =>
        parseRuleHandles(forwardText, id).includes(h),
      );
      expect(fromJson).toEqual(parseRuleHandles(forwardText, id));
    }
  });

  it('finds rules of vmap agents by comment, exactly', () => {
    const ab = parseRuleHandlesJson(listing, 'ab');
    const abc = parseRuleHandlesJson(listing, 'abc');
    expect(ab.length).toBe(9);
    expect(abc.length).toBe(9);
    expect(ab.some((h) => abc.includes(h))).toBe(false);
    expect(parseRuleHandlesJson(listing, 'a')).toEqual([]);
  });

  it('accepts an already-parsed document and refuses non-nft JSON', () => {
    expect(parseRuleHandlesJson(JSON.parse(listing), 'r1')).toEqual(
      parseRuleHandlesJson(listing, 'r1'),
    );
    expect(() => parseRuleHandlesJson('{"x":1}', 'a')).toThrow(expect.toSatisfy(isNftCommandError));
    expect(() => parseRuleHandlesJson('not json', 'a')).toThrow(
      expect.toSatisfy(isNftCommandError),
    );
  });
});

describe('table state', () => {
  it('groups everything by agent with exact ids', () => {
    const state = parseTableState(listing, 'scaler_primitives');
    expect(state.exists).toBe(true);
    const agents = agentFootprints(state);
    expect([...agents.keys()].sort()).toEqual(['ab', 'abc', 'r1', 'r10', 'u']);
    const ab = agents.get('ab')!;
    expect(ab.chains.map((c) => c.name).sort()).toEqual(['agent-ab-fwd', 'agent-ab-in']);
    expect(ab.elements.map((e) => [e.map, e.key.value]).sort()).toEqual([
      ['fwd_iif', 'veth-ab'],
      ['in_iif', 'veth-ab'],
    ]);
    expect(agents.get('u')!.elements).toEqual([
      { map: 'out_uid', key: { kind: 'uid', value: 1001 }, target: 'agent-u-out' },
    ]);
    expect(agents.get('r1')!.rules.every((r) => r.chain === 'forward' || r.chain === 'input')).toBe(
      true,
    );
  });

  it('reports a table of another name as missing', () => {
    expect(parseTableState(listing, 'other').exists).toBe(false);
  });
});

describe('table state of one family', () => {
  // `nft -j list ruleset` with `ip kici` (kici's) and `inet kici` (an older default) side
  // by side: one name, two tables.
  const rule = (family: string, chain: string, handle: number, comment: string) => ({
    rule: { family, table: 'kici', chain, handle, comment, expr: [{ drop: null }] },
  });
  const ruleset = JSON.stringify({
    nftables: [
      { metainfo: { json_schema_version: 1 } },
      { table: { family: 'ip', name: 'kici', handle: 1 } },
      { chain: { family: 'ip', table: 'kici', name: 'forward', handle: 1 } },
      { chain: { family: 'ip', table: 'kici', name: 'output', handle: 2 } },
      rule('ip', 'forward', 5, 'agent=veth-ab policy=0123456789ab'),
      { table: { family: 'inet', name: 'kici', handle: 2 } },
      { chain: { family: 'inet', table: 'kici', name: 'forward', handle: 1 } },
      { chain: { family: 'inet', table: 'kici', name: 'input', handle: 2 } },
      rule('inet', 'forward', 5, 'agent=veth-x policy=0123456789ab'),
      rule('inet', 'input', 6, 'agent=veth-x policy=0123456789ab'),
    ],
  });

  it('keeps the family it was asked for, and only that one', () => {
    const ip = parseTableState(ruleset, 'kici', 'ip');
    expect(ip.exists).toBe(true);
    expect([...ip.chains].sort()).toEqual(['forward', 'output']);
    expect([...agentFootprints(ip).keys()]).toEqual(['veth-ab']);
    const inet = parseTableState(ruleset, 'kici');
    expect([...inet.chains].sort()).toEqual(['forward', 'input']);
    expect([...agentFootprints(inet).keys()]).toEqual(['veth-x']);
    expect(
      agentFootprints(inet)
        .get('veth-x')!
        .rules.map((r) => r.handle),
    ).toEqual([5, 6]);
    expect(parseTableState(ruleset, 'other', 'ip').exists).toBe(false);
  });
});
