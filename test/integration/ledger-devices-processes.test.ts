/**
 * Device ids across real processes: 8 workers contend on one file pool with 4
 * devices (`nvidia.com/gpu` ids 0-3), each reserving 1 or 2, releasing and
 * reserving again; workers are SIGKILLed at random points and restarted. An
 * independent reader (its own process, plain fs and JSON.parse) reads every
 * version of the pool file it can, in a tight loop and on every rename the
 * directory's inotify watch reports, and checks each one: never one id in two
 * rows, each row holding as many ids as its count, at most 4 held, only
 * declared ids. The reader cannot see every version (one renamed into place
 * can be replaced before it reads), so every grant is checked too: each
 * worker prints when its grants were answered and released, on the
 * system-wide monotonic clock, and no id may be in two of those intervals at
 * once. The two workers killed last are killed while they hold ids and are
 * not restarted: at the end, once their rows are reaped, no id is lost: all
 * four are free.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { MachineLedger } from '../../src/ledger/file/machine-ledger.js';
import {
  type FixtureProcess,
  finishFixture,
  startFixture,
  stopFixture,
} from '../helpers/processes.js';

const GPU = 'nvidia.com/gpu';
const IDS = ['0', '1', '2', '3'];
const cap = { maxCpu: 64, devices: { [GPU]: IDS } };
const LEASE_MS = 1000;
// A worker under tsx starts in 1-3 s; on a machine busy with other tests it has taken 30 s.
const STARTUP_MS = 120_000;
let dir: string;
const running: FixtureProcess[] = [];

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'ledger-devices-'));
});

afterEach(async () => {
  await Promise.all(running.splice(0).map((p) => stopFixture(p)));
  rmSync(dir, { recursive: true, force: true });
});

function worker(instanceId: string): FixtureProcess {
  const fixture = startFixture('ledger/device-worker.ts', [
    // No fsync: what is proved here is the ids in every version, and a
    // SIGKILLed process's writes are in the page cache either way (fsync is
    // for power loss); on a busy disk each fsync would cost a write 10-100 ms.
    JSON.stringify({
      dir,
      pool: 'gpus',
      cap,
      resource: GPU,
      instanceId,
      leaseTtlMs: LEASE_MS,
      fsync: false,
    }),
  ]);
  running.push(fixture);
  return fixture;
}

/**
 * Each grant's interval on the system-wide monotonic clock: from its answer to
 * just before its release was called, or for a SIGKILLed worker's last grant
 * to the kill. The row existed for at least that long, so two intervals that
 * overlap and share an id are one id in two live rows.
 */
function heldIntervals(processes: FixtureProcess[], killedAt: Map<FixtureProcess, bigint>) {
  const byId = new Map<string, Array<{ agent: string; from: bigint; to: bigint }>>();
  let count = 0;
  let open = 0;
  for (const p of processes) {
    const grants = new Map<string, { ids: string[]; from: bigint }>();
    const add = (agent: string, to: bigint) => {
      const grant = grants.get(agent)!;
      grants.delete(agent);
      count++;
      for (const id of grant.ids) {
        const list = byId.get(id) ?? [];
        list.push({ agent, from: grant.from, to });
        byId.set(id, list);
      }
    };
    for (const e of p.events) {
      if (e.event === 'grant') {
        grants.set(e.agent as string, { ids: e.ids as string[], from: BigInt(e.at as string) });
      } else if (e.event === 'released') {
        add(e.agent as string, BigInt(e.at as string));
      }
    }
    // A grant with no release line: the row stood at least until the kill
    // (or, for a survivor, at least at the grant itself).
    for (const [agent, grant] of [...grants]) {
      open++;
      add(agent, killedAt.get(p) ?? grant.from);
    }
  }
  const overlaps: string[] = [];
  for (const [id, list] of byId) {
    list.sort((a, b) => (a.from < b.from ? -1 : a.from > b.from ? 1 : 0));
    let last: { agent: string; to: bigint } | undefined;
    for (const hold of list) {
      if (last !== undefined && hold.from < last.to) {
        overlaps.push(`id ${id}: ${hold.agent} granted while ${last.agent} held it`);
      }
      if (last === undefined || hold.to > last.to) last = hold;
    }
  }
  return { count, open, overlaps };
}

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const isReady = (p: FixtureProcess) => p.events.some((e) => e.event === 'ready');

