/**
 * One round of the NATS partition nemesis, shared by the CI test
 * (test/integration/ledger-nats-partition.test.ts, one round) and the soak
 * (`npm run bench -- nats-partition`, many rounds, half with the CPUs busy).
 *
 * A 3-node nats-server -js cluster, each node in its own network namespace, four
 * NatsPoolLedger workers and an observer in namespaces too, all joined by veth
 * pairs to a bridge in a namespace of its own (every one made here and deleted
 * at the end). Links are cut with nft tables inside the namespaces, never on
 * the host. The round, in order: the bucket stream's leader isolated; a bridge
 * split (one server and one worker apart from the rest, past the worker's
 * lease); a worker SIGSTOPped past its lease; the pool's combiner SIGKILLed.
 * Then every worker stops calling, releases what it holds, and the pool must
 * empty: a row no caller holds is an orphan.
 *
 * What a round measures, from the stream read back in order and from every
 * call's answer: grants under a fenced lease, revisions over the cap, orphan
 * rows, per heal the time to the first grant and the workers that answered no
 * call after it, and calls answered later than their `timeoutMs`.
 */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { NatsWorkerConfig } from '../fixtures/nats-ledger-worker.js';
import { inNs, Namespaces, run } from './netns.js';

/** A fixture process and the JSON lines it printed (processes.ts imports vitest; the soak runs without it). */
interface FixtureProcess {
  child: ChildProcess;
  events: FixtureEvent[];
  stderr: () => string;
  waitFor(event: string, timeoutMs?: number): Promise<FixtureEvent>;
  exited: Promise<void>;
}
type FixtureEvent = { event: string; [key: string]: unknown };

