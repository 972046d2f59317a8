import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import {
  addIsolationRules,
  type IsolationPolicy,
  removeIsolationRules,
} from 'scaler-primitives/nftables';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { NftLayoutName } from '../../src/nftables/layout.js';
import type { IsolationRules } from '../../src/nftables/policy.js';
import { Namespaces, run } from '../helpers/netns.js';
import { hasSystem } from '../helpers/system.js';

// Real packets. Three namespaces joined only to each other by veth pairs:
//
//   agent (a0 10.47.1.2, fd47:1::2) --- (h-a 10.47.1.1, fd47:1::1) host [rules, forwarding]
//   host (h-t 198.51.100.1, 2001:db8:51::1) --- (t0 198.51.100.2, 2001:db8:51::2) target
//
// The target holds one address per kind of destination on its loopback and serves TCP
// port 80 on all of them; the host serves 8080 (allowed by hostAccess) and 2222 (not).

const ok = hasSystem(['nft', 'ip', 'root'], 'nftables packets (system)');
const execFileAsync = promisify(execFile);
const fixture = (name: string) =>
  fileURLToPath(new URL(`../fixtures/nftables/${name}`, import.meta.url));

type Kind =
  | 'private'
  | 'gateway'
  | 'metadata'
  | 'allowlisted'
  | 'public'
  | 'hostAllowedPort'
  | 'hostOtherPort'
  | 'hostOtherAddress';

const TARGETS: Record<4 | 6, Record<Kind, [string, number]>> = {
  4: {
    private: ['10.99.0.2', 80],
    gateway: ['10.99.0.3', 80],
    metadata: ['169.254.169.254', 80],
    allowlisted: ['10.98.0.2', 80],
    public: ['203.0.113.2', 80],
    hostAllowedPort: ['10.47.1.1', 8080],
    hostOtherPort: ['10.47.1.1', 2222],
    hostOtherAddress: ['198.51.100.1', 2222],
  },
  6: {
    private: ['fd99::2', 80],
    gateway: ['fd99::3', 80],
    metadata: ['fd00:ec2::254', 80],
    allowlisted: ['fd98::2', 80],
    public: ['2001:db8:99::2', 80],
    hostAllowedPort: ['fd47:1::1', 8080],
    hostOtherPort: ['fd47:1::1', 2222],
    hostOtherAddress: ['2001:db8:51::1', 2222],
  },
};

const RULES: IsolationRules = {
  gateway: ['10.99.0.3', 'fd99::3'],
  allowlist: ['10.98.0.0/24', 'fd98::/64'],
  hostAccess: [8080],
};

function expected(denyAll: boolean): Record<Kind, boolean> {
  return {
    private: false,
    gateway: true,
    metadata: false,
    allowlisted: true,
    public: !denyAll,
    hostAllowedPort: true,
    hostOtherPort: false,
    hostOtherAddress: false,
  };
}