describe('device ids across processes', () => {
  it('the interval check finds an id granted while another grant held it', () => {
    const events = (list: Array<[string, string, string[] | null, number]>) =>
      ({
        events: list.map(([event, agent, ids, at]) => ({ event, agent, ids, at: String(at) })),
      }) as unknown as FixtureProcess;
    const a = events([
      ['grant', 'a-1', ['0', '1'], 10],
      ['released', 'a-1', null, 20],
      ['grant', 'a-2', ['2'], 30],
    ]);
    const b = events([
      ['grant', 'b-1', ['1'], 20],
      ['released', 'b-1', null, 25],
      ['grant', 'b-2', ['2'], 35],
    ]);
    // a-2 still held id 2 at b-2's grant: a was killed at 40.
    expect(heldIntervals([a, b], new Map([[a, 40n]]))).toEqual({
      count: 4,
      open: 2,
      overlaps: ['id 2: b-2 granted while a-2 held it'],
    });
    // Killed at 32, a-2's hold is known only up to then: no proof of an overlap.
    expect(heldIntervals([a, b], new Map([[a, 32n]])).overlaps).toEqual([]);
  });

  it('8 workers, 4 devices, SIGKILLs at random points: no id in two rows, none over the count, none lost', async () => {
    const reader = startFixture('ledger/device-reader.ts', [dir, 'gpus', GPU]);
    running.push(reader);
    await reader.waitFor('ready', STARTUP_MS);
    const live = Array.from({ length: 8 }, (_, i) => worker(`w${i}`));
    await Promise.all(live.map((w) => w.waitFor('ready', STARTUP_MS)));

    // Kill a running worker every 100-400 ms and start its instance again
    // (its successor finds the killed process's rows stale by their pid).
    const killed: FixtureProcess[] = [];
    const killedAt = new Map<FixtureProcess, bigint>();
    const end = Date.now() + 8_000;
    while (Date.now() < end) {
      await pause(100 + Math.random() * 300);
      const ready = live.filter(isReady);
      if (ready.length === 0) continue;
      const victim = ready[Math.floor(Math.random() * ready.length)]!;
      killedAt.set(victim, process.hrtime.bigint());
      victim.child.kill('SIGKILL');
      await victim.exited;
      killed.push(victim);
      const index = live.indexOf(victim);
      live[index] = worker(`w${index}`);
    }
    // The last two killed are not restarted, and are killed while they hold
    // ids (each holds its next grant 30 s once its flag file exists): their
    // rows and ids wait for a peer's reap, and must all come back.
    for (const index of [0, 1]) {
      const ready = live[index]!;
      await ready.waitFor('ready', STARTUP_MS);
      writeFileSync(join(dir, `hold-w${index}`), '');
      const granted = () => ready.events.some((e) => e.event === 'grant' && e.long === true);
      for (let i = 0; i < 60_000 && !granted(); i += 5) await pause(5);
      await pause(50 + Math.random() * 100);
      killedAt.set(ready, process.hrtime.bigint());
      ready.child.kill('SIGKILL');
      await ready.exited;
      killed.push(ready);
    }
    const survivors = live.slice(2);
    await Promise.all(survivors.map((w) => w.waitFor('ready', STARTUP_MS)));
    // The two killed last may hold all four ids; a survivor reaps their rows
    // only once their lease and the margin have passed and its own lease has
    // been renewed that long (each survivor may be a restart just started).
    // Wait for that reap, however long a loaded machine takes, then let the
    // survivors work on the freed ids before they stop.
    const survivorPids = new Set(survivors.map((w) => w.child.pid));
    const reapedBy = Date.now() + 60_000;
    const deadRows = () =>
      (
        JSON.parse(readFileSync(join(dir, 'gpus.json'), 'utf8')).reservations as Array<{
          pid: number;
        }>
      ).filter((row) => !survivorPids.has(row.pid)).length;
    while (deadRows() > 0 && Date.now() < reapedBy) await pause(50);
    await pause(1500);
    for (const w of survivors) w.child.kill('SIGTERM');
    const results = await Promise.all(survivors.map(finishFixture));
    reader.child.kill('SIGTERM');
    const report = await finishFixture(reader);
    const granted = results.reduce((sum, r) => sum + (r.granted as number), 0);

    console.info(
      `device proof: ${killed.length} SIGKILLs, ${granted} grants by the survivors; the reader saw ${report.versions} versions of ${report.renames} writes (${report.reads} reads)`,
    );
    for (const result of results) {
      for (const error of result.errors as Array<{ code?: string; message: string }>) {
        expect(['BAD_IDS', 'BAD_REFUSAL', 'LOST_ROW', 'ERR_LEDGER_CORRUPT']).not.toContain(
          error.code,
        );
      }
    }
    // Every grant, of killed workers too, not only the versions the reader saw:
    // no id held by two grants at once.
    const holds = heldIntervals([...killed, ...survivors], killedAt);
    console.info(
      `device proof: ${holds.count} grants checked by their intervals, ${holds.open} of them cut short by a SIGKILL`,
    );
    expect(holds.overlaps).toEqual([]);
    // At least the two killed last held ids when they died.
    expect(holds.open).toBeGreaterThanOrEqual(2);
    expect(holds.count).toBeGreaterThanOrEqual(granted);
    expect(granted).toBeGreaterThan(0);
    expect(killed.length).toBeGreaterThanOrEqual(8);
    expect(report.violations).toEqual([]);
    expect(report.maxHeld).toBe(4);
    // Every version read was a write's; the writes were counted by their renames.
    expect(report.versions as number).toBeGreaterThan(20);
    expect(report.versions as number).toBeLessThanOrEqual((report.renames as number) + 1);

    // The killed processes' rows are reaped once their lease (1 s) and the
    // margin (1 s) have passed, by an instance that renewed its own lease that long.
    const auditor = new MachineLedger({ instanceId: 'auditor', dir, leaseTtlMs: LEASE_MS });
    auditor.registerPool('gpus', cap);
    await auditor.reapStale('gpus');
    await pause(2 * LEASE_MS + 300);
    await auditor.reapStale('gpus');
    expect(JSON.parse(readFileSync(join(dir, 'gpus.json'), 'utf8')).reservations).toEqual([]);
    // No id lost: all four are free.
    expect(await auditor.reserve('gpus', 'all', 1, 0, { extended: { [GPU]: 4 } })).toEqual({
      ok: true,
      devices: { [GPU]: IDS },
    });
    expect(await auditor.release('gpus', 'all')).toBe(true);
    await auditor.close();
  }, 300_000);
});
