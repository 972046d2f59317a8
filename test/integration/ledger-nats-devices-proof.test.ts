/**
 * The device id proof on NATS: 8 worker processes (each standing for a host)
 * contend on one NatsPoolLedger pool with 4 GPU ids, some combining and some
 * writing for themselves; workers are SIGKILLed at random points and started
 * again (the new process adopts what the killed one left, with its ids). An
 * independent reader, watching the pool key from before the first worker
 * starts, checks every version of the pool: never one id in two rows (every
 * row counts, stale ones too), never more or fewer ids in a row than its
 * count, only declared ids, a row's ids never changing while it lives; and
 * each worker's grant answer names the ids its row holds. At the end, once the
 * killed workers' rows are reaped, the 4 ids are all free again.
 *
 * The bucket keeps every revision of the key (the test sets the stream's
 * `max_msgs_per_subject` to unlimited; the ledger's own default is 1), so the
 * end of the test lists them all from the stream and compares them with what
 * the reader saw.
 */
import { jetstreamManager } from '@nats-io/jetstream';
import { type KvEntry, Kvm, KvWatchInclude } from '@nats-io/kv';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { parseDocument } from '../../src/ledger/document/codec.js';
import { NatsPoolLedger } from '../../src/ledger/nats/nats-pool-ledger.js';
import type { NatsDeviceWorkerConfig } from '../fixtures/nats-device-worker.js';
import { type NatsServer, startNatsServer } from '../helpers/nats-server.js';
import {
  type FixtureEvent,
  type FixtureProcess,
  finishFixture,
  startFixture,
  stopFixture,
} from '../helpers/processes.js';
import { hasSystem } from '../helpers/system.js';

const ok = hasSystem(['nats-server'], 'NatsPoolLedger device id proof');

const GPU = 'nvidia.com/gpu';
const IDS = ['0', '1', '2', '3'];
const BUCKET = 'scaler-pools';
const POOL = 'gpu-box';
const KEY = `pool.${POOL}`;
const WORKERS = 8;
/** The run: KILLS kills, or fewer once RUN_MS have passed, but at least MIN_KILLS. */
const KILLS = 12;
const MIN_KILLS = 6;
const RUN_MS = 20_000;
// Long enough that a restarted worker usually finds (and adopts) what the killed one left.
const LEASE_MS = 10_000;

/** What the reader found in the versions of the pool key. */
interface DeviceReport {
  revisions: number[];
  violations: string[];
  /** The ids each agent's row held (the first version it appeared in). */
  held: Map<string, string[]>;
  /** The most ids held at once. */
  mostHeld: number;
  /** The instances with a row in the last version read. */
  holders: Set<string>;
}

/** Check one version of the pool document after another into `report`. */
function deviceChecker(report: DeviceReport): (entry: KvEntry) => void {
  const seen = new Set<number>();
  return (entry) => {
    if (entry.operation !== 'PUT' || seen.has(entry.revision)) return;
    seen.add(entry.revision);
    report.revisions.push(entry.revision);
    const at = `revision ${entry.revision}`;
    try {
      const doc = parseDocument(entry.string(), { pool: POOL, location: at });
      const owner = new Map<string, string>();
      let count = 0;
      for (const row of doc.reservations) {
        const ids = row.devices?.[GPU] ?? [];
        const want = row.extended?.[GPU] ?? 0;
        count += want;
        if (ids.length !== want) {
          report.violations.push(`${at}: ${row.agentId} counts ${want} but holds ${ids}`);
        }
        for (const id of ids) {
          if (!IDS.includes(id)) report.violations.push(`${at}: ${row.agentId} holds ${id}`);
          const other = owner.get(id);
          if (other !== undefined) {
            report.violations.push(`${at}: id ${id} held by ${other} and ${row.agentId}`);
          }
          owner.set(id, row.agentId);
        }
        const before = report.held.get(row.agentId);
        if (before === undefined) report.held.set(row.agentId, ids);
        else if (before.join() !== ids.join()) {
          report.violations.push(`${at}: ${row.agentId} held ${before}, now ${ids}`);
        }
      }
      if (count > IDS.length) report.violations.push(`${at}: ${count} ids counted`);
      report.mostHeld = Math.max(report.mostHeld, owner.size);
      report.holders = new Set(doc.reservations.map((row) => row.instanceId));
    } catch (error) {
      report.violations.push(`${at}: ${(error as Error).message}`);
    }
  };
}

