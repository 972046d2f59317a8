// Issue 11, "Numbers": no amount summed against a cap is rounded below what was
// asked, and no cap is rounded above what was written.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { capsEqual } from '../../src/ledger/document/cap.js';
import { emptyDocument } from '../../src/ledger/document/codec.js';
import { checkFit, sumRows } from '../../src/ledger/document/fit.js';
import type { ReservationRow } from '../../src/ledger/types.js';

function row(agentId: string, cpus: number, memBytes: number): ReservationRow {
  return { instanceId: 'i', pid: 1, bootId: 'b', agentId, cpus, memBytes, reservedAt: 0 };
}

describe('ledger sums round requests up and caps down', () => {
  it('three 0.4-byte rows do not fit under a 1-byte cap', () => {
    const cap = { maxMemoryBytes: 1 };
    expect(checkFit('p', [], cap, { cpus: 0, memBytes: 0.4 })).toEqual({ ok: true });
    const refused = checkFit('p', [row('a', 0, 0.4)], cap, { cpus: 0, memBytes: 0.4 });
    expect(refused).toMatchObject({ ok: false, dimension: 'memory', used: 1, requested: 1 });
    expect(sumRows([row('a', 0, 0.4), row('b', 0, 0.4), row('c', 0, 0.4)]).memBytes).toBe(3);
  });

  it('a CPU of 1e-10 counts as one millicore, not zero', () => {
    expect(sumRows([row('a', 1e-10, 0)]).cpus).toBe(0.001);
    const cap = { maxCpu: 0.001 };
    expect(checkFit('p', [row('a', 1e-10, 0)], cap, { cpus: 1e-10, memBytes: 0 })).toMatchObject({
      ok: false,
      dimension: 'cpu',
      used: 0.001,
      requested: 0.001,
      max: 0.001,
    });
  });

  it('a cap with a fraction of a millicore or byte rounds down', () => {
    expect(checkFit('p', [], { maxCpu: 0.0019 }, { cpus: 0.002, memBytes: 0 })).toMatchObject({
      ok: false,
      max: 0.001,
      neverFits: true,
    });
    expect(checkFit('p', [], { maxMemoryBytes: 1.9 }, { cpus: 0, memBytes: 2 })).toMatchObject({
      ok: false,
      max: 1,
    });
    expect(capsEqual({ maxCpu: 0.3 }, { maxCpu: 0.30000000000000004 })).toBe(true);
    expect(capsEqual({ maxCpu: 0.3 }, { maxCpu: 0.301 })).toBe(false);
  });

  it('a row beyond what the library counts makes the pool read full, not an exception', () => {
    const cap = { maxCpu: 1e12, maxMemoryBytes: 2 ** 53 };
    expect(checkFit('p', [row('a', 1e300, 0)], cap, { cpus: 0.001, memBytes: 0 }).ok).toBe(false);
    expect(checkFit('p', [row('a', 0, 1e300)], cap, { cpus: 0, memBytes: 1 }).ok).toBe(false);
  });

  it('granted rows never sum above the cap, whatever fractions they carry', () => {
    fc.assert(
      fc.property(
        fc.double({ min: 0, max: 100, noNaN: true }),
        fc.double({ min: 0, max: 10_000, noNaN: true }),
        fc.array(
          fc.tuple(
            fc.double({ min: 0, max: 5, noNaN: true }),
            fc.double({ min: 0, max: 500, noNaN: true }),
          ),
          { maxLength: 40 },
        ),
        (maxCpu, maxMemoryBytes, requests) => {
          const cap = { maxCpu, maxMemoryBytes };
          let doc = emptyDocument(cap);
          for (const [i, [cpus, memBytes]] of requests.entries()) {
            if (checkFit('p', doc.reservations, doc.cap, { cpus, memBytes }).ok) {
              doc = { ...doc, reservations: [...doc.reservations, row(`a${i}`, cpus, memBytes)] };
            }
          }
          const cpuSum = doc.reservations.reduce((s, r) => s + r.cpus, 0);
          const memSum = doc.reservations.reduce((s, r) => s + r.memBytes, 0);
          // Exact sums are at most the float sums plus noise; allow one ulp-scale slack only.
          expect(cpuSum).toBeLessThanOrEqual(maxCpu * (1 + 1e-12));
          expect(memSum).toBeLessThanOrEqual(maxMemoryBytes * (1 + 1e-12));
        },
      ),
    );
  });
});
