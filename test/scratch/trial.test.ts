import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect, it } from 'vitest';
import { CapTracker } from '../../src/caps/index.js';
import { MachineLedger } from '../../src/ledger/index.js';
import { resourceCapSchema } from '../../src/resources/index.js';

it('trial field end to end', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'trial-'));
  const l = new MachineLedger({ dir, instanceId: 'me', bootId: 'b' });
  const cap = resourceCapSchema.parse({ maxCpu: 4, maxDummy: 1 });
  expect(cap).toEqual({ maxCpu: 4, maxDummy: 1 });
  l.registerPool('p', cap);
  expect(await l.reserve('p', 'a', 1, 0)).toEqual({ ok: true });
  expect(await l.reserve('p', 'b', 1, 0)).toMatchObject({ ok: false, dimension: 'agents', max: 1 });
  const doc = JSON.parse(readFileSync(join(dir, 'p.json'), 'utf8'));
  expect(doc.capFeatures).toEqual(['max-dummy']);
  expect(doc.cap).toEqual({ maxCpu: 4, maxDummy: 1 });
  const other = new MachineLedger({ dir, instanceId: 'o', bootId: 'b' });
  other.registerPool('p', { maxCpu: 4 });
  await expect(other.reserve('p', 'c', 1, 0)).rejects.toThrow(/registered/);
  const t = new CapTracker({ caps: { s: { maxDummy: 1 } } });
  expect(t.tryReserve('a', ['s'], { cpus: 0, memBytes: 0 })).toEqual({ ok: true });
  expect(t.tryReserve('b', ['s'], { cpus: 0, memBytes: 0 })).toMatchObject({ ok: false, dimension: 'agents' });
  await l.close();
  await other.close();
});
