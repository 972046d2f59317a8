/**
 * The `extended` row field and the `maxExtended` cap field against the real kici
 * orchestrator ledger (0.9.1, fetched at run time): kici reads and rewrites the
 * pool file (reserve, release, reap) and our fields survive every rewrite, so
 * extended resources stay counted in a mixed pool.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { MachineLedger } from '../../src/ledger/file/machine-ledger.js';
import { kiciLedgerModule } from '../helpers/kici-ledger.js';

interface KiciLedger {
  registerPool(name: string, cap: { maxCpu?: number; maxMemoryBytes?: number }): void;
  tryReserve(pool: string, agentId: string, cpus: number, memBytes: number): Promise<boolean>;
  release(pool: string, agentId: string): Promise<void>;
  reapStale(pool: string): Promise<void>;
}

describe('extended resources in a pool kici 0.9.1 also writes', () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'sp-kici-ext-'));
  });
  afterEach(() => {
    rmSync(dir, { recursive: true, force: true });
  });

  it("kici's rewrites keep the row's extended counts and the cap's maxExtended", async () => {
    const { MachineLedger: KiciMachineLedger } = (await import(kiciLedgerModule())) as {
      MachineLedger: new (opts: { explicitDir: string; instanceId: string }) => KiciLedger;
    };
    const ours = new MachineLedger({ instanceId: 'ours', dir });
    ours.registerPool('gpu', { maxCpu: 8, maxExtended: { 'nvidia.com/gpu': 2 } });
    expect(await ours.reserve('gpu', 'a1', 1, 0, { extended: { 'nvidia.com/gpu': 1 } })).toEqual({
      ok: true,
    });

    const kici = new KiciMachineLedger({ explicitDir: dir, instanceId: 'kici' });
    kici.registerPool('gpu', { maxCpu: 8 });
    expect(await kici.tryReserve('gpu', 'k1', 1, 0)).toBe(true);
    await kici.reapStale('gpu');
    await kici.release('gpu', 'k1');

    const file = JSON.parse(readFileSync(join(dir, 'gpu.json'), 'utf8'));
    expect(file.cap.maxExtended).toEqual({ 'nvidia.com/gpu': 2 });
    expect(file.reservations).toHaveLength(1);
    expect(file.reservations[0]).toMatchObject({
      agentId: 'a1',
      extended: { 'nvidia.com/gpu': 1 },
    });

    // Still counted after kici's rewrites: one GPU left, two do not fit.
    const refused = await ours.reserve('gpu', 'a2', 1, 0, { extended: { 'nvidia.com/gpu': 2 } });
    expect(refused).toMatchObject({ ok: false, dimension: 'nvidia.com/gpu', used: 1, max: 2 });
    expect(await ours.reserve('gpu', 'a3', 1, 0, { extended: { 'nvidia.com/gpu': 1 } })).toEqual({
      ok: true,
    });
    await ours.close();
  });
});
