/**
 * NatsPoolLedger under network partitions: a 3-node nats-server -js cluster,
 * each node in its own network namespace, the ledger workers and an observer
 * in namespaces too, all joined by veth pairs to a bridge in a namespace of
 * their own (every one made by this test and deleted in afterAll). Links are
 * cut with an nft table inside the namespace being cut, never on the host.
 *
 * Cases, one after the other on one run: the bucket stream's leader isolated,
 * a worker cut off past its lease, a worker SIGSTOPped past its lease. Checked
 * from the stream itself (read back in order by the observer) and from every
 * call's answer: no grant under a fenced lease, no revision over the cap, and
 * grants again within 15 s of each heal (45 s after the stream leader's).
 */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { NatsWorkerConfig } from '../fixtures/nats-ledger-worker.js';
import { inNs, Namespaces, run } from '../helpers/netns.js';
import {
  type FixtureEvent,
  type FixtureProcess,
  startFixture,
  stopFixture,
} from '../helpers/processes.js';
import { hasSystem } from '../helpers/system.js';

const ok = hasSystem(['nats-server', 'nft', 'ip', 'root'], 'NatsPoolLedger under partitions');
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const SUBNET = '10.77.0';
const BUCKET = 'partition-pools';
const POOL = 'gpu';
// Each worker keeps one agent for the whole run (so its lease is judged), and they
// contend for the one CPU left.
const CAP = { maxCpu: 4 };
const LEASE_MS = 3000;
const MARGIN_MS = 1000; // the default for a 3 s lease
const CUT_TABLE = 'sp_partition_cut';

interface Node {
  name: string;
  ns: string;
  ip: string;
}

type Call = [agent: string, started: number, answered: number, outcome: string, leaseId: string];