describe.runIf(ok)('NatsPoolLedger device ids across processes, with SIGKILLs', () => {
  let server: NatsServer;
  let nc: NatsConnection;
  const running: FixtureProcess[] = [];

  beforeAll(async () => {
    server = await startNatsServer();
    nc = await connect({ servers: server.url });
    await new Kvm(nc).create(BUCKET, { history: 64, allow_direct: false });
    const jsm = await jetstreamManager(nc);
    const stream = `KV_${BUCKET}`;
    const { config } = await jsm.streams.info(stream);
    await jsm.streams.update(stream, { ...config, max_msgs_per_subject: -1 });
  });
  afterEach(async () => {
    await Promise.all(running.splice(0).map((p) => stopFixture(p)));
  });
  afterAll(async () => {
    await nc?.close();
    await server?.stop();
  });

  it('8 hosts, 4 ids, SIGKILLs: no id in two rows, counts kept, grants answered with their ids, no id lost', async () => {
    const kv = await new Kvm(nc).open(BUCKET);
    const report: DeviceReport = {
      revisions: [],
      violations: [],
      held: new Map(),
      mostHeld: 0,
      holders: new Set(),
    };
    const check = deviceChecker(report);
    // The independent reader, from before the first worker starts.
    const watch = await kv.watch({ key: KEY, include: KvWatchInclude.AllHistory });
    const reading = (async () => {
      for await (const entry of watch) check(entry);
    })();

    const cap = { devices: { [GPU]: IDS } };
    const generation = Array.from({ length: WORKERS }, () => 0);
    const all: FixtureProcess[] = [];
    // A worker for slot i that starts working when a message arrives on `goSubject`.
    const spawn = (i: number, goSubject: string) => {
      const config: NatsDeviceWorkerConfig = {
        servers: [server.url],
        pool: POOL,
        cap,
        resource: GPU,
        instanceId: `host-${i}`,
        agentPrefix: `host-${i}-g${generation[i]!++}`,
        leaseMs: LEASE_MS,
        reapEveryMs: 300,
        // Two of the eight write for themselves (as versions that do not combine).
        combine: i % 4 !== 3,
        goSubject,
      };
      const worker = startFixture('nats-device-worker.ts', [JSON.stringify(config)]);
      running.push(worker);
      all.push(worker);
      return worker;
    };
    const go = async (subject: string) => {
      nc.publish(subject);
      await nc.flush();
    };
    const current = Array.from({ length: WORKERS }, (_, i) => spawn(i, 'test.go.first'));
    await Promise.all(current.map((w) => w.waitFor('ready', 60_000)));
    await go('test.go.first');

    // SIGKILL a random worker at a random moment and restart it, until the run is over.
    // Starting a process under tsx takes seconds (more on a loaded machine), so the
    // restarted process of the slot is started before the kill, loaded and waiting;
    // it connects on the kill (continuing the killed process's lease), and first
    // adopts what the killed process left.
    const killed: FixtureProcess[] = [];
    let restarts = 0;
    const standby = () => {
      const i = Math.floor(Math.random() * WORKERS);
      const subject = `test.go.restart.${restarts++}`;
      const worker = spawn(i, subject);
      const ready = worker.waitFor('ready', 60_000);
      // A standby left over at the end is stopped before it is ready.
      ready.catch(() => {});
      return { i, subject, worker, ready };
    };
    const began = performance.now();
    const elapsed = () => performance.now() - began;
    // Two restarts are on their way at any time.
    const queue = [standby(), standby()];
    while (killed.length < MIN_KILLS || (killed.length < KILLS && elapsed() < RUN_MS)) {
      const next = queue.shift()!;
      await Promise.all([
        next.ready,
        new Promise((r) => setTimeout(r, 500 + Math.random() * 1500)),
      ]);
      queue.push(standby());
      // Mostly while the victim holds ids (as the reader last saw), so its restart has rows to adopt.
      const holding = performance.now() + 2000;
      while (!report.holders.has(`host-${next.i}`) && performance.now() < holding) {
        await new Promise((r) => setTimeout(r, 5));
      }
      const victim = current[next.i]!;
      victim.child.kill('SIGKILL');
      await victim.exited;
      killed.push(victim);
      current[next.i] = next.worker;
      await go(next.subject);
    }
    // The standbys left over never work.
    await Promise.all(queue.map((q) => stopFixture(q.worker)));

    // The last generation finishes cleanly (releasing its rows); killed rows wait for the reaper.
    const last = current.slice();
    // A worker still starting has no SIGTERM handler yet: let it get going first.
    await Promise.all(last.map((w) => w.waitFor('ready', 60_000)));
    for (const w of last) w.child.kill('SIGTERM');
    const results = await Promise.all(last.map(finishFixture));

    // After the killed workers' leases ran out, a checker reaps their rows: every id is free.
    const checker = await NatsPoolLedger.connect({
      servers: server.url,
      instanceId: 'checker',
      leaseMs: LEASE_MS,
    });
    try {
      checker.registerPool(POOL, cap);
      const deadline = performance.now() + 20_000;
      while ((await checker.inspect(POOL)).live.length + (await checker.reapStale(POOL)) > 0) {
        if (performance.now() > deadline) throw new Error('the killed rows were not reaped');
        await new Promise((r) => setTimeout(r, 200));
      }
      expect(await checker.reserve(POOL, 'checker-all', 0, 0, { extended: { [GPU]: 4 } })).toEqual({
        ok: true,
        devices: { [GPU]: IDS },
      });
      expect(await checker.release(POOL, 'checker-all')).toBe(true);
    } finally {
      await checker.close();
    }

    // Every version of the key: the reader saw all the stream holds, up to the last.
    const stored: number[] = [];
    for await (const entry of await kv.history({ key: KEY })) {
      if (entry.operation === 'PUT') stored.push(entry.revision);
    }
    const finalRevision = (await kv.get(KEY))!.revision;
    const deadline = performance.now() + 10_000;
    while (report.revisions.at(-1) !== finalRevision && performance.now() < deadline) {
      await new Promise((r) => setTimeout(r, 50));
    }
    watch.stop();
    await reading;
    expect(stored.at(-1)).toBe(finalRevision);
    expect(report.revisions).toEqual(stored);
    expect(report.violations).toEqual([]);

    // Each grant answered the ids its row held; recovery kept the ids of adopted rows.
    const events = (name: string) =>
      all.flatMap((w) => w.events.filter((e) => e.event === name)) as FixtureEvent[];
    const grants = events('grant');
    const wrong = grants.filter(
      (g) => (report.held.get(g.agent as string) ?? []).join() !== (g.ids as string[]).join(),
    );
    expect(wrong).toEqual([]);
    const adopted = events('adopted');
    for (const a of adopted) {
      const answer = a.answer as {
        ok: boolean;
        adopted?: boolean;
        devices?: Record<string, string[]>;
      };
      if (answer.ok && answer.adopted) expect(answer.devices?.[GPU]).toEqual(a.held);
    }
    for (const result of results) expect(result.mismatches).toEqual([]);
    // In every process, killed ones included: a worker whose lease lapsed under load is
    // told so; nothing else fails.
    const errors = events('error').map((e) => e.error as { code?: string; message: string });
    expect(errors.filter((e) => e.code !== 'ERR_LEDGER_LEASE_EXPIRED')).toEqual([]);
    expect(killed.length).toBeGreaterThanOrEqual(MIN_KILLS);
    expect(grants.length).toBeGreaterThan(100);
    expect(results.reduce((s, r) => s + (r.refused as number), 0)).toBeGreaterThan(0);
    expect(report.mostHeld).toBe(IDS.length);
    // 60 to 80 s on a 2-core machine at a load average of 20 (mostly starting processes under tsx).
  }, 180_000);
});