function startFixture(script: string, args: string[], wrap: string[]): FixtureProcess {
  const path = join(import.meta.dirname, '../fixtures', script);
  const child = spawn(
    wrap[0]!,
    [...wrap.slice(1), process.execPath, '--import', 'tsx', path, ...args],
    {
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  const events: FixtureEvent[] = [];
  let err = '';
  let buffer = '';
  child.stdout!.setEncoding('utf8').on('data', (chunk: string) => {
    buffer += chunk;
    for (let nl = buffer.indexOf('\n'); nl >= 0; nl = buffer.indexOf('\n')) {
      const line = buffer.slice(0, nl);
      buffer = buffer.slice(nl + 1);
      try {
        events.push(JSON.parse(line) as FixtureEvent);
      } catch {
        err += `stdout: ${line}\n`;
      }
    }
  });
  child.stderr!.setEncoding('utf8').on('data', (chunk: string) => {
    err = (err + chunk).slice(-20_000);
  });
  let gone = false;
  const exited = new Promise<void>((resolve) =>
    child.on('exit', () =>
      setImmediate(() => {
        gone = true;
        resolve();
      }),
    ),
  );
  return {
    child,
    events,
    stderr: () => err,
    exited,
    async waitFor(event, timeoutMs = 30_000) {
      const until = Date.now() + timeoutMs;
      for (;;) {
        const found = events.find((e) => e.event === event);
        if (found) return found;
        if (gone || Date.now() > until) {
          throw new Error(
            `no ${event} from ${script}${gone ? ' (it exited)' : ''}; stderr: ${err}`,
          );
        }
        await sleep(50);
      }
    },
  };
}

async function stopFixture(fixture: FixtureProcess): Promise<void> {
  if (fixture.child.exitCode === null && fixture.child.signalCode === null) {
    fixture.child.kill('SIGCONT');
    fixture.child.kill('SIGKILL');
  }
  await fixture.exited;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const SUBNET = '10.77.0';
const BUCKET = 'partition-pools';
const POOL = 'gpu';
/** Workers w0..w3; each keeps one anchor agent, so two CPUs are contended (one of them may be held by the killed combiner until its lease ends). */
const WORKERS = 4;
const CAP = { maxCpu: WORKERS + 2 };
export const LEASE_MS = 3000;
export const MARGIN_MS = 1000; // the default for a 3 s lease
export const TIMEOUT_MS = 5000;
const CUT_TABLE = 'sp_partition_cut';
const SPLIT_TABLE = 'sp_partition_split';
/**
 * How long after a heal (or after the stream had a leader again, when that came later) every
 * live worker must have had a call answered by the ledger, a grant or a refusal: two call timeouts.
 */
export const ANSWER_WITHIN_MS = 2 * TIMEOUT_MS;
/** How long a round waits after a heal for the stream to have a leader again (ms). */
export const LEADER_WAIT_MS = 60_000;
/**
 * The longest a working ledger may take, after the stream took a write again
 * following a heal, to grant a call (ms): the partition test's bound.
 */
export const FIRST_GRANT_BOUND_MS = 20_000;
// After a heal, once the stream has a leader again, how long the round waits
// before the next fault: the bound above, plus the first write's usual delay, so
// that the grant it judges falls in the heal's own window, not in the next fault.
const HEAL_WINDOW_MS = FIRST_GRANT_BOUND_MS + 2_000;

/** A heal, or the kill of the combiner: when, and what followed. */
export interface HealFigures {
  what: 'leader isolated' | 'bridge split' | 'worker paused' | 'combiner killed';
  /** Epoch ms of the heal (or the kill). */
  at: number;
  /** ms from the heal to the first grant (any worker); Infinity when none came. */
  firstGrantMs: number;
  /**
   * ms from the moment the stream had a leader again after the heal (the heal
   * itself when the leader did not change) to the first grant after it: the
   * ledger's part of the delay, apart from the servers' election.
   */
  afterLeaderMs: number;
  /**
   * As `afterLeaderMs`, but counted from the first write the stream
   * acknowledged after it had a leader again (the observer writes a key of its
   * own every 250 ms), 0 when a grant came first: the ledger's part of the
   * delay, apart from a server that has a leader but takes no write yet
   * (nats-server 2.9 after a heal). Both are looked for only in the heal's own
   * window, before the next fault began. Infinity when no grant followed in
   * it; NaN when the stream took no write in it.
   */
  afterWritableMs: number;
  /**
   * ms from that first acknowledged write to the end of the heal's window (the
   * next fault, or the end of the round): how long `afterWritableMs` could be
   * watched. NaN when the stream took no write in it.
   */
  watchedMs: number;
  /** The longest time without a grant from the heal through the 10 s after it (ms). */
  longestGapMs: number;
  /** Live workers that had no call granted or refused within `ANSWER_WITHIN_MS` of the heal (or of the stream's leader coming back). */
  silent: string[];
  /** Live workers that had no call granted or refused at all after the heal, to the end of the round. */
  never: string[];
  /** Stream leader changes in the 10 s after the heal. */
  leaderChanges: number;
  /**
   * ms from the heal until the observer, asking every 500 ms, found the stream
   * with a leader (the round waits up to `LEADER_WAIT_MS` for it before the
   * next fault); Infinity when it had none by then.
   */
  leaderFoundMs: number;
  /** Per second from 3 s before the heal: grants/refusals/other answers, and leader changes. */
  timeline: string;
}

/** What one round saw. */
export interface RoundFigures {
  serverVersion: string;
  busy: boolean;
  leader: string;
  heals: HealFigures[];
  /** Descriptions of grants under a fenced lease (must be empty). */
  fencedGrants: string[];
  /** Revisions over the cap, and violations the live watch saw (must be 0). */
  overCap: number;
  /** Rows left in the pool after every worker released what it holds (must be empty). */
  orphans: string[];
  /** Calls answered later than `timeoutMs` plus 1 s (the paused worker's calls excepted). */
  lateCalls: string[];
  /** The slowest answer of any call, in ms (the paused worker's excepted). */
  slowestCallMs: number;
  /** How the cut-off and paused workers' leases ended: 'fenced', 'closed' or 'none'. */
  fences: string[];
  /** Calls answered `LedgerOutcomeUnknownError`. */
  outcomeUnknown: number;
  revisions: number;
  grants: number;
}

type Call = [agent: string, started: number, answered: number, outcome: string, leaseId: string];

interface Node {
  name: string;
  ns: string;
  ip: string;
  port: string;
}

/**
 * Run one round; everything it made is removed before it resolves or rejects.
 * `busy`: two busy-loop processes run beside it for the whole round.
 */
export async function runPartitionRound(
  options: { busy?: boolean; log?: (line: string) => void } = {},
): Promise<RoundFigures> {
  const log = options.log ?? (() => {});
  const spaces = new Namespaces('spnp');
  const children: ChildProcess[] = [];
  const fixtures: FixtureProcess[] = [];
  const dirs: string[] = [];
  const nodes = new Map<string, Node>();
  const hogs: ChildProcess[] = [];
  let bridge = '';

  const attach = (name: string, host: number): Node => {
    const ns = spaces.add(name);
    const ip = `${SUBNET}.${host}`;
    const port = `p${name}`;
    run('ip', [
      ...['-n', ns, 'link', 'add', 'eth0', 'type', 'veth'],
      ...['peer', 'name', port, 'netns', bridge],
    ]);
    run('ip', ['-n', ns, 'addr', 'add', `${ip}/24`, 'dev', 'eth0']);
    run('ip', ['-n', ns, 'link', 'set', 'eth0', 'up']);
    run('ip', ['-n', bridge, 'link', 'set', port, 'master', 'br0']);
    run('ip', ['-n', bridge, 'link', 'set', port, 'up']);
    const node = { name, ns, ip, port };
    nodes.set(name, node);
    return node;
  };
  // Cut every link of a namespace (both directions), inside that namespace only.
  const cut = (node: Node) =>
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
  const heal = (node: Node) => inNs(node.ns, 'nft', ['delete', 'table', 'inet', CUT_TABLE]);
  // Split the bridge: the ports of `apart` reach each other only.
  const split = (apart: Node[]) => {
    const inside = apart.map((n) => `"${n.port}"`).join(', ');
    const outside = [...nodes.values()]
      .filter((n) => !apart.includes(n))
      .map((n) => `"${n.port}"`)
      .join(', ');
    inNs(
      bridge,
      'nft',
      ['-f', '-'],
      `table bridge ${SPLIT_TABLE} {
  chain forward {
    type filter hook forward priority -10; policy accept;
    iifname { ${inside} } oifname { ${outside} } drop;
    iifname { ${outside} } oifname { ${inside} } drop;
  }
}
`,
    );
  };
  const unsplit = () => inNs(bridge, 'nft', ['delete', 'table', 'bridge', SPLIT_TABLE]);

  const startServer = async (i: number, node: Node): Promise<void> => {
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
      const timer = setTimeout(() => reject(new Error(`n${i} not ready: ${err}`)), 20_000);
      child.stderr!.on('data', (chunk: Buffer) => {
        err = (err + chunk.toString()).slice(-4000);
        if (err.includes('Server is ready')) {
          clearTimeout(timer);
          resolve();
        }
      });
      child.once('exit', (code) => reject(new Error(`n${i} exited with ${code}: ${err}`)));
    });
  };

  const inNamespace = (node: Node, script: string, config: object): FixtureProcess => {
    const fixture = startFixture(
      script,
      [JSON.stringify(config)],
      ['ip', 'netns', 'exec', node.ns],
    );
    fixtures.push(fixture);
    return fixture;
  };
  const nth = async (fixture: FixtureProcess, event: string, seen: number, timeoutMs = 20_000) => {
    const until = Date.now() + timeoutMs;
    for (;;) {
      const found = fixture.events.filter((e) => e.event === event)[seen];
      if (found) return found;
      if (Date.now() > until) throw new Error(`no ${event} #${seen}: ${fixture.stderr()}`);
      await sleep(50);
    }
  };

  const servers = [0, 1, 2].map((j) => `nats://${SUBNET}.${10 + j}:4222`);
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
      timeoutMs: TIMEOUT_MS,
      reapEveryMs: 500,
      holdMs: 300,
      anchor: true,
    };
    return inNamespace(nodes.get(`w${i}`)!, 'nats-ledger-worker.ts', config);
  };

  try {
    bridge = spaces.add('br');
    run('ip', ['-n', bridge, 'link', 'add', 'br0', 'type', 'bridge']);
    run('ip', ['-n', bridge, 'link', 'set', 'br0', 'up']);
    const serverNodes = [0, 1, 2].map((i) => attach(`n${i}`, 10 + i));
    for (let i = 0; i < WORKERS; i++) attach(`w${i}`, 20 + i);
    attach('obs', 30);
    if (options.busy) {
      for (let i = 0; i < 2; i++) {
        hogs.push(spawn(process.execPath, ['-e', 'for(;;){}'], { stdio: 'ignore' }));
      }
    }
    await Promise.all(serverNodes.map((node, i) => startServer(i, node)));
    const observer = inNamespace(nodes.get('obs')!, 'nats-partition-observer.ts', {
      servers,
      bucket: BUCKET,
      pool: POOL,
      cap: CAP,
    });
    await observer.waitFor('ready', 60_000);

    // The last worker starts first and becomes the pool's combiner: the others send
    // their calls to it (the path of a grant under a fenced lease), and it is killed last.
    const combinerIndex = WORKERS - 1;
    const combiner = startWorker(combinerIndex);
    await combiner.waitFor('ready', 60_000);
    await sleep(1500);
    const workers: FixtureProcess[] = [];
    for (let i = 0; i < WORKERS; i++) workers.push(i === combinerIndex ? combiner : startWorker(i));
    const ready = await Promise.all(workers.map((w) => w.waitFor('ready', 60_000)));
    const firstLease = ready.map((e) => e.leaseId as string);
    await sleep(3000);

    const heals: Array<{
      what: HealFigures['what'];
      at: number;
      live: number[];
      /** When the heal's window ended: the next fault, or the end of the round. */
      until?: number;
    }> = [];
    const all = workers.map((_, i) => i);

    // 1. The bucket stream's leader, cut off from everyone.
    let leaderAsks = 0;
    const askLeader = async () => {
      process.kill(observer.child.pid!, 'SIGUSR1');
      return (await nth(observer, 'leader', leaderAsks++)).leader as string | null;
    };
    // After a heal, wait until the stream has a leader again before the next fault:
    // nats-server 2.9 can go for tens of seconds without one after a node rejoins, and a
    // fault started meanwhile would measure the servers, not the ledger.
    const leaderFound: number[] = [];
    const waitForLeader = async (at: number) => {
      for (const until = at + LEADER_WAIT_MS; ; ) {
        if ((await askLeader()) !== null) return leaderFound.push(Date.now() - at);
        if (Date.now() > until) return leaderFound.push(Number.POSITIVE_INFINITY);
        await sleep(500);
      }
    };
    // After the last heal: its window, until the stream has a leader again and then
    // HEAL_WINDOW_MS; the next fault (or the end of the round) starts when it ends.
    const watchHeal = async () => {
      const last = heals.at(-1)!;
      await waitForLeader(last.at);
      await sleep(HEAL_WINDOW_MS);
      last.until = Date.now();
    };
    const leader = (await askLeader()) as string;
    if (!/^n[012]$/.test(leader)) throw new Error(`no stream leader: ${String(leader)}`);
    const leaderNode = nodes.get(leader)!;
    cut(leaderNode);
    await sleep(8000);
    heal(leaderNode);
    heals.push({ what: 'leader isolated', at: Date.now(), live: all });
    log(`leader ${leader} isolated and healed`);
    await watchHeal();

    // 2. The bridge split: w0 and a server that is not the stream leader now, apart
    // from the rest past w0's lease plus the margin.
    const now = await askLeader();
    const apartServer = serverNodes.find((n) => n.name !== now)!;
    const w0 = nodes.get('w0')!;
    split([w0, apartServer]);
    const splitAt = Date.now();
    await sleep(LEASE_MS + MARGIN_MS + 3000);
    unsplit();
    heals.push({ what: 'bridge split', at: Date.now(), live: all });
    log(`bridge split (w0, ${apartServer.name}) healed`);
    await watchHeal();

    // 3. A worker stopped (SIGSTOP) past its lease plus the margin.
    const w1 = workers[1]!;
    process.kill(w1.child.pid!, 'SIGSTOP');
    const stoppedAt = Date.now();
    await sleep(LEASE_MS + MARGIN_MS + 3000);
    process.kill(w1.child.pid!, 'SIGCONT');
    const resumedAt = Date.now();
    heals.push({ what: 'worker paused', at: resumedAt, live: all });
    log('w1 paused and resumed');
    await watchHeal();

    // 4. The combiner killed.
    combiner.child.kill('SIGKILL');
    heals.push({
      what: 'combiner killed',
      at: Date.now(),
      live: all.filter((i) => i !== combinerIndex),
    });
    log(`w${combinerIndex} (the combiner) killed`);
    await watchHeal();

    // Every live worker stops calling and releases what it holds: the pool must empty
    // (the killed combiner's rows are reaped once its lease plus the margin has passed).
    const live = workers.filter((_, i) => i !== combinerIndex);
    for (const w of live) w.child.kill('SIGUSR1');
    const quiet = await Promise.all(live.map((w) => w.waitFor('quiet', 60_000)));
    type Row = { agentId: string; leaseId?: string };
    let rows: Row[] | null = null;
    for (let ask = 0, until = Date.now() + LEASE_MS + MARGIN_MS + 8000; ; ask++) {
      process.kill(observer.child.pid!, 'SIGHUP');
      rows = (await nth(observer, 'pool', ask)).rows as Row[] | null;
      if ((rows !== null && rows.length === 0) || Date.now() > until) break;
      await sleep(500);
    }
    const left: Row[] = rows ?? [{ agentId: '(pool unreadable)' }];
    const orphans = left.map((r) => `${r.agentId} (lease ${r.leaseId ?? 'none'})`);
    for (const [i, q] of quiet.entries()) {
      for (const agent of q.kept as string[]) orphans.push(`${agent} kept by w${i}`);
    }

    for (const w of live) w.child.kill('SIGTERM');
    const done = await Promise.all(live.map((w) => w.waitFor('done', 30_000)));
    process.kill(observer.child.pid!, 'SIGUSR2');
    // Reading the whole stream back takes a while on a loaded machine.
    for (const until = Date.now() + 180_000; ; ) {
      const failed = observer.events.find((e) => e.event === 'failed');
      if (failed) throw new Error(`the observer could not read the stream back: ${failed.message}`);
      if (observer.events.some((e) => e.event === 'report') || Date.now() > until) break;
      await sleep(100);
    }
    const report = (await nth(observer, 'report', 0, 0)) as FixtureEvent & {
      violations: string[];
      watched: number;
      leaders: Array<[number, string | null]>;
      accepted: number[];
      pool: Array<{
        seq: number;
        at: number;
        rows: Array<{ agentId: string; leaseId?: string; cpus: number }>;
      }>;
      ended: Array<{ seq: number; at: number; leaseId: string; how: string }>;
    };
    // Calls by worker index (the killed combiner reported none).
    const calls: Call[][] = all.map(() => []);
    live.forEach((w, j) => {
      calls[workers.indexOf(w)] = done[j]!.calls as Call[];
    });

    // Never over the cap: every revision watched live, and every revision read back.
    let overCap = report.violations.filter((v) => !v.includes('came back')).length;
    for (const revision of report.pool) {
      if (revision.rows.reduce((s, r) => s + r.cpus, 0) > CAP.maxCpu) overCap++;
    }

    // No grant under a fenced lease, by the stream's own order: no revision after a
    // lease's end marker adds a row under that lease; and no call answered `ok` that
    // started after its lease was fenced.
    const fencedGrants: string[] = [];
    const endedAt = new Map(report.ended.map((e) => [e.leaseId, e]));
    let previous = new Set<string>();
    for (const revision of report.pool) {
      for (const row of revision.rows) {
        const end = row.leaseId === undefined ? undefined : endedAt.get(row.leaseId);
        if (end && end.seq < revision.seq && !previous.has(row.agentId)) {
          fencedGrants.push(
            `revision ${revision.seq} adds ${row.agentId} under lease ${row.leaseId}, ended (${end.how}) at ${end.seq}`,
          );
        }
      }
      previous = new Set(revision.rows.map((r) => r.agentId));
    }
    for (const workerCalls of calls) {
      for (const [agent, started, , outcome, leaseId] of workerCalls) {
        const end = endedAt.get(leaseId);
        if (outcome === 'ok' && end && end.how === 'fenced' && end.at < started) {
          fencedGrants.push(
            `${agent} granted at ${started} under lease ${leaseId}, fenced at ${end.at}`,
          );
        }
      }
    }

    // Per heal: the first grant, the longest gap, the workers that answered nothing.
    const oks = calls
      .flat()
      .filter((c) => c[3] === 'ok')
      .map((c) => c[2])
      .sort((a, b) => a - b);
    const healFigures: HealFigures[] = heals.map(({ what, at, live: indexes, until }, h) => {
      const leaderFoundMs = leaderFound[h] ?? Number.POSITIVE_INFINITY;
      const after = oks.filter((t) => t > at && t <= at + 10_000);
      // Gaps from the heal through the 10 s after it, up to the next grant past them.
      const next = oks.find((t) => t > at + 10_000);
      const points = [at, ...after, ...(next === undefined ? [Date.now()] : [next])];
      let gap = 0;
      for (let k = 1; k < points.length; k++) gap = Math.max(gap, points[k]! - points[k - 1]!);
      const never = indexes
        .filter((i) => i !== combinerIndex)
        .filter((i) => !calls[i]!.some((c) => c[2] > at && (c[3] === 'ok' || c[3] === 'refused')))
        .map((i) => `w${i}`);
      const changes = report.leaders.filter(([t]) => t > at && t <= at + 10_000).length;
      // The stream has a leader again: the last change to a leader in the 10 s after the
      // heal that came after a time without one (or the heal itself).
      let leaderBack = at;
      for (const [t, who] of report.leaders) {
        if (t > at && t <= at + 10_000 && who !== null) leaderBack = t;
      }
      // Later when the round had to wait longer than that for a leader.
      if (Number.isFinite(leaderFoundMs)) leaderBack = Math.max(leaderBack, at + leaderFoundMs);
      // Looked for in the heal's own window only: a grant after the next fault began
      // would measure that fault too.
      const end = until ?? Number.POSITIVE_INFINITY;
      const afterBack = oks.find((t) => t > leaderBack && t <= end);
      const writable = report.accepted.find((t) => t > leaderBack && t <= end);
      const silent = indexes
        .filter((i) => i !== combinerIndex || what === 'combiner killed')
        .filter(
          (i) =>
            !calls[i]!.some(
              (c) =>
                c[2] > at &&
                c[2] <= leaderBack + ANSWER_WITHIN_MS &&
                (c[3] === 'ok' || c[3] === 'refused'),
            ),
        )
        .map((i) => {
          // What the worker was answered instead, for the log.
          const other = new Map<string, number>();
          for (const c of calls[i]!) {
            if (c[2] <= at || c[2] > leaderBack + ANSWER_WITHIN_MS) continue;
            const code = c[3].replace('ERR_LEDGER_', '');
            other.set(code, (other.get(code) ?? 0) + 1);
          }
          const answered = [...other].map(([code, n]) => `${code} ${n}`).join(', ');
          return `w${i} (${answered || 'nothing'})`;
        });
      const seconds: string[] = [];
      for (let t = at - 3000; t < at + 10_000; t += 1000) {
        const answered = calls.flat().filter((c) => c[2] >= t && c[2] < t + 1000);
        const granted = answered.filter((c) => c[3] === 'ok').length;
        const refused = answered.filter((c) => c[3] === 'refused').length;
        const leaders = report.leaders
          .filter(([when]) => when >= t && when < t + 1000)
          .map(([, who]) => ` L=${who ?? '-'}`)
          .join('');
        seconds.push(
          `${Math.round((t - at) / 1000)}s:${granted}/${refused}/${answered.length - granted - refused}${leaders}`,
        );
      }
      return {
        what,
        at,
        firstGrantMs: after.length > 0 ? after[0]! - at : Number.POSITIVE_INFINITY,
        afterLeaderMs: afterBack === undefined ? Number.POSITIVE_INFINITY : afterBack - leaderBack,
        afterWritableMs:
          writable === undefined
            ? Number.NaN
            : afterBack === undefined
              ? Number.POSITIVE_INFINITY
              : Math.max(0, afterBack - writable),
        watchedMs: writable === undefined ? Number.NaN : end - writable,
        longestGapMs: gap,
        silent,
        never,
        leaderChanges: changes,
        leaderFoundMs,
        timeline: seconds.join(' '),
      };
    });

    // Every call answered within its timeout (the paused worker's calls across the pause excepted).
    const lateCalls: string[] = [];
    let slowestCallMs = 0;
    calls.forEach((workerCalls, i) => {
      for (const [agent, started, answered, outcome] of workerCalls) {
        if (i === 1 && answered >= stoppedAt && started <= resumedAt) continue;
        const took = answered - started;
        slowestCallMs = Math.max(slowestCallMs, took);
        if (took > TIMEOUT_MS + 1000) lateCalls.push(`w${i} ${agent} ${outcome} after ${took} ms`);
      }
    });

    // How the leases of the split and the paused worker ended (a server older than 2.11.0
    // can lose the fence, docs/ledger.md; logged, not asserted).
    const leaseAt = (i: number, t: number) =>
      calls[i]!.filter((c) => c[2] < t).at(-1)?.[4] ?? firstLease[i]!;
    const fences = [leaseAt(0, splitAt), leaseAt(1, stoppedAt)].map(
      (l) => endedAt.get(l)?.how ?? 'none',
    );

    const version = /v(\d+\.\d+\.\d+)/.exec(
      execFileSync('nats-server', ['--version'], { encoding: 'utf8' }),
    )?.[1];
    return {
      serverVersion: version ?? 'unknown',
      busy: options.busy === true,
      leader,
      heals: healFigures,
      fencedGrants,
      overCap,
      orphans,
      lateCalls,
      slowestCallMs,
      fences,
      outcomeUnknown: calls.flat().filter((c) => c[3].endsWith('ERR_LEDGER_OUTCOME_UNKNOWN'))
        .length,
      revisions: report.pool.length,
      grants: oks.length,
    };
  } finally {
    for (const hog of hogs) hog.kill('SIGKILL');
    for (const fixture of fixtures) {
      try {
        fixture.child.kill('SIGCONT');
      } catch {}
    }
    await Promise.all(
      fixtures.map((f) => Promise.race([stopFixture(f).catch(() => {}), sleep(5000)])),
    );
    for (const fixture of fixtures) {
      try {
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
}

/** One line of figures for a round (the test log and the soak table). */
export function describeRound(round: RoundFigures): string {
  const heals = round.heals
    .map(
      (h) =>
        `${h.what}: first grant ${h.firstGrantMs} ms (${h.afterLeaderMs} ms after the stream had a leader, ${h.afterWritableMs} ms after it took a write), longest gap ${h.longestGapMs} ms, ${h.leaderChanges} leader change(s), leader found after ${h.leaderFoundMs} ms${h.silent.length ? `, silent ${h.silent.join(' ')}` : ''}${h.never.length ? `, never again ${h.never.join(' ')}` : ''}`,
    )
    .join('; ');
  return `nats-server ${round.serverVersion}${round.busy ? ', CPUs busy' : ''}, leader ${round.leader}: ${heals}; fenced grants ${round.fencedGrants.length}, over cap ${round.overCap}, orphans ${round.orphans.length}, late calls ${round.lateCalls.length} (slowest ${round.slowestCallMs} ms), outcome unknown ${round.outcomeUnknown}, fences ${round.fences.join('/')}, ${round.grants} grants, ${round.revisions} revisions`;
}
