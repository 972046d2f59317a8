/**
 * Isolate, then tear down, N agents with real nft inside a network namespace this
 * benchmark creates and deletes (the host ruleset is never touched):
 * - seed style: one nft process per rule; teardown lists the chain and deletes handle by handle;
 * - this library, `rules` layout (shared chains) and `vmap` layout (a chain per agent).
 * Needs root (or CAP_NET_ADMIN + CAP_SYS_ADMIN) and `ip`; otherwise prints a note.
 */
import { execFileSync } from 'node:child_process';
import { execa } from 'execa';
import {
  addIsolationRules,
  ensureTable,
  type NftRunner,
  parseRuleHandles,
  removeIsolationRules,
} from '../src/nftables/index.js';
import type { NftLayoutName } from '../src/nftables/layout.js';
import { type BenchTable, fmt } from './lib.js';

const SIZES = [50, 200] as const;
type Style = 'seed (rule per process)' | NftLayoutName;

function canRun(): string | undefined {
  if (process.getuid?.() !== 0) return 'not root';
  for (const bin of ['nft', 'ip']) {
    try {
      execFileSync('sh', ['-c', `command -v ${bin}`], { stdio: 'ignore' });
    } catch {
      return `\`${bin}\` not installed`;
    }
  }
  return undefined;
}

/** A runner that counts the processes it starts. */
function countingRunner(): { runner: NftRunner; count: () => number } {
  let calls = 0;
  const runner: NftRunner = async (file, args, { input }) => {
    calls++;
    const r = await execa(file, args, { reject: false, ...(input === undefined ? {} : { input }) });
    return { stdout: String(r.stdout), stderr: String(r.stderr), exitCode: r.exitCode ?? 1 };
  };
  return { runner, count: () => calls };
}

// The seed's approach, kept here only for comparison.
async function seedAdd(ns: string, run: NftRunner, i: number): Promise<void> {
  const base = ['netns', 'exec', ns, 'nft'];
  const iif = ['iifname', `veth${i}`];
  const rules = [
    ['insert', 'rule', 'inet', 'kici', 'forward', ...iif, 'ip', 'daddr', '10.0.0.1', 'accept'],
    ...['10.0.0.0/8', '172.16.0.0/12', '192.168.0.0/16', '169.254.0.0/16'].map((cidr) => [
      'add',
      'rule',
      'inet',
      'kici',
      'forward',
      ...iif,
      'ip',
      'daddr',
      cidr,
      'drop',
    ]),
  ];
  for (const rule of rules) {
    const r = await run('ip', [...base, ...rule], {});
    if (r.exitCode !== 0) throw new Error(r.stderr);
  }
}

async function seedRemove(ns: string, run: NftRunner, i: number): Promise<void> {
  const base = ['netns', 'exec', ns, 'nft'];
  const list = await run('ip', [...base, '-a', 'list', 'chain', 'inet', 'kici', 'forward'], {});
  for (const handle of parseRuleHandles(list.stdout, `veth${i}`)) {
    await run(
      'ip',
      [...base, 'delete', 'rule', 'inet', 'kici', 'forward', 'handle', String(handle)],
      {},
    );
  }
}

interface Measure {
  setupMs: number;
  teardownMs: number;
  setupCalls: number;
  teardownCalls: number;
}

async function measure(style: Style, n: number): Promise<Measure> {
  const ns = `sp-bench-${process.pid}-${style === 'vmap' || style === 'rules' ? style : 'seed'}-${n}`;
  execFileSync('ip', ['netns', 'add', ns]);
  try {
    const { runner, count } = countingRunner();
    const layout: NftLayoutName = style === 'vmap' ? 'vmap' : 'rules';
    // The seed-style rows write to `inet kici` directly, so every style uses that table.
    const opts = { netns: ns, runner, layout, table: 'kici' };
    await ensureTable(opts);
    const policy = (i: number) => ({ iifname: `veth${i}`, gateway: '10.0.0.1' });
    let calls = count();
    let start = performance.now();
    for (let i = 0; i < n; i++) {
      if (style === 'vmap' || style === 'rules')
        await addIsolationRules(`agent-${i}`, policy(i), opts);
      else await seedAdd(ns, runner, i);
    }
    const setupMs = performance.now() - start;
    const setupCalls = count() - calls;
    calls = count();
    start = performance.now();
    for (let i = 0; i < n; i++) {
      if (style === 'vmap' || style === 'rules')
        await removeIsolationRules(`agent-${i}`, { ...opts, policy: policy(i) });
      else await seedRemove(ns, runner, i);
    }
    const teardownMs = performance.now() - start;
    return { setupMs, teardownMs, setupCalls, teardownCalls: count() - calls };
  } finally {
    execFileSync('ip', ['netns', 'del', ns]);
  }
}

export default async function bench(): Promise<BenchTable[]> {
  const title = 'nftables: isolate then tear down agents (nft in a throwaway netns)';
  const missing = canRun();
  if (missing) {
    return [
      {
        title,
        rows: [{ result: 'skipped', reason: missing }],
        notes: ['The benchmark needs root with nft and ip installed; nothing was run.'],
      },
    ];
  }
  const rows: BenchTable['rows'] = [];
  const notes: string[] = [];
  for (const style of ['seed (rule per process)', 'rules', 'vmap'] as Style[]) {
    const bySize = new Map<number, Measure>();
    for (const n of SIZES) bySize.set(n, await measure(style, n));
    const small = bySize.get(SIZES[0])!;
    const big = bySize.get(SIZES[1])!;
    const n = SIZES[1];
    const perAgent = (m: Measure, size: number) => m.teardownMs / size;
    rows.push({
      style,
      agents: n,
      'setup agents/s': fmt((n * 1000) / big.setupMs, 1),
      'teardown agents/s': fmt((n * 1000) / big.teardownMs, 1),
      'nft procs/agent setup': fmt(big.setupCalls / n, 2),
      'nft procs/agent teardown': fmt(big.teardownCalls / n, 2),
      [`teardown ms/agent @${SIZES[0]}`]: fmt(perAgent(small, SIZES[0]), 2),
      [`teardown ms/agent @${n}`]: fmt(perAgent(big, n), 2),
      'growth 50->200': `${fmt(perAgent(big, n) / perAgent(small, SIZES[0]), 2)}x`,
    });
  }
  notes.push(
    'Target: 1 nft process per agent for setup and for teardown, teardown cost flat in agents.',
    'vmap: setup is 1 transaction; teardown given the policy is 1 guarded transaction.',
    'rules: setup and teardown read the table (nft -j list table) then apply 1 transaction,',
    'so both grow with the table. Library policies also install the host-input chain (3 rules),',
    'which the seed did not have. Each style runs in its own fresh network namespace.',
  );
  return [{ title, rows, notes }];
}
