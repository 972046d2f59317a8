import fc from 'fast-check';
import { CapTracker } from 'scaler-primitives/caps';
import { describe, expect, it } from 'vitest';
import { isInvalidInputError } from '../../src/errors/input.js';

const gpu = 'nvidia.com/gpu';
const fpga = 'example.com/fpga';

describe('CapTracker: extended resources and agents', () => {
  it('reserves GPUs all-or-nothing with CPU and memory, naming the resource on refusal', () => {
    const caps = new CapTracker({
      caps: {
        global: { maxCpu: 64, provides: [gpu] },
        'pool:a': { maxCpu: 8, maxExtended: { [gpu]: 2 } },
      },
    });
    const ask = { cpus: 1, memBytes: 0, extended: { [gpu]: 1 } };
    expect(caps.tryReserve('a1', ['global', 'pool:a'], ask)).toEqual({ ok: true });
    expect(caps.tryReserve('a2', ['global', 'pool:a'], ask)).toEqual({ ok: true });
    expect(caps.tryReserve('a3', ['global', 'pool:a'], ask)).toEqual({
      ok: false,
      scope: 'pool:a',
      dimension: gpu,
      requested: 1,
      used: 2,
      max: 2,
      neverFits: false,
    });
    // Nothing of the refused request was counted anywhere.
    expect(caps.usage('global')).toEqual({
      cpus: 2,
      memBytes: 0,
      reservations: 2,
      extended: { [gpu]: 2 },
    });
    caps.release('a1');
    expect(caps.usage('pool:a').extended).toEqual({ [gpu]: 1 });
    caps.release('a2');
    expect(caps.usage('pool:a')).toEqual({ cpus: 0, memBytes: 0, reservations: 0 });
  });

  it('a capped scope that does not name a resource has none of it: never-fits', () => {
    const caps = new CapTracker({ caps: { 'scaler:cpu-only': { maxCpu: 8 } } });
    const ask = { cpus: 1, memBytes: 0, extended: { [fpga]: 1 } };
    expect(caps.tryReserve('a', ['scaler:cpu-only'], ask)).toMatchObject({
      ok: false,
      dimension: fpga,
      max: 0,
      neverFits: true,
    });
    expect(caps.neverFits(['scaler:cpu-only'], ask)).toBe(true);
    // A scope with no cap at all limits nothing; `provides` means unbounded.
    caps.setCap('scaler:cpu-only', { maxCpu: 8, provides: [fpga] });
    expect(caps.tryReserve('a', ['scaler:cpu-only', 'uncapped'], ask)).toEqual({ ok: true });
    expect(caps.neverFits(['scaler:cpu-only'], { ...ask, extended: { [fpga]: 1e6 } })).toBe(false);
  });

  it('caps the number of agents', () => {
    const caps = new CapTracker({ caps: { pool: { maxAgents: 2 } } });
    const ask = { cpus: 0, memBytes: 0 };
    expect(caps.tryReserve('a', ['pool'], ask).ok).toBe(true);
    expect(caps.tryReserve('b', ['pool'], ask).ok).toBe(true);
    expect(caps.tryReserve('c', ['pool'], ask)).toEqual({
      ok: false,
      scope: 'pool',
      dimension: 'agents',
      requested: 1,
      used: 2,
      max: 2,
      neverFits: false,
    });
    caps.setCap('zero', { maxAgents: 0 });
    expect(caps.neverFits(['zero'], ask)).toBe(true);
  });

  it('refuses bad names and counts', () => {
    const caps = new CapTracker();
    let error: unknown;
    try {
      caps.tryReserve('a', ['s'], { cpus: 0, memBytes: 0, extended: { gpu: 1 } });
    } catch (e) {
      error = e;
    }
    expect(isInvalidInputError(error)).toBe(true);
    expect(() =>
      caps.tryReserve('a', ['s'], { cpus: 0, memBytes: 0, extended: { [gpu]: 0.5 } }),
    ).toThrow(TypeError);
    expect(() => caps.setCap('s', { maxExtended: { [gpu]: -1 } })).toThrow(TypeError);
    expect(() => caps.setCap('s', { maxAgents: 1.5 })).toThrow(TypeError);
    expect(() => caps.setCap('s', { provides: ['gpu'] })).toThrow(/domain prefix/);
  });

  it('usage always equals the sum of live reservations and never exceeds a cap', () => {
    fc.assert(
      fc.property(
        fc.array(
          fc.record({
            release: fc.boolean(),
            id: fc.integer({ min: 0, max: 9 }),
            g: fc.integer({ min: 0, max: 3 }),
            f: fc.integer({ min: 0, max: 2 }),
          }),
          { maxLength: 60 },
        ),
        (ops) => {
          const caps = new CapTracker({
            caps: { s: { maxExtended: { [gpu]: 4, [fpga]: 3 }, maxAgents: 5 } },
          });
          const held = new Map<string, { g: number; f: number }>();
          for (const op of ops) {
            const id = `a${op.id}`;
            if (op.release) {
              caps.release(id);
              held.delete(id);
            } else if (!held.has(id)) {
              const r = caps.tryReserve(id, ['s'], {
                cpus: 0,
                memBytes: 0,
                extended: { [gpu]: op.g, [fpga]: op.f },
              });
              if (r.ok) held.set(id, { g: op.g, f: op.f });
            }
            const g = [...held.values()].reduce((n, h) => n + h.g, 0);
            const f = [...held.values()].reduce((n, h) => n + h.f, 0);
            const usage = caps.usage('s');
            expect(usage.extended?.[gpu] ?? 0).toBe(g);
            expect(usage.extended?.[fpga] ?? 0).toBe(f);
            expect(g).toBeLessThanOrEqual(4);
            expect(f).toBeLessThanOrEqual(3);
            expect(usage.reservations).toBeLessThanOrEqual(5);
          }
        },
      ),
    );
  });
});
