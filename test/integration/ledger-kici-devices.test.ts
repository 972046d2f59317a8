/**
 * Device ids in a pool the real kici orchestrator ledger (0.9.1, fetched at run
 * time) also writes: kici's rewrites keep our rows' `devices` and the cap's
 * `devices`, and a kici process churning on the pool while ours reserve
 * devices cannot make the count over-commit or an id be given twice.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { MachineLedger } from '../../src/ledger/file/machine-ledger.js';
import type { ReservationRow } from '../../src/ledger/types.js';
import { kiciLedgerModule } from '../helpers/kici-ledger.js';
import {
  type FixtureProcess,
  finishFixture,
  startFixture,
  stopFixture,
} from '../helpers/processes.js';

interface KiciLedger {
  registerPool(name: string, cap: { maxCpu?: number; maxMemoryBytes?: number }): void;
  tryReserve(pool: string, agentId: string, cpus: number, memBytes: number): Promise<boolean>;
  release(pool: string, agentId: string): Promise<void>;
  reapStale(pool: string): Promise<void>;
}

const GPU = 'nvidia.com/gpu';
const GiB = 2 ** 30;
const IDS = ['0', '1', '2', '3'];
// kici checks maxCpu and maxMemoryBytes against the file's cap; it ignores the rest.
const kiciCap = { maxCpu: 64, maxMemoryBytes: 64 * GiB };
const cap = { ...kiciCap, devices: { [GPU]: IDS } };
const gpus = (n: number) => ({ extended: { [GPU]: n } });

let dir: string;
const running: FixtureProcess[] = [];
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'sp-kici-devices-'));
});
afterEach(async () => {
  await Promise.all(running.splice(0).map((p) => stopFixture(p)));
  rmSync(dir, { recursive: true, force: true });
});

const readDoc = () => JSON.parse(readFileSync(join(dir, 'gpu.json'), 'utf8'));

// Every id held once, as many ids as each row counts, at most 4 held.
function checkIds(rows: ReservationRow[]): void {
  const ids = rows.flatMap((row) => row.devices?.[GPU] ?? []);
  expect(new Set(ids).size).toBe(ids.length);
  for (const row of rows) expect(row.devices?.[GPU] ?? []).toHaveLength(row.extended?.[GPU] ?? 0);
  expect(ids.length).toBeLessThanOrEqual(4);
}

describe('device ids in a pool kici 0.9.1 also writes', () => {
  it("kici's rewrites keep our rows' devices and the cap's devices; the count and the ids hold after them", async () => {
    const { MachineLedger: KiciMachineLedger } = (await import(kiciLedgerModule())) as {
      MachineLedger: new (opts: { explicitDir: string; instanceId: string }) => KiciLedger;
    };
    const ours = new MachineLedger({ instanceId: 'ours', dir });
    ours.registerPool('gpu', cap);
    expect(await ours.reserve('gpu', 'a1', 1, 0, gpus(2))).toEqual({
      ok: true,
      devices: { [GPU]: ['0', '1'] },
    });

    const kici = new KiciMachineLedger({ explicitDir: dir, instanceId: 'kici' });
    kici.registerPool('gpu', kiciCap);
    expect(await kici.tryReserve('gpu', 'k1', 1, 0)).toBe(true);
    await kici.reapStale('gpu');
    // A refusal rewrites the file too (kici writes on every refusal).
    expect(await kici.tryReserve('gpu', 'k2', 100, 0)).toBe(false);
    await kici.release('gpu', 'k1');

    const doc = readDoc();
    expect(doc.cap.devices).toEqual({ [GPU]: IDS });
    expect(doc.cap.maxExtended).toEqual({ [GPU]: 4 });
    expect(doc.reservations).toHaveLength(1);
    expect(doc.reservations[0]).toMatchObject({
      agentId: 'a1',
      extended: { [GPU]: 2 },
      devices: { [GPU]: ['0', '1'] },
    });

    // Still held after kici's rewrites: two left, three do not fit, the next two are 2 and 3.
    expect(await ours.reserve('gpu', 'a2', 1, 0, gpus(3))).toMatchObject({
      ok: false,
      dimension: GPU,
      used: 2,
      max: 4,
    });
    expect(await ours.reserve('gpu', 'a3', 1, 0, gpus(2))).toEqual({
      ok: true,
      devices: { [GPU]: ['2', '3'] },
    });
    await ours.close();
  });

  it('a kici process churning on the pool while ours reserve devices: never over the count, never an id twice, none lost', async () => {
    const module = kiciLedgerModule();
    const ours = new MachineLedger({ instanceId: 'ours', dir });
    ours.registerPool('gpu', cap);
    await ours.reserve('gpu', 'seed', 0, 0);
    const kici = startFixture('ledger/kici-worker.ts', [
      JSON.stringify({
        module,
        dir,
        pool: 'gpu',
        instanceId: 'kici',
        cap: kiciCap,
        cpus: 1,
        memBytes: GiB,
        iterations: 150,
      }),
    ]);
    running.push(kici);
    await kici.waitFor('ready', 120_000);
    // Ours: reserve until the count is full, release one, again, while kici rewrites the file.
    const held = new Map<string, string[]>();
    let i = 0;
    while (kici.child.exitCode === null && i < 400) {
      const agent = `g${i++}`;
      const result = await ours.reserve('gpu', agent, 0.5, 0, gpus(1 + (i % 2)));
      if (result.ok) held.set(agent, result.devices![GPU]!);
      else expect(result).toMatchObject({ dimension: GPU });
      if (held.size >= 2 || !result.ok) {
        const [first] = held.keys();
        if (first !== undefined) {
          expect(await ours.release('gpu', first)).toBe(true);
          held.delete(first);
        }
      }
      const rows = readDoc().reservations as ReservationRow[];
      checkIds(rows);
      // Our rows hold what we were answered: kici's rewrites lost nothing.
      for (const [agent, ids] of held) {
        expect(rows.find((row) => row.agentId === agent)?.devices?.[GPU]).toEqual(ids);
      }
    }
    const done = await finishFixture(kici);
    expect(done.errors).toEqual([]);
    expect(done.granted as number).toBeGreaterThan(0);
    for (const agent of [...held.keys(), 'seed'])
      expect(await ours.release('gpu', agent)).toBe(true);
    expect(await ours.reserve('gpu', 'all', 1, 0, gpus(4))).toEqual({
      ok: true,
      devices: { [GPU]: IDS },
    });
    expect(readDoc().cap.devices).toEqual({ [GPU]: IDS });
    await ours.close();
  }, 180_000);

  it('a row kici (or any writer that does not assign ids) left counting the resource is counted; its ids are unknown', async () => {
    const ours = new MachineLedger({ instanceId: 'ours', dir });
    ours.registerPool('gpu', cap);
    await ours.reserve('gpu', 'a1', 1, 0, gpus(1));
    const doc = readDoc();
    doc.reservations.push({
      instanceId: 'older',
      pid: 1,
      bootId: doc.reservations[0].bootId,
      agentId: 'no-ids',
      cpus: 1,
      memBytes: 0,
      reservedAt: 1,
      extended: { [GPU]: 2 },
    });
    writeFileSync(join(dir, 'gpu.json'), JSON.stringify(doc));
    expect(await ours.reserve('gpu', 'a2', 1, 0, gpus(2))).toMatchObject({
      ok: false,
      dimension: GPU,
      used: 3,
    });
    expect(await ours.reserve('gpu', 'a3', 1, 0, gpus(1))).toEqual({
      ok: true,
      devices: { [GPU]: ['1'] },
    });
    await ours.close();
  });
});
