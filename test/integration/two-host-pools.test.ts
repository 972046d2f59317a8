/**
 * Two hosts, each a ScalerManager process (test/fixtures/two-host-pools-host.ts)
 * with its own file pool `local` (MachineLedger, 3 CPUs / 6 GiB) and one shared
 * `gpu` pool (NatsPoolLedger on a real `nats-server -js`, 4 GPUs, device ids
 * 0..3); GPU agents hold a row in both pools, CPU agents in `local` only; the
 * agents are real (detached) processes. GPU and CPU jobs run interleaved; host
 * a is SIGKILLed mid-run and started again, and its recovery takes its rows
 * back. An independent reader checks every pool at every read (both files,
 * polled; every revision of the NATS key, watched): each pool within its cap,
 * no device id in two rows, every row holding as many ids as GPUs, an agent's
 * ids never changing. After shutdown no pool holds a row and no agent runs.
 */
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type KV, Kvm } from '@nats-io/kv';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { parseDocument } from '../../src/ledger/document/codec.js';
import type { LedgerDocument } from '../../src/ledger/types.js';
import { type NatsServer, startNatsServer } from '../helpers/nats-server.js';
import {
  type FixtureEvent,
  type FixtureProcess,
  finishFixture,
  startFixture,
  stopFixture,
} from '../helpers/processes.js';
import { hasSystem } from '../helpers/system.js';

const GPU = 'nvidia.com/gpu';
const GPU_IDS = ['0', '1', '2', '3'];
const GiB = 2 ** 30;
const LOCAL = { maxCpu: 3, maxMemBytes: 6 * GiB };
const LEASE_MS = 10_000;
const ok = hasSystem(['nats-server'], 'two hosts, file and NATS pools');

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
async function until(check: () => boolean, timeoutMs: number, what: string): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  while (!check()) {
    if (performance.now() > deadline) throw new Error(`timed out: ${what}`);
    await sleep(20);
  }
}

/** What the reader saw of one pool. */
interface PoolWatch {
  reads: number;
  violations: string[];
  maxRows: number;
  /** Each agent's device ids, as the first row that held it said. */
  devicesOf: Map<string, string>;
  agents: Set<string>;
  last: LedgerDocument | undefined;
}

const newWatch = (): PoolWatch => ({
  reads: 0,
  violations: [],
  maxRows: 0,
  devicesOf: new Map(),
  agents: new Set(),
  last: undefined,
});

/**
 * Check one version of a pool: every row counts (stale ones too: nothing may
 * over-commit even briefly). `gpu` pool: GPUs within 4, each row holding as
 * many distinct known ids as GPUs, no id in two rows, an agent's ids as they
 * were. `local` pools: CPU and memory within the cap, no GPUs.
 */
function checkVersion(watch: PoolWatch, kind: 'gpu' | 'local', where: string, doc: LedgerDocument) {
  watch.reads++;
  watch.last = doc;
  watch.maxRows = Math.max(watch.maxRows, doc.reservations.length);
  const bad = (what: string) => {
    if (watch.violations.length < 20) watch.violations.push(`${where}: ${what}`);
  };
  const agents = new Set<string>();
  for (const row of doc.reservations) {
    if (agents.has(row.agentId)) bad(`two rows for ${row.agentId}`);
    agents.add(row.agentId);
    watch.agents.add(row.agentId);
  }
  if (kind === 'local') {
    const cpus = doc.reservations.reduce((s, r) => s + r.cpus, 0);
    const mem = doc.reservations.reduce((s, r) => s + r.memBytes, 0);
    if (cpus > LOCAL.maxCpu + 1e-9) bad(`${cpus} cpus over ${LOCAL.maxCpu}`);
    if (mem > LOCAL.maxMemBytes) bad(`${mem} bytes over ${LOCAL.maxMemBytes}`);
    for (const row of doc.reservations) {
      if (row.extended !== undefined || row.devices !== undefined) {
        bad(`${row.agentId} holds GPUs in a local pool`);
      }
    }
    return;
  }
  const held = new Map<string, string>();
  let gpus = 0;
  for (const row of doc.reservations) {
    const count = row.extended?.[GPU] ?? 0;
    const ids = row.devices?.[GPU] ?? [];
    gpus += count;
    if (row.cpus !== 0 || row.memBytes !== 0) bad(`${row.agentId} holds CPU or memory in gpu`);
    if (count < 1) bad(`${row.agentId} holds no GPU in the gpu pool`);
    if (ids.length !== count) bad(`${row.agentId} holds ${count} GPUs but ids ${ids.join(',')}`);
    for (const id of ids) {
      if (!GPU_IDS.includes(id)) bad(`${row.agentId} holds unknown device ${id}`);
      const other = held.get(id);
      if (other !== undefined) bad(`device ${id} in two rows: ${other} and ${row.agentId}`);
      held.set(id, row.agentId);
    }
    const key = JSON.stringify(row.devices ?? {});
    const before = watch.devicesOf.get(row.agentId);
    if (before === undefined) watch.devicesOf.set(row.agentId, key);
    else if (before !== key) bad(`${row.agentId} devices changed from ${before} to ${key}`);
  }
  if (gpus > GPU_IDS.length) bad(`${gpus} GPUs over ${GPU_IDS.length}`);
}