describe.runIf(ok)('nftables isolation with real packets', () => {
  const spaces = new Namespaces('sp-pkt');
  let agent = '';
  let host = '';
  let target = '';

  /** Connect from the agent namespace to every target at once; which ones succeeded? */
  async function probe(): Promise<Record<4 | 6, Record<Kind, boolean>>> {
    const list = ([4, 6] as const).flatMap((f) =>
      Object.entries(TARGETS[f]).map(([kind, t]) => ({ f, kind: kind as Kind, t })),
    );
    const { stdout } = await execFileAsync('ip', [
      'netns',
      'exec',
      agent,
      process.execPath,
      fixture('tcp-probe.mjs'),
      '1000',
      JSON.stringify(list.map((x) => x.t)),
    ]);
    const results = JSON.parse(stdout) as Record<string, boolean>;
    const out = { 4: {}, 6: {} } as Record<4 | 6, Record<Kind, boolean>>;
    for (const { f, kind, t } of list) out[f][kind] = results[`${t[0]} ${t[1]}`]!;
    return out;
  }

  beforeAll(async () => {
    agent = spaces.add('agent');
    host = spaces.add('host');
    target = spaces.add('target');
    // No duplicate address detection: addresses (link-local ones too) work at once.
    for (const ns of [agent, host, target]) {
      for (const scope of ['all', 'default']) {
        run('ip', ['netns', 'exec', ns, 'sysctl', '-qw', `net.ipv6.conf.${scope}.accept_dad=0`]);
      }
    }
    const ipn = (ns: string, ...args: string[]) => run('ip', ['-n', ns, ...args]);
    ipn(host, 'link', 'add', 'h-a', 'type', 'veth', 'peer', 'name', 'a0', 'netns', agent);
    ipn(host, 'link', 'add', 'h-t', 'type', 'veth', 'peer', 'name', 't0', 'netns', target);
    const addr = (ns: string, dev: string, ...cidrs: string[]) => {
      for (const cidr of cidrs) {
        ipn(ns, 'addr', 'add', cidr, 'dev', dev, ...(cidr.includes(':') ? ['nodad'] : []));
      }
      ipn(ns, 'link', 'set', dev, 'up');
    };
    addr(agent, 'a0', '10.47.1.2/24', 'fd47:1::2/64');
    addr(host, 'h-a', '10.47.1.1/24', 'fd47:1::1/64');
    addr(host, 'h-t', '198.51.100.1/24', '2001:db8:51::1/64');
    addr(target, 't0', '198.51.100.2/24', '2001:db8:51::2/64');
    ipn(agent, 'route', 'add', 'default', 'via', '10.47.1.1');
    ipn(agent, '-6', 'route', 'add', 'default', 'via', 'fd47:1::1');
    ipn(target, 'route', 'add', 'default', 'via', '198.51.100.1');
    ipn(target, '-6', 'route', 'add', 'default', 'via', '2001:db8:51::1');
    for (const [address, port] of Object.values(TARGETS[4])) {
      if (port !== 80) continue;
      ipn(target, 'addr', 'add', `${address}/32`, 'dev', 'lo');
      ipn(host, 'route', 'add', `${address}/32`, 'via', '198.51.100.2');
    }
    for (const [address, port] of Object.values(TARGETS[6])) {
      if (port !== 80) continue;
      ipn(target, 'addr', 'add', `${address}/128`, 'dev', 'lo');
      ipn(host, '-6', 'route', 'add', `${address}/128`, 'via', '2001:db8:51::2');
    }
    run('ip', ['netns', 'exec', host, 'sysctl', '-qw', 'net.ipv4.ip_forward=1']);
    run('ip', ['netns', 'exec', host, 'sysctl', '-qw', 'net.ipv6.conf.all.forwarding=1']);
    await Promise.all([
      spaces.start(target, process.execPath, [fixture('tcp-server.mjs'), '80']),
      spaces.start(host, process.execPath, [fixture('tcp-server.mjs'), '8080', '2222']),
    ]);
  });
  afterAll(() => spaces.cleanup());

  it('without rules every destination answers (the topology works)', async () => {
    const all = Object.fromEntries(Object.keys(TARGETS[4]).map((k) => [k, true]));
    // Neighbour discovery may need a moment on fresh links: allow a few rounds.
    let seen = await probe();
    for (
      let round = 0;
      round < 5 && JSON.stringify(seen) !== JSON.stringify({ 4: all, 6: all });
      round++
    ) {
      seen = await probe();
    }
    expect(seen).toEqual({ 4: all, 6: all });
  });

  const cases: Array<[string, NftLayoutName, Array<[string, IsolationPolicy]>, boolean]> = [
    ['iifname, vmap', 'vmap', [['ci-1', { iifname: 'h-a', ...RULES }]], false],
    ['iifname, rules', 'rules', [['ci-1', { iifname: 'h-a', ...RULES }]], false],
    [
      'saddr v4 + v6, vmap',
      'vmap',
      [
        ['ci-4', { saddr: '10.47.1.2', ...RULES }],
        ['ci-6', { saddr: 'fd47:1::2', ...RULES }],
      ],
      false,
    ],
    [
      'saddr v4 + v6, rules',
      'rules',
      [
        ['ci-4', { saddr: '10.47.1.2', ...RULES }],
        ['ci-6', { saddr: 'fd47:1::2', ...RULES }],
      ],
      false,
    ],
    [
      'iifname, vmap, denyAll, metadata stays blocked inside an allowlisted range',
      'vmap',
      [
        [
          'ci-1',
          {
            iifname: 'h-a',
            ...RULES,
            allowlist: [...RULES.allowlist!, '169.254.0.0/16', 'fd00:ec2::/32'],
            denyAll: true,
          },
        ],
      ],
      true,
    ],
  ];

  it.each(cases)(
    '%s: connects succeed exactly where the policy allows',
    async (_n, layout, agents, denyAll) => {
      const opts = { netns: host, layout };
      try {
        for (const [id, policy] of agents) await addIsolationRules(id, policy, opts);
        const want = expected(denyAll);
        expect(await probe()).toEqual({ 4: want, 6: want });
      } finally {
        for (const [id] of agents) await removeIsolationRules(id, { ...opts, bestEffort: true });
      }
      // Removal really opens the path again.
      expect((await probe())[4].private).toBe(true);
    },
  );

  it.each<[NftLayoutName]>([['vmap'], ['rules']])(
    'family ip, %s: IPv4 filtered as in inet, IPv6 not filtered at all (documented)',
    async (layout) => {
      const opts = { netns: host, layout, family: 'ip' as const, table: 'kici' };
      try {
        await addIsolationRules('ci-1', { iifname: 'h-a', ...RULES, denyAll: true }, opts);
        const open = Object.fromEntries(Object.keys(TARGETS[6]).map((k) => [k, true]));
        expect(await probe()).toEqual({ 4: expected(true), 6: open });
      } finally {
        await removeIsolationRules('ci-1', { ...opts, bestEffort: true });
      }
      expect((await probe())[4].private).toBe(true);
    },
  );
});
