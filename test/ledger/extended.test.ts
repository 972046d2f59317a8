import { describe, expect, it } from 'vitest';
import { isInvalidInputError } from '../../src/errors/input.js';
import { isLedgerCorruptError } from '../../src/errors/ledger.js';
import { capsEqual, normalizeCap } from '../../src/ledger/document/cap.js';
import {
  emptyDocument,
  parseDocument,
  serializeDocument,
} from '../../src/ledger/document/codec.js';
import { assertKiciCompatibleCap } from '../../src/ledger/document/extended.js';
import { checkFit, sumRows } from '../../src/ledger/document/fit.js';
import { applyBatch } from '../../src/ledger/ops.js';
import type { ReservationRow } from '../../src/ledger/types.js';

const gpu = 'nvidia.com/gpu';
const fpga = 'example.com/fpga';
const source = { pool: 'p', location: '/x/p.json' };

function row(agentId: string, extended?: Record<string, number>): ReservationRow {
  return {
    instanceId: 'i',
    pid: 1,
    bootId: 'b',
    agentId,
    cpus: 1,
    memBytes: 1,
    reservedAt: 0,
    ...(extended ? { extended } : {}),
  };
}

describe('ledger rows with extended resources', () => {
  it('counts extended resources of live rows against maxExtended, naming the resource', () => {
    const cap = { maxCpu: 8, maxExtended: { [gpu]: 2 } };
    const rows = [row('a', { [gpu]: 1 }), row('b', { [gpu]: 1 }), row('c')];
    expect(sumRows(rows)).toEqual({ cpus: 3, memBytes: 3, extended: { [gpu]: 2 } });
    expect(checkFit('p', rows, cap, { cpus: 1, memBytes: 1, extended: { [gpu]: 1 } })).toEqual({
      ok: false,
      pool: 'p',
      dimension: gpu,
      requested: 1,
      used: 2,
      max: 2,
      neverFits: false,
    });
    expect(checkFit('p', rows, cap, { cpus: 1, memBytes: 1 })).toEqual({ ok: true });
  });

  it('a pool cap that does not name a resource has none of it; provides means unbounded', () => {
    expect(checkFit('p', [], {}, { cpus: 0, memBytes: 0, extended: { [fpga]: 1 } })).toMatchObject({
      ok: false,
      dimension: fpga,
      max: 0,
      neverFits: true,
    });
    expect(
      checkFit('p', [], { provides: [fpga] }, { cpus: 0, memBytes: 0, extended: { [fpga]: 9 } }),
    ).toEqual({ ok: true });
  });

  it('maxAgents counts rows', () => {
    const cap = { maxAgents: 2 };
    expect(checkFit('p', [row('a'), row('b')], cap, { cpus: 0, memBytes: 0 })).toMatchObject({
      ok: false,
      dimension: 'agents',
      used: 2,
      max: 2,
    });
  });

  it('a batch refuses the GPU row that would go over the cap, all-or-nothing', () => {
    const doc = emptyDocument({ maxExtended: { [gpu]: 1 } });
    const out = applyBatch('p', doc, { live: [], stale: [] }, [
      { kind: 'reserve', row: row('a', { [gpu]: 1 }) },
      { kind: 'reserve', row: row('b', { [gpu]: 1 }) },
    ]);
    expect(out.answers.map((a) => (a.ok ? a.value : a.error))).toEqual([
      { ok: true },
      expect.objectContaining({ ok: false, dimension: gpu }),
    ]);
    expect(out.doc.reservations.map((r) => r.agentId)).toEqual(['a']);
  });

  it('round-trips rows and caps with the new fields; a malformed field is corruption', () => {
    const doc = {
      ...emptyDocument({ maxCpu: 4, maxExtended: { [gpu]: 2 }, provides: [fpga], maxAgents: 3 }),
      reservations: [row('a', { [gpu]: 1 })],
    };
    expect(parseDocument(serializeDocument(doc), source)).toEqual(doc);
    const bad = { ...doc, reservations: [{ ...row('a'), extended: { [gpu]: 0.5 } }] };
    expect(() => parseDocument(JSON.stringify(bad), source)).toThrow(/extended/);
    let error: unknown;
    try {
      parseDocument(
        JSON.stringify({ ...doc, reservations: [{ ...row('a'), extended: { gpu: 1 } }] }),
        source,
      );
    } catch (e) {
      error = e;
    }
    expect(isLedgerCorruptError(error)).toBe(true);
  });

  it('compares and validates the new cap fields', () => {
    expect(capsEqual({ maxExtended: { [gpu]: 2 } }, { maxExtended: { [gpu]: 2 } })).toBe(true);
    expect(capsEqual({ maxExtended: { [gpu]: 2 } }, { maxExtended: { [gpu]: 3 } })).toBe(false);
    expect(capsEqual({ maxExtended: { [gpu]: 2 } }, {})).toBe(false);
    expect(capsEqual({ provides: [gpu, fpga] }, { provides: [fpga, gpu] })).toBe(true);
    expect(capsEqual({ maxAgents: 1 }, {})).toBe(false);
    expect(normalizeCap({ maxCpu: 1, maxAgents: 2, extra: 1 } as never)).toEqual({
      maxCpu: 1,
      maxAgents: 2,
    });
    expect(() => normalizeCap({ maxExtended: { gpu: 1 } })).toThrow(/domain prefix/);
    expect(() => normalizeCap({ maxAgents: -1 })).toThrow(TypeError);
  });
});

describe('mixed fleet with kici writers', () => {
  // What @kici-dev/orchestrator 0.9.1's MachineLedger does to the file (read
  // from its published dist/server.js, region src/scaler/machine-ledger.ts):
  // JSON.parse the whole file, check only cap.maxCpu / cap.maxMemoryBytes,
  // filter rows as objects, push its own 7-field row, JSON.stringify it back.
  function kiciRewrite(text: string, agentId: string): string {
    const ledger = JSON.parse(text);
    ledger.reservations = ledger.reservations.filter((r: { bootId: string }) => r.bootId === 'b');
    ledger.reservations.push({
      instanceId: 'kici',
      pid: 2,
      bootId: 'b',
      agentId,
      cpus: 1,
      memBytes: 1,
      reservedAt: 1,
    });
    return JSON.stringify(ledger, null, 2);
  }

  it('a kici rewrite keeps our extended rows and cap fields, so GPU accounting stays exact', () => {
    const cap = { maxCpu: 8, maxExtended: { [gpu]: 1 } };
    const ours = { ...emptyDocument(cap), reservations: [row('a', { [gpu]: 1 })] };
    const after = parseDocument(kiciRewrite(serializeDocument(ours), 'k1'), source);
    expect(after.cap).toEqual(cap);
    expect(after.reservations[0]).toEqual(row('a', { [gpu]: 1 }));
    expect(after.reservations[1]!.extended).toBeUndefined();
    expect(
      checkFit('p', after.reservations, after.cap, {
        cpus: 1,
        memBytes: 1,
        extended: { [gpu]: 1 },
      }),
    ).toMatchObject({ ok: false, dimension: gpu, used: 1 });
  });

  it('refuses maxAgents in a kici-compatible pool, saying why', () => {
    let error: unknown;
    try {
      assertKiciCompatibleCap('p', { maxCpu: 8, maxAgents: 4 });
    } catch (e) {
      error = e;
    }
    expect(isInvalidInputError(error)).toBe(true);
    expect((error as Error).message).toContain('kici writers');
    expect(() =>
      assertKiciCompatibleCap('p', { maxCpu: 8, maxExtended: { [gpu]: 1 } }),
    ).not.toThrow();
  });
});