/** Read a pool file again and again (it is only ever replaced whole) until stopped. */
function pollFile(file: string, pool: string, watch: PoolWatch) {
  let stopped = false;
  const done = (async () => {
    while (!stopped) {
      let text: string | undefined;
      try {
        text = readFileSync(file, 'utf8');
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
      }
      if (text !== undefined) {
        try {
          checkVersion(
            watch,
            'local',
            `${file} read ${watch.reads}`,
            parseDocument(text, { pool, location: file }),
          );
        } catch (error) {
          watch.violations.push(`${file}: ${(error as Error).message}`);
        }
      }
      await sleep(2);
    }
  })();
  return {
    async stop() {
      stopped = true;
      await done;
    },
  };
}

/** Watch every revision of `pool.gpu` from its first (the bucket keeps 64 per key). */
async function watchKey(kv: KV, watch: PoolWatch) {
  const revisions = new Set<number>();
  const watcher = await kv.watch({ key: 'pool.gpu' });
  const done = (async () => {
    for await (const entry of watcher) {
      if (entry.operation !== 'PUT' || revisions.has(entry.revision)) continue;
      revisions.add(entry.revision);
      try {
        const doc = parseDocument(entry.string(), {
          pool: 'gpu',
          location: `rev ${entry.revision}`,
        });
        checkVersion(watch, 'gpu', `revision ${entry.revision}`, doc);
      } catch (error) {
        watch.violations.push(`revision ${entry.revision}: ${(error as Error).message}`);
      }
    }
  })();
  return {
    revisions,
    async stop() {
      watcher.stop();
      await done;
    },
  };
}

/** Agents a host's backend started and has not destroyed, from its events. */
function liveAgents(host: FixtureProcess): Map<string, FixtureEvent> {
  const live = new Map<string, FixtureEvent>();
  for (const e of host.events) {
    if (e.event === 'spawned') live.set(e.agentId as string, e);
    if (e.event === 'destroyed') live.delete(e.agentId as string);
  }
  return live;
}

