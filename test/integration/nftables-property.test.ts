// Property: whatever a caller hands the policy builder or the plan renderer, it is either
// refused with a typed error or it renders a script the kernel accepts (`nft -c -f -`,
// run inside a network namespace this test makes and deletes; the host ruleset is never
// touched).
import fc from 'fast-check';
import {
  type IsolationPolicy,
  type NftPlan,
  renderIsolationPlan,
  renderPlan,
} from 'scaler-primitives/nftables';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isInvalidInputError } from '../../src/errors/input.js';
import { DISPATCH_MAPS, skeletonCommands } from '../../src/nftables/layout.js';
import { inNs, Namespaces } from '../helpers/netns.js';
import { hasSystem } from '../helpers/system.js';

const ok = hasSystem(['nft', 'ip', 'root'], 'nftables property tests (system)');

function refusedTyped(error: unknown): boolean {
  return isInvalidInputError(error) || error instanceof TypeError;
}

// Values that are sometimes valid and often hostile, for any field.
const hostile = fc.constantFrom(
  '',
  ' ',
  '"',
  '\\',
  '\n',
  'accept\nflush ruleset',
  '*',
  'veth*',
  'a b',
  '; drop',
  '} ; flush ruleset ; {',
  '\u001b[2J',
  '\u009b31m',
  'x'.repeat(300),
  '-1',
  '0',
  '1e3',
  'NaN',
);
const ifname = fc.oneof(
  fc.stringMatching(/^[A-Za-z0-9_.@+-]{1,16}$/),
  fc.constantFrom('lo', 'tap-a', 'veth0', '.', '..'),
  hostile,
);
const v4 = fc.ipV4();
const v6 = fc.ipV6();
const cidr = fc.oneof(
  fc.tuple(v4, fc.integer({ min: 0, max: 33 })).map(([a, p]) => `${a}/${p}`),
  fc.tuple(v6, fc.integer({ min: 0, max: 129 })).map(([a, p]) => `${a}/${p}`),
  fc.constantFrom('10.0.0.0/8', 'fc00::/7', '0.0.0.0/0', '::/0', '169.254.169.254'),
  v4,
  v6,
  hostile,
);
const port = fc.oneof(
  fc.integer({ min: -2, max: 65537 }),
  fc.constantFrom(0, 1, 22, 53, 65535, 1.5, Number.NaN),
);
const hostPort = fc.oneof(
  port,
  fc.record(
    { port, protocol: fc.constantFrom('tcp', 'udp', 'sctp', undefined) },
    { requiredKeys: ['port'] },
  ),
  fc.record({ port, proto: fc.constant('udp') }),
);
const list = <T>(arb: fc.Arbitrary<T>) => fc.array(arb, { maxLength: 5 });

const hostilePolicy = fc
  .record(
    {
      iifname: ifname,
      saddr: fc.oneof(v4, v6, cidr),
      skuid: fc.oneof(fc.integer({ min: -1, max: 2 ** 32 }), fc.constant(0)),
      gateway: fc.oneof(v4, v6, list(fc.oneof(v4, v6, hostile))),
      allowlist: list(cidr),
      denyAll: fc.oneof(fc.boolean(), fc.constant('yes')),
      hostAccess: list(hostPort),
      metadata: list(cidr),
      blocked: list(cidr),
      denyall: fc.boolean(),
      allowList: list(cidr),
    },
    { requiredKeys: [] },
  )
  .map((p) => p as unknown as IsolationPolicy);

