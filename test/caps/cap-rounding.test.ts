// Issue 11, "Numbers": the cap tracker counts a sub-millicore request as a whole
// millicore and rounds a fractional cap down.
import { describe, expect, it } from 'vitest';
import { CapTracker } from '../../src/caps/index.js';

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

  it('refuses a fractional byte count instead of rounding it', () => {
    const caps = new CapTracker();
    expect(() => caps.tryReserve('a', ['s'], { cpus: 0, memBytes: 0.4 })).toThrow(TypeError);
  });
});