describe.runIf(ok)('two hosts: a file pool each and one shared NATS GPU pool', () => {
  let server: NatsServer;
  let nc: NatsConnection;
  let kv: KV;
  let root: string;
  const running: FixtureProcess[] = [];
  const readers: Array<{ stop(): Promise<void> }> = [];

  beforeAll(async () => {
    server = await startNatsServer();
    nc = await connect({ servers: server.url });
    // History lets the watcher see every revision even when it falls behind.
    kv = await new Kvm(nc).create('scaler-pools', { history: 64 });
    root = mkdtempSync(join(tmpdir(), 'sp-two-host-'));
  });
  afterEach(async () => {
    await Promise.all(running.splice(0).map((p) => stopFixture(p)));
    await Promise.all(readers.splice(0).map((r) => r.stop()));
    // Kill any agent process a failed run left behind.
    for (const host of ['a', 'b', 'c']) {
      const agents = join(root, host, 'agents');
      for (const name of safeList(agents)) {
        try {
          process.kill(agentFile(agents, name).pid, 'SIGKILL');
        } catch {
          // Gone.
        }
      }
    }
  });
  afterAll(async () => {
    await nc?.close();
    await server?.stop();
    if (root) rmSync(root, { recursive: true, force: true });
  });

  const dirsOf = (name: string) => ({
    ledgerDir: join(root, name, 'ledger'),
    stateDir: join(root, name, 'state'),
    agentsDir: join(root, name, 'agents'),
  });
  function host(name: string, extra: Record<string, unknown> = {}): FixtureProcess {
    const config = { name, ...dirsOf(name), natsUrl: server.url, feeders: 4, leaseMs: LEASE_MS };
    const fixture = startFixture('two-host-pools-host.ts', [
      JSON.stringify({ ...config, ...extra }),
    ]);
    running.push(fixture);
    return fixture;
  }

  it('GPU and CPU jobs interleaved, one host SIGKILLed and restarted: every pool within its cap at every read, no device in two rows, nothing left', async () => {
    for (const name of ['a', 'b']) mkdirSync(dirsOf(name).agentsDir, { recursive: true });
    const gpuWatch = newWatch();
    const localWatch = { a: newWatch(), b: newWatch() };
    const key = await watchKey(kv, gpuWatch);
    const files = (['a', 'b'] as const).map((name) =>
      pollFile(join(dirsOf(name).ledgerDir, 'local.json'), 'local', localWatch[name]),
    );
    readers.push(key, ...files);

    const a1 = host('a');
    const b = host('b');
    const [readyA1, readyB] = await Promise.all([a1.waitFor('ready'), b.waitFor('ready')]);
    expect(readyA1.recovered).toEqual([]);
    expect(readyB.recovered).toEqual([]);

    // Kill host a once it has run a few agents and holds a GPU agent and a CPU agent.
    await until(
      () => {
        const live = [...liveAgents(a1).values()];
        return (
          a1.events.filter((e) => e.event === 'spawned').length >= 6 &&
          live.some((e) => e.scaler === 'gpu') &&
          live.some((e) => e.scaler === 'cpu')
        );
      },
      30_000,
      'host a running a GPU and a CPU agent',
    );
    await sleep(Math.floor(Math.random() * 150));
    a1.child.kill('SIGKILL');
    expect((await a1.exited).signal).toBe('SIGKILL');
    // The agent processes outlive their host.
    const orphans = new Map(
      safeList(dirsOf('a').agentsDir)
        .map((name) => [name.slice(0, -5), agentFile(dirsOf('a').agentsDir, name)] as const)
        .filter(([, agent]) => alive(agent.pid)),
    );
    expect(orphans.size).toBeGreaterThan(0);

    const a2 = host('a');
    const readyA2 = await a2.waitFor('ready');
    const recovered = readyA2.recovered as Array<{
      agentId: string;
      pools?: string[];
      devices?: Record<string, string[]>;
    }>;
    // Every agent that still ran came back (or, never recorded, was destroyed),
    // with the pools and the very device ids its spawn request gave it.
    const unrecorded = (readyA2.unrecorded as Array<{ agentId: string }>).map((u) => u.agentId);
    expect([...recovered.map((r) => r.agentId), ...unrecorded].sort()).toEqual(
      [...orphans.keys()].sort(),
    );
    expect(recovered.length).toBeGreaterThan(0);
    for (const agent of recovered) {
      const spawned = orphans.get(agent.agentId)!;
      const isGpu = agent.agentId.includes('-gpu-');
      expect(agent.pools).toEqual(isGpu ? ['gpu', 'local'] : ['local']);
      expect(agent.devices ?? {}).toEqual(spawned.devices);
      if (isGpu) expect(spawned.devices[GPU]?.length).toBeGreaterThan(0);
    }
    // Taken over in place (the restart was well inside the lease), in every pool.
    for (const row of readyA2.poolRows as Array<{ agentId: string; pool: string; how: string }>) {
      expect(row, JSON.stringify(row)).toMatchObject({ how: 'adopted' });
    }
    const rows = readyA2.rows as {
      local: Array<{ agentId: string; pid: number }>;
      gpu: Array<{ agentId: string; devices?: Record<string, string[]> }>;
    };
    // Nothing else: a row the dead process left for an agent no record names (killed
    // between the grants, or between destroying an agent and releasing its rows) is
    // released by recovery, not left until the dead process's lease runs out.
    expect(rows.local.map((r) => r.agentId).sort()).toEqual(recovered.map((r) => r.agentId).sort());
    expect(rows.local.every((r) => r.pid === a2.child.pid)).toBe(true);
    expect(rows.gpu.map((r) => r.agentId).sort()).toEqual(
      recovered
        .filter((r) => r.agentId.includes('-gpu-'))
        .map((r) => r.agentId)
        .sort(),
    );
    for (const row of rows.gpu) {
      expect(row.devices).toEqual(orphans.get(row.agentId)!.devices);
    }

    // Both hosts go on for a while, then shut down.
    await sleep(6000);
    a2.child.kill('SIGTERM');
    b.child.kill('SIGTERM');
    const [doneA, doneB] = await Promise.all([finishFixture(a2), finishFixture(b)]);
    for (const done of [doneA, doneB]) {
      expect(done.rows).toEqual({ local: [], gpu: [] });
      expect(done.listed).toEqual([]);
    }
    await sleep(300);
    await key.stop();
    await Promise.all(files.map((f) => f.stop()));

    // Nothing left in any pool, nothing running.
    const last = await kv.get('pool.gpu');
    expect(parseDocument(last!.string(), { pool: 'gpu', location: 'last' }).reservations).toEqual(
      [],
    );
    for (const name of ['a', 'b'] as const) {
      const file = join(dirsOf(name).ledgerDir, 'local.json');
      expect(
        parseDocument(readFileSync(file, 'utf8'), { pool: 'local', location: file }).reservations,
      ).toEqual([]);
      expect(
        safeList(dirsOf(name).agentsDir).filter((f) =>
          alive(agentFile(dirsOf(name).agentsDir, f).pid),
        ),
      ).toEqual([]);
    }

    // What the reader saw: no violation anywhere, and it saw real traffic.
    expect(gpuWatch.violations).toEqual([]);
    expect(localWatch.a.violations).toEqual([]);
    expect(localWatch.b.violations).toEqual([]);
    expect(key.revisions.size).toBeGreaterThan(20);
    expect(localWatch.a.reads).toBeGreaterThan(100);
    expect(localWatch.b.reads).toBeGreaterThan(100);
    expect(gpuWatch.maxRows).toBeGreaterThan(1);
    // Every GPU agent a backend started had its row in the NATS pool, with the
    // ids the backend was given; both hosts ran both kinds of job.
    const hosts = [a1, a2, b];
    for (const fixture of hosts) {
      for (const e of fixture.events.filter((x) => x.event === 'spawned')) {
        const gpus = (e.extended as Record<string, number>)[GPU] ?? 0;
        const devices = e.devices as Record<string, string[]>;
        if (gpus === 0) {
          expect(devices).toEqual({});
          continue;
        }
        expect(devices[GPU]).toHaveLength(gpus);
        expect(gpuWatch.devicesOf.get(e.agentId as string)).toBe(JSON.stringify(devices));
      }
    }
    for (const done of [doneA, doneB]) {
      const counts = done.counts as Record<string, number>;
      expect(counts['spawned-gpu'] ?? 0).toBeGreaterThan(0);
      expect(counts['spawned-cpu'] ?? 0).toBeGreaterThan(0);
    }
    const unexpected = hosts.flatMap((h) => h.events.filter((e) => e.event === 'unexpected'));
    expect(unexpected).toEqual([]);
  }, 90_000);
  it('a host SIGKILLed between its two grants (gpu row written, local not yet) leaves no row once its restart has recovered', async () => {
    mkdirSync(dirsOf('c').agentsDir, { recursive: true });
    const first = host('c', { feeders: 0, hangSecondGrant: true });
    const between = await first.waitFor('between-grants');
    const agentId = between.agentId as string;
    // The gpu pool (first in name order) granted; the local reserve never answers.
    expect((between.gpu as Array<{ agentId: string }>).map((r) => r.agentId)).toContain(agentId);
    first.child.kill('SIGKILL');
    await first.exited;

    const again = host('c', { feeders: 0 });
    const ready = await again.waitFor('ready');
    expect(ready.recovered).toEqual([]);
    expect(ready.rows).toEqual({ local: [], gpu: [] });
    const doc = parseDocument((await kv.get('pool.gpu'))!.string(), {
      pool: 'gpu',
      location: 'after recovery',
    });
    expect(doc.reservations.filter((r) => r.agentId === agentId)).toEqual([]);
    again.child.kill('SIGTERM');
    const done = await finishFixture(again);
    expect(done.rows).toEqual({ local: [], gpu: [] });
  });
});

function safeList(dir: string): string[] {
  try {
    return readdirSync(dir).filter((name) => name.endsWith('.json'));
  } catch {
    return [];
  }
}

function agentFile(dir: string, name: string): { pid: number; devices: Record<string, string[]> } {
  return JSON.parse(readFileSync(join(dir, name), 'utf8')) as {
    pid: number;
    devices: Record<string, string[]>;
  };
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}