// Mostly-valid policies, so that many reach nft: networks with no host bits set.
const network = fc.oneof(
  fc
    .tuple(fc.integer({ min: 0, max: 2 ** 32 - 1 }), fc.integer({ min: 0, max: 32 }))
    .map(([n, p]) => {
      const masked = p === 0 ? 0 : (n >>> (32 - p)) << (32 - p);
      return `${[24, 16, 8, 0].map((s) => (masked >>> s) & 255).join('.')}/${p}`;
    }),
  fc.constantFrom('fc00::/7', 'fe80::/10', '2001:db8::/32', '::/0', 'fd00:ec2::254'),
  v4,
);
const validPolicy = fc
  .tuple(
    fc.oneof(
      fc.record({ iifname: fc.stringMatching(/^[A-Za-z0-9_@+-]{1,15}$/) }),
      fc.record({ saddr: fc.oneof(v4, fc.constantFrom('fd00::5', '2001:db8::1')) }),
      fc.record({ skuid: fc.integer({ min: 0, max: 4_294_967_294 }) }),
    ),
    fc.record(
      {
        gateway: fc.oneof(v4, fc.array(v4, { maxLength: 3 })),
        allowlist: fc.array(network, { maxLength: 4 }),
        denyAll: fc.boolean(),
        hostAccess: fc.array(
          fc.oneof(
            fc.integer({ min: 1, max: 65535 }),
            fc.record({
              port: fc.integer({ min: 1, max: 65535 }),
              protocol: fc.constantFrom('tcp', 'udp'),
            }),
          ),
          { maxLength: 4 },
        ),
        metadata: fc.array(network, { maxLength: 3 }),
        blocked: fc.array(network, { maxLength: 4 }),
      },
      { requiredKeys: [] },
    ),
  )
  .map(([identity, rules]) => {
    const p: Record<string, unknown> = { ...identity, ...rules };
    if ('skuid' in identity) delete p.hostAccess;
    return p as unknown as IsolationPolicy;
  });
const policy = fc.oneof({ weight: 3, arbitrary: validPolicy }, hostilePolicy);

const agentId = fc.oneof(
  fc.stringMatching(/^[A-Za-z0-9][A-Za-z0-9_.-]{0,70}$/),
  fc.constantFrom('ci-42', 'a', 'x.y_z-1'),
  hostile,
);

// Raw plans: the library's table skeleton plus random commands, some valid, some not.
const chain = fc.oneof(
  fc.constantFrom('forward', 'input', 'output', 'agent-p-fwd', 'agent-p-in', 'agent-p-out'),
  hostile,
);
const expr = fc.oneof(
  fc.record({ type: fc.constantFrom('iifname', 'oifname'), name: ifname }),
  fc.record({
    type: fc.constantFrom('saddr', 'daddr'),
    family: fc.constantFrom('ip', 'ip6', 'ether'),
    addrs: fc.array(cidr, { minLength: 0, maxLength: 3 }),
  }),
  fc.record({ type: fc.constant('skuid'), uid: fc.integer({ min: -1, max: 2 ** 32 }) }),
  fc.record({
    type: fc.constant('ctState'),
    states: fc.subarray(['established', 'related', 'invalid']),
  }),
  fc.record({
    type: fc.constant('dport'),
    protocol: fc.constantFrom('tcp', 'udp', 'sctp'),
    ports: fc.array(port, { maxLength: 3 }),
  }),
  fc.record({
    type: fc.constant('icmpv6Type'),
    types: fc.subarray(['nd-neighbor-solicit', 'nd-router-solicit', 'echo-request']),
  }),
  fc.record({
    type: fc.constant('vmap'),
    key: fc.constantFrom('iifname', 'ip saddr', 'ip6 saddr', 'meta skuid'),
    map: fc.constantFrom(...DISPATCH_MAPS.map((m) => m.map), 'evil'),
  }),
  fc.record({ type: fc.constant('meta'), name: ifname }),
);
const rule = fc.record(
  {
    exprs: fc.array(expr, { maxLength: 3 }),
    verdict: fc.oneof(fc.constantFrom('accept', 'drop'), hostile),
    comment: fc.oneof(fc.stringMatching(/^[A-Za-z0-9=_. -]{0,140}$/), hostile),
    verdit: fc.constant('drop'),
  },
  { requiredKeys: ['exprs'] },
);
const command = fc.oneof(
  {
    weight: 6,
    arbitrary: fc.record({ op: fc.constantFrom('add rule', 'insert rule'), chain, rule }),
  },
  fc.record({
    // `add` (not `create`): a plan that creates a chain twice conflicts with table
    // state, which only nft can judge; it is not malformed input.
    op: fc.constant('add chain'),
    chain: fc.constantFrom('agent-q-fwd', 'agent-q-in'),
  }),
  fc.record({
    op: fc.constant('add element'),
    map: fc.constantFrom(...DISPATCH_MAPS.map((m) => m.map)),
    key: fc.oneof(
      fc.record({ kind: fc.constant('ifname'), value: ifname }),
      fc.record({ kind: fc.constant('addr'), value: fc.oneof(v4, v6, cidr) }),
      fc.record({ kind: fc.constant('uid'), value: fc.integer({ min: -1, max: 2 ** 32 }) }),
    ),
    target: fc.constantFrom('agent-p-fwd', 'agent-p-in', 'agent-p-out', 'forward'),
  }),
  fc.record({ op: fc.oneof(fc.constantFrom('flush ruleset', 'add table x'), hostile) }),
  fc.record({
    op: fc.constant('add chain'),
    chain: fc.constantFrom('input', 'forward'),
    hook: fc.oneof(fc.constantFrom('input', 'forward', 'output', 'prerouting'), hostile),
  }),
);
const prefix = (family: string) => [
  // An `ip` table's skeleton has no IPv6 map; any other family gets the inet one (and is
  // refused, or refused for its IPv6 parts).
  ...skeletonCommands(family === 'ip' ? 'ip' : 'inet'),
  { op: 'add chain', chain: 'agent-p-fwd' },
  { op: 'add chain', chain: 'agent-p-in' },
  { op: 'add chain', chain: 'agent-p-out' },
];
const rawPlan = fc
  .record({
    family: fc.oneof(
      { weight: 6, arbitrary: fc.constant('inet') },
      { weight: 4, arbitrary: fc.constant('ip') },
      fc.constantFrom('ip6', 'inet6', 'bridge'),
    ),
    table: fc.oneof(
      { weight: 8, arbitrary: fc.constant('kici') },
      fc.constantFrom('t_2', '1x', 'k ici'),
    ),
    // At most one element per map and key: two targets for one key conflict in nft's
    // state (`File exists`), which is not an input-validation question.
    commands: fc.uniqueArray(command, {
      maxLength: 4,
      selector: (c) => {
        const e = c as { op: string; map?: string; key?: { value?: unknown } };
        return e.op === 'add element' ? `${e.map}:${String(e.key?.value)}` : JSON.stringify(c);
      },
    }),
  })
  .map((p) => ({ ...p, commands: [...prefix(p.family), ...p.commands] }) as unknown as NftPlan);

