/**
 * Wire compatibility with the kici orchestrator's ledger: we read its files,
 * keep its rows as they are, and what we write parses under its schema.
 */
import { copyFileSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { MachineLedger } from '../../src/ledger/file/machine-ledger.js';

const golden = join(import.meta.dirname, '../fixtures/ledger/seed-pool.json');
const seedBootId = '3f1c2a9e-8b7d-4e21-9c55-0d6a1b2c3d4e';

// The seed's `LedgerFile` and `ReservationRow` declarations, as a schema.
const seedRow = z.object({
  instanceId: z.string(),
  pid: z.number(),
  bootId: z.string(),
  agentId: z.string(),
  cpus: z.number(),
  memBytes: z.number(),
  reservedAt: z.number(),
});
const seedFile = z.object({
  version: z.number(),
  cap: z.object({ maxCpu: z.number().optional(), maxMemoryBytes: z.number().optional() }),
  reservations: z.array(seedRow),
});

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'ledger-golden-'));
  copyFileSync(golden, join(dir, 'build.json'));
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

describe('seed wire format', () => {
  it('the golden file parses under the seed schema (the fixture is what kici writes)', () => {
    expect(seedFile.safeParse(JSON.parse(readFileSync(golden, 'utf8'))).success).toBe(true);
  });

  it('reads a kici pool file, counts its rows, and writes a file kici can read', async () => {
    const ledger = new MachineLedger({
      instanceId: 'ours',
      dir,
      bootId: seedBootId,
      isProcessAlive: () => true,
    });
    ledger.registerPool('build', { maxCpu: 8, maxMemoryBytes: 16 * 2 ** 30 });
    expect(await ledger.getUsage('build')).toEqual({ cpus: 2.5, memBytes: 4.5 * 2 ** 30 });
    expect(await ledger.reserve('build', 'ours-1', 6, 2 ** 30)).toMatchObject({
      ok: false,
      dimension: 'cpu',
      used: 2.5,
    });
    expect(await ledger.reserve('build', 'ours-1', 5.5, 2 ** 30)).toEqual({ ok: true });
    await ledger.close();

    const written = JSON.parse(readFileSync(join(dir, 'build.json'), 'utf8'));
    const parsed = seedFile.safeParse(written);
    expect(parsed.success, JSON.stringify(parsed.error?.issues)).toBe(true);
    const original = JSON.parse(readFileSync(golden, 'utf8'));
    expect(written.version).toBe(1);
    expect(written.cap).toEqual(original.cap);
    expect(written.reservations.slice(0, 2)).toEqual(original.reservations);
    expect(written.reservations[2]).toMatchObject({
      instanceId: 'ours',
      agentId: 'ours-1',
      cpus: 5.5,
    });
  });

  it('treats kici rows from an earlier boot as stale, as kici does', async () => {
    const ledger = new MachineLedger({ instanceId: 'ours', dir, bootId: 'a-later-boot' });
    ledger.registerPool('build', { maxCpu: 8, maxMemoryBytes: 16 * 2 ** 30 });
    expect(await ledger.getUsage('build')).toEqual({ cpus: 0, memBytes: 0 });
    expect(await ledger.reapStale('build')).toBe(2);
    await ledger.close();
    expect(JSON.parse(readFileSync(join(dir, 'build.json'), 'utf8')).reservations).toEqual([]);
  });
});
