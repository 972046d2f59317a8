import { describe, expect, it } from 'vitest';
import { normalizeCap } from '../../src/ledger/document/cap.js';
import { assignDevices, checkHeldDevices } from '../../src/ledger/document/devices.js';
import { applyBatch } from '../../src/ledger/ops.js';
import type { LedgerDocument, ReservationRow } from '../../src/ledger/types.js';
import { resourceCapSchema } from '../../src/resources/schema.js';

const GPU = 'nvidia.com/gpu';

function row(agentId: string, gpus: number, devices?: string[]): ReservationRow {
  return {
    instanceId: 'a',
    pid: 1,
    bootId: 'b',
    agentId,
    cpus: 1,
    memBytes: 0,
    reservedAt: 0,
    extended: { [GPU]: gpus },
    ...(devices === undefined ? {} : { devices: { [GPU]: devices } }),
  };
}

describe('device ids in a pool cap', () => {
  it('fills maxExtended from the number of ids and refuses a different count', () => {
    expect(normalizeCap({ devices: { [GPU]: ['0', '1'] } })).toEqual({
      maxExtended: { [GPU]: 2 },
      devices: { [GPU]: ['0', '1'] },
    });
    expect(() => normalizeCap({ maxExtended: { [GPU]: 4 }, devices: { [GPU]: ['0'] } })).toThrow(
      /maxExtended\["nvidia.com\/gpu"\]` is 4 but .* lists 1 device ids/,
    );
  });

  it('refuses repeated, empty and malformed ids, naming them', () => {
    expect(() => normalizeCap({ devices: { [GPU]: ['0', '0'] } })).toThrow(/"0" is listed twice/);
    expect(() => normalizeCap({ devices: { [GPU]: [] } })).toThrow(/1 to 256 device ids/);
    expect(() => normalizeCap({ devices: { [GPU]: ['a b'] } })).toThrow(/Invalid device id "a b"/);
    expect(() => normalizeCap({ devices: { gpu: ['0'] } as never })).toThrow(/domain prefix/);
  });

  it('parses devices in a configuration cap', () => {
    expect(resourceCapSchema.parse({ devices: { [GPU]: ['0', '1', '2'] } })).toEqual({
      maxExtended: { [GPU]: 3 },
      devices: { [GPU]: ['0', '1', '2'] },
    });
    expect(() =>
      resourceCapSchema.parse({ maxExtended: { [GPU]: 2 }, devices: { [GPU]: ['0'] } }),
    ).toThrow(/lists 1 ids/);
  });
});

describe('assigning device ids', () => {
  const cap = normalizeCap({ devices: { [GPU]: ['0', '1', '2', '3'] } });

  it('takes the lowest free ids in the cap order', () => {
    expect(assignDevices('p', [row('x', 1, ['0']), row('y', 1, ['2'])], cap, { [GPU]: 2 })).toEqual(
      { ok: true, devices: { [GPU]: ['1', '3'] } },
    );
  });

  it('refuses, never hands out a held id, when a row holds more ids than its count', () => {
    const rows = [row('x', 1, ['0', '1', '2'])];
    expect(assignDevices('p', rows, cap, { [GPU]: 2 })).toMatchObject({
      ok: false,
      dimension: GPU,
      used: 3,
      max: 4,
    });
  });

  it('assigns nothing for a resource without listed ids', () => {
    expect(assignDevices('p', [], cap, { 'example.com/fpga': 1 })).toEqual({ ok: true });
  });

  it('checks ids an adopted agent already uses', () => {
    expect(checkHeldDevices('p', [row('x', 1, ['1'])], cap, { [GPU]: ['1'] })).toMatchObject({
      ok: false,
      dimension: GPU,
    });
    expect(checkHeldDevices('p', [], cap, { [GPU]: ['9'] })).toMatchObject({ neverFits: true });
    expect(checkHeldDevices('p', [row('x', 1, ['1'])], cap, { [GPU]: ['2'] })).toBeUndefined();
  });
});

describe('a batch assigns ids in the write that adds the row', () => {
  const doc: LedgerDocument = {
    version: 1,
    cap: normalizeCap({ maxCpu: 8, devices: { [GPU]: ['0', '1', '2', '3'] } }),
    reservations: [row('held', 1, ['0'])],
  };

  it('answers and stores the ids; a second grant in the same batch gets the next ones', () => {
    const out = applyBatch('p', doc, { live: doc.reservations, stale: [] }, [
      { kind: 'reserve', row: row('a', 2) },
      { kind: 'reserve', row: row('b', 1) },
      { kind: 'reserve', row: row('c', 1) },
    ]);
    expect(out.answers.map((a) => a.ok && a.value)).toEqual([
      { ok: true, devices: { [GPU]: ['1', '2'] } },
      { ok: true, devices: { [GPU]: ['3'] } },
      expect.objectContaining({ ok: false, dimension: GPU, used: 4, max: 4 }),
    ]);
    expect(out.doc.reservations.map((r) => [r.agentId, r.devices?.[GPU]])).toEqual([
      ['held', ['0']],
      ['a', ['1', '2']],
      ['b', ['3']],
    ]);
  });

  it('an adoption keeps the ids the agent uses, and refuses ids another row holds', () => {
    const own = { ...row('held', 1), pid: 2 };
    const taken = applyBatch('p', doc, { live: doc.reservations, stale: [] }, [
      { kind: 'adopt', rows: [own, { ...row('back', 1), devices: { [GPU]: ['3'] } }] },
    ]);
    expect(taken.answers[0]).toEqual({
      ok: true,
      kind: 'adopt',
      value: [
        { ok: true, adopted: true, devices: { [GPU]: ['0'] } },
        { ok: true, adopted: false, devices: { [GPU]: ['3'] } },
      ],
    });
    const clash = applyBatch('p', doc, { live: doc.reservations, stale: [] }, [
      { kind: 'adopt', rows: [{ ...row('other', 1), devices: { [GPU]: ['0'] } }] },
    ]);
    expect(clash.answers[0]).toMatchObject({ value: [{ ok: false, dimension: GPU }] });
    expect(clash.dirty).toBe(false);
  });
});