describe.runIf(ok)('random input is refused with a typed error or accepted by nft -c', () => {
  const spaces = new Namespaces('sp-nftprop');
  let ns = '';
  const check = (script: string) => inNs(ns, 'nft', ['-c', '-f', '-'], script);

  beforeAll(() => {
    ns = spaces.add('prop');
  });
  afterAll(() => spaces.cleanup());

  it('isolation policies (both layouts, with the table skeleton)', () => {
    let accepted = 0;
    fc.assert(
      fc.property(
        agentId,
        policy,
        fc.constantFrom('vmap', 'rules'),
        fc.constantFrom('inet', 'ip'),
        (id, p, layout, family) => {
          let script: string;
          try {
            script = renderIsolationPlan(id, p, {
              includeTable: true,
              layout: layout as 'vmap',
              family: family as 'inet',
            });
          } catch (error) {
            expect(refusedTyped(error), String(error)).toBe(true);
            return;
          }
          accepted++;
          expect(() => check(script), script).not.toThrow();
        },
      ),
      { numRuns: 250 },
    );
    // The property says something only if some inputs get through.
    expect(accepted).toBeGreaterThan(10);
  });

  it('raw plans handed straight to renderPlan', () => {
    let accepted = 0;
    let acceptedIp = 0;
    fc.assert(
      fc.property(rawPlan, (plan) => {
        let script: string;
        try {
          script = renderPlan(plan);
        } catch (error) {
          expect(refusedTyped(error), String(error)).toBe(true);
          return;
        }
        accepted++;
        if (plan.family === 'ip') acceptedIp++;
        expect(() => check(script), script).not.toThrow();
      }),
      { numRuns: 250 },
    );
    expect(accepted).toBeGreaterThan(10);
    expect(acceptedIp).toBeGreaterThan(3);
  });
});
