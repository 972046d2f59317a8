// Issue 11, "Numbers": the cap tracker counts a sub-millicore request as a whole
// millicore and rounds a fractional cap down.

import { CapTracker } from 'scaler-primitives/caps';
import { describe, expect, it } from 'vitest';

describe('CapTracker rounding', () => {
  it('counts 1e-10 cores as one millicore', () => {
    const caps = new CapTracker({ caps: { s: { maxCpu: 0.001 } } });
    expect(caps.tryReserve('a', ['s'], { cpus: 1e-10, memBytes: 0 })).toEqual({ ok: true });
    expect(caps.usage('s').cpus).toBe(0.001);
    expect(caps.tryReserve('b', ['s'], { cpus: 1e-10, memBytes: 0 })).toMatchObject({
      ok: false,
      dimension: 'cpu',
      requested: 0.001,
      used: 0.001,
    });
  });

  it('rounds a cap with a fraction of a millicore down', () => {
    const caps = new CapTracker({ caps: { s: { maxCpu: 0.0019 } } });
    expect(caps.tryReserve('a', ['s'], { cpus: 0.002, memBytes: 0 })).toMatchObject({
      ok: false,
      max: 0.001,
      neverFits: true,
    });
    expect(caps.neverFits(['s'], { cpus: 0.002, memBytes: 0 })).toBe(true);
  });

  it('an uncapped scope refuses a sum it could no longer count exactly (past 2^53)', () => {
    const caps = new CapTracker();
    const big = 2 ** 43; // cores: the largest CPU quantity, 8.8e15 millicores
    expect(caps.tryReserve('a', ['s'], { cpus: big, memBytes: 2 ** 52 })).toEqual({ ok: true });
    expect(caps.tryReserve('b', ['s'], { cpus: big, memBytes: 0 })).toEqual({
      ok: false,
      scope: 's',
      dimension: 'cpu',
      requested: big,
      used: big,
      max: Number.MAX_SAFE_INTEGER / 1000,
      neverFits: false,
    });
    expect(caps.tryReserve('c', ['s'], { cpus: 1, memBytes: 2 ** 52 })).toMatchObject({
      ok: false,
      dimension: 'memory',
      max: Number.MAX_SAFE_INTEGER,
    });
    expect(
      caps.tryReserve('d', ['s'], {
        cpus: 0,
        memBytes: 0,
        extended: { 'example.com/x': Number.MAX_SAFE_INTEGER },
      }),
    ).toEqual({ ok: true });
    expect(
      caps.tryReserve('e', ['s'], { cpus: 0, memBytes: 0, extended: { 'example.com/x': 1 } }),
    ).toMatchObject({ ok: false, dimension: 'example.com/x' });
    // What was counted is still exact, and a release gives it all back.
    expect(caps.usage('s')).toMatchObject({ cpus: big, memBytes: 2 ** 52 });
    caps.release('a');
    caps.release('d');
    expect(caps.usage('s')).toEqual({ cpus: 0, memBytes: 0, reservations: 0 });
  });

  it('refuses a fractional byte count instead of rounding it', () => {
    const caps = new CapTracker();
    expect(() => caps.tryReserve('a', ['s'], { cpus: 0, memBytes: 0.4 })).toThrow(TypeError);
  });
});