describe.runIf(ok)('NatsPoolLedger under partitions (network namespaces)', () => {
  const spaces = new Namespaces('spnp');
  const children: ChildProcess[] = [];
  const fixtures: FixtureProcess[] = [];
  const dirs: string[] = [];
  let bridge = '';
  const nodes = new Map<string, Node>();

  function attach(name: string, host: number): Node {
    const ns = spaces.add(name);
    const ip = `${SUBNET}.${host}`;
    const port = `p${name}`;
    run('ip', [
      '-n',
      ns,
      'link',
      'add',
      'eth0',
      'type',
      'veth',
      'peer',
      'name',
      port,
      'netns',
      bridge,
    ]);
    run('ip', ['-n', ns, 'addr', 'add', `${ip}/24`, 'dev', 'eth0']);
    run('ip', ['-n', ns, 'link', 'set', 'eth0', 'up']);
    run('ip', ['-n', bridge, 'link', 'set', port, 'master', 'br0']);
    run('ip', ['-n', bridge, 'link', 'set', port, 'up']);
    const node = { name, ns, ip };
    nodes.set(name, node);
    return node;
  }

  // Cut every link of a namespace (both directions), inside that namespace only.
  function cut(node: Node): void {
    inNs(
      node.ns,
      'nft',
      ['-f', '-'],
      `table inet ${CUT_TABLE} {
  chain input { type filter hook input priority -10; policy accept; iifname "eth0" drop; }
  chain output { type filter hook output priority -10; policy accept; oifname "eth0" drop; }
}
`,
    );
  }
  function heal(node: Node): void {
    inNs(node.ns, 'nft', ['delete', 'table', 'inet', CUT_TABLE]);
  }

  async function startServer(i: number, node: Node): Promise<void> {
    const dir = mkdtempSync(join(tmpdir(), 'sp-nats-part-'));
    dirs.push(dir);
    const routes = [0, 1, 2].map((j) => `nats://${SUBNET}.${10 + j}:6222`).join(',');
    const child = spawn(
      'ip',
      [
        ...['netns', 'exec', node.ns, 'nats-server', '-js', '-a', node.ip, '-p', '4222'],
        ...['-sd', dir, '-n', `n${i}`, '--cluster_name', 'partition'],
        ...['--cluster', `nats://${node.ip}:6222`, '--routes', routes],
      ],
      { stdio: ['ignore', 'ignore', 'pipe'] },
    );
    children.push(child);
    await new Promise<void>((resolve, reject) => {
      let err = '';
      const timer = setTimeout(() => reject(new Error(`n${i} not ready: ${err}`)), 15_000);
      child.stderr!.on('data', (chunk: Buffer) => {
        err = (err + chunk.toString()).slice(-4000);
        if (err.includes('Server is ready')) {
          clearTimeout(timer);
          resolve();
        }
      });
      child.once('exit', (code) => reject(new Error(`n${i} exited with ${code}: ${err}`)));
    });
  }

  function inNamespace(node: Node, script: string, config: object): FixtureProcess {
    const fixture = startFixture(script, [JSON.stringify(config)], {
      wrap: ['ip', 'netns', 'exec', node.ns],
    });
    fixtures.push(fixture);
    return fixture;
  }

  // The next event of this name after the first `seen` ones.
  async function nth(fixture: FixtureProcess, event: string, seen: number, timeoutMs = 20_000) {
    const until = Date.now() + timeoutMs;
    for (;;) {
      const found = fixture.events.filter((e) => e.event === event)[seen];
      if (found) return found;
      if (Date.now() > until) throw new Error(`no ${event} #${seen}: ${fixture.stderr()}`);
      await sleep(50);
    }
  }

  const servers = [0, 1, 2].map((j) => `nats://${SUBNET}.${10 + j}:4222`);
  let observer: FixtureProcess;

  beforeAll(async () => {
    try {
      bridge = spaces.add('br');
      run('ip', ['-n', bridge, 'link', 'add', 'br0', 'type', 'bridge']);
      run('ip', ['-n', bridge, 'link', 'set', 'br0', 'up']);
      const serverNodes = [0, 1, 2].map((i) => attach(`n${i}`, 10 + i));
      for (let i = 0; i < 3; i++) attach(`w${i}`, 20 + i);
      attach('obs', 30);
      await Promise.all(serverNodes.map((node, i) => startServer(i, node)));
      observer = inNamespace(nodes.get('obs')!, 'nats-partition-observer.ts', {
        servers,
        bucket: BUCKET,
        pool: POOL,
        cap: CAP,
      });
      await observer.waitFor('ready', 60_000);
    } catch (error) {
      cleanup();
      throw error;
    }
  }, 90_000);

  function cleanup(): void {
    for (const fixture of fixtures) {
      try {
        fixture.child.kill('SIGCONT');
        fixture.child.kill('SIGKILL');
      } catch {}
    }
    for (const child of children) {
      try {
        child.kill('SIGKILL');
      } catch {}
    }
    spaces.cleanup();
    for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
  }

  afterAll(async () => {
    await Promise.all(fixtures.map((f) => stopFixture(f).catch(() => {})));
    cleanup();
    // Every namespace this test made is gone.
    const left = run('ip', ['netns', 'list']);
    expect(left).not.toContain(`spnp-${process.pid}-`);
  }, 30_000);

  it('leader isolated, a worker cut off, a worker stopped: no grant under a fenced lease, never over the cap, grants within 15 s of each heal (45 s after the leader heal)', async () => {
    const startWorker = (i: number) => {
      const config: NatsWorkerConfig = {
        mode: 'timeline',
        // Each worker lists the servers in another order, so they spread over the nodes.
        servers: servers.map((_, j) => servers[(i + j) % 3]!),
        bucket: BUCKET,
        pool: POOL,
        cap: CAP,
        instanceId: `w${i}`,
        cpus: 1,
        memBytes: 0,
        leaseMs: LEASE_MS,
        // The default: a call made while cut off is still retrying when the link comes back.
        timeoutMs: 10_000,
        reapEveryMs: 500,
        holdMs: 300,
        anchor: true,
      };
      return inNamespace(nodes.get(`w${i}`)!, 'nats-ledger-worker.ts', config);
    };
    // w2 starts first and becomes the pool's combiner: the workers cut off and
    // stopped below send their calls to it (the path of a grant under a fenced lease).
    const w2 = startWorker(2);
    await w2.waitFor('ready', 60_000);
    await sleep(1500);
    const workers = [startWorker(0), startWorker(1), w2];
    const ready = await Promise.all(workers.map((w) => w.waitFor('ready', 60_000)));
    const firstLease = ready.map((e) => e.leaseId as string);
    await sleep(4000);

    // 1. The bucket stream's leader, cut off from everyone.
    process.kill(observer.child.pid!, 'SIGUSR1');
    const leader = (await nth(observer, 'leader', 0)).leader as string;
    expect(leader).toMatch(/^n[012]$/);
    const leaderNode = nodes.get(leader)!;
    cut(leaderNode);
    const cutLeader = Date.now();
    await sleep(8000);
    heal(leaderNode);
    const healedLeader = Date.now();
    await sleep(6000);

    // 2. A worker cut off past its lease plus the margin.
    const w0 = nodes.get('w0')!;
    cut(w0);
    const cutW0 = Date.now();
    await sleep(LEASE_MS + MARGIN_MS + 3000);
    heal(w0);
    const healedW0 = Date.now();
    await sleep(6000);

    // 3. A worker stopped (SIGSTOP) past its lease plus the margin.
    const w1 = workers[1]!;
    process.kill(w1.child.pid!, 'SIGSTOP');
    const stoppedW1 = Date.now();
    await sleep(LEASE_MS + MARGIN_MS + 3000);
    process.kill(w1.child.pid!, 'SIGCONT');
    const contW1 = Date.now();
    await sleep(6000);

    for (const w of workers) w.child.kill('SIGTERM');
    const done = await Promise.all(workers.map((w) => w.waitFor('done', 20_000)));
    process.kill(observer.child.pid!, 'SIGUSR2');
    const report = (await nth(observer, 'report', 0, 30_000)) as FixtureEvent & {
      violations: string[];
      watched: number;
      pool: Array<{
        seq: number;
        at: number;
        rows: Array<{ agentId: string; leaseId?: string; cpus: number }>;
      }>;
      ended: Array<{ seq: number; at: number; leaseId: string; how: string }>;
    };
    const calls = done.map((d) => d.calls as Call[]);
    const events = done.map((d) => d.events as Array<[string, number, string]>);
    const summary = {
      leader,
      grants: calls.map((c) => c.filter((x) => x[3] === 'ok').length),
      outcomes: calls.map((c) => countBy(c.map((x) => x[3]))),
      events: events.map((e) => e.map(([type]) => type)),
      revisions: report.pool.length,
      watched: report.watched,
      fences: report.ended.filter((e) => e.how === 'fenced').length,
      liveViolations: report.violations.length,
    };
    console.log(`partition run: ${JSON.stringify(summary)}`);

    // Never over the cap: every revision watched live, and every revision read back.
    expect(report.violations.filter((v) => !v.includes('came back'))).toEqual([]);
    for (const revision of report.pool) {
      expect(
        revision.rows.reduce((s, r) => s + r.cpus, 0),
        `revision ${revision.seq}`,
      ).toBeLessThanOrEqual(CAP.maxCpu);
    }
    expect(report.pool.length).toBeGreaterThan(50);

    // No grant under a fenced lease, by the stream's own order: no revision after
    // a lease's end marker adds a row under that lease...
    const endedAt = new Map(report.ended.map((e) => [e.leaseId, e]));
    let previous = new Set<string>();
    for (const revision of report.pool) {
      for (const row of revision.rows) {
        const end = row.leaseId === undefined ? undefined : endedAt.get(row.leaseId);
        if (end && end.seq < revision.seq && !previous.has(row.agentId)) {
          throw new Error(
            `revision ${revision.seq} adds ${row.agentId} under lease ${row.leaseId}, ended at ${end.seq}`,
          );
        }
      }
      previous = new Set(revision.rows.map((r) => r.agentId));
    }
    // ...and no call answered `ok` that started after its lease was fenced.
    for (const workerCalls of calls) {
      for (const [agent, started, , outcome, leaseId] of workerCalls) {
        const end = endedAt.get(leaseId);
        if (outcome === 'ok' && end && end.at < started) {
          throw new Error(
            `${agent} granted at ${started} under lease ${leaseId}, fenced at ${end.at}`,
          );
        }
      }
    }

    // The worker cut off and the worker stopped were fenced by their peers, knew it, and
    // were told so by a call; then they got grants again under a new lease.
    // The lease a worker held when it was cut off or stopped: the lease of its last answer before.
    const leaseAt = (i: number, t: number) =>
      calls[i]!.filter((c) => c[2] < t).at(-1)?.[4] ?? firstLease[i]!;
    // A server older than 2.11.0 can lose an acknowledged write when the stream leader is
    // isolated (docs/ledger.md): the worker's anchor row, or the fence itself. There the
    // fence is logged, not asserted; the safety checks above hold on every server.
    const [major = 0, minor = 0] = /v(\d+)\.(\d+)/
      .exec(execFileSync('nats-server', ['--version'], { encoding: 'utf8' }))!
      .slice(1)
      .map(Number);
    const fencesAreDurable = major > 2 || (major === 2 && minor >= 11);
    if (!fencesAreDurable) {
      console.log(
        `nats-server ${major}.${minor} < 2.11: fences of w0 and w1: ${[leaseAt(0, cutW0), leaseAt(1, stoppedW1)].map((l) => endedAt.get(l)?.how ?? 'none').join(', ')}`,
      );
    }
    for (const [i, since] of fencesAreDurable
      ? ([
          [0, cutW0],
          [1, stoppedW1],
        ] as const)
      : []) {
      const lease = leaseAt(i, since);
      const fence = endedAt.get(lease);
      expect(fence?.how, `w${i}'s lease ${lease}`).toBe('fenced');
      expect(fence!.at).toBeGreaterThanOrEqual(since + LEASE_MS - 200);
      expect(
        events[i]!.some(([type, , id]) => type === 'lease-lost' && id === lease),
        `w${i} saw lease-lost`,
      ).toBe(true);
      expect(
        calls[i]!.some(
          ([, , answered, outcome]) =>
            answered > since && outcome.endsWith('ERR_LEDGER_LEASE_EXPIRED'),
        ),
        `w${i} was told its lease expired`,
      ).toBe(true);
      expect(leaseAt(i, Number.POSITIVE_INFINITY)).not.toBe(lease);
    }
    expect(
      events[0]!.findIndex(([type]) => type === 'lease-at-risk'),
      'w0 saw its lease at risk while cut off',
    ).toBeGreaterThanOrEqual(0);

    // Grants again within 15 s of each heal (all workers), and for the worker healed itself.
    const okAfter = (list: Call[][], t: number) =>
      Math.min(
        ...list
          .flat()
          .filter((c) => c[3] === 'ok' && c[2] > t)
          .map((c) => c[2]),
      ) - t;
    // Answers per second around the leader isolation: 'ok'/'refused'/errors, for the log.
    const perSecond: string[] = [];
    for (let t = cutLeader - 2000; t < healedLeader + 8000; t += 1000) {
      const inSecond = calls.flat().filter((c) => c[2] >= t && c[2] < t + 1000);
      perSecond.push(
        `${Math.round((t - cutLeader) / 1000)}s:${inSecond.filter((c) => c[3] === 'ok').length}/${inSecond.filter((c) => c[3] === 'refused').length}/${inSecond.length - inSecond.filter((c) => c[3] === 'ok' || c[3] === 'refused').length}`,
      );
    }
    console.log(
      `leader isolation (ok/refused/failed per second from the cut): ${perSecond.join(' ')}`,
    );
    console.log(
      `partition resume (ms after heal): leader ${okAfter(calls, healedLeader)}, w0 cut ${okAfter(calls, healedW0)}, w1 stop ${okAfter(calls, contW1)}; w0 itself ${okAfter([calls[0]!], healedW0)}, w1 itself ${okAfter([calls[1]!], contW1)}`,
    );
    // After the stream leader's isolation, nats-server 2.9.10 takes from under a second to
    // about 23 s to serve writes again (runs of 2026-12-04); the bound still tells a working
    // ledger from one frozen for the duplicate window (115 s).
    expect(okAfter(calls, healedLeader)).toBeLessThan(45_000);
    expect(okAfter(calls, healedW0)).toBeLessThan(15_000);
    expect(okAfter(calls, contW1)).toBeLessThan(15_000);
    expect(okAfter([calls[0]!], healedW0)).toBeLessThan(15_000);
    expect(okAfter([calls[1]!], contW1)).toBeLessThan(15_000);
  }, 150_000);
});

function countBy(values: string[]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const v of values) out[v] = (out[v] ?? 0) + 1;
  return out;
}
