import fc from 'fast-check';
import { type ResourceRequest, resolveResources } from 'scaler-primitives/resources';
import { describe, expect, it } from 'vitest';
import type { ResourceConflictError } from '../../src/errors/resources.js';
import { isResourceConflictError, isResourceParseError } from '../../src/errors/resources.js';
import { mirrorRequestsLimits } from '../../src/resources/resolve.js';

const Gi = 1024 ** 3;

describe('mirrorRequestsLimits', () => {
  it('copies a value declared on one side only to the other, per dimension', () => {
    expect(mirrorRequestsLimits({ requests: { cpus: 2 }, limits: { memory: '4Gi' } })).toEqual({
      requests: { cpus: 2, memory: '4Gi' },
      limits: { cpus: 2, memory: '4Gi' },
    });
  });

  it('keeps both sides when both are declared', () => {
    const r = { requests: { cpus: 1 }, limits: { cpus: 2 } };
    expect(mirrorRequestsLimits(r)).toEqual(r);
  });

  it('does not modify its input and reads undefined as empty', () => {
    const input: ResourceRequest = { requests: { cpus: '1' } };
    mirrorRequestsLimits(input);
    expect(input).toEqual({ requests: { cpus: '1' } });
    expect(mirrorRequestsLimits(undefined)).toEqual({});
    expect(mirrorRequestsLimits({})).toEqual({});
  });

  it('throws TypeError for a non-object', () => {
    expect(() => mirrorRequestsLimits(3 as never)).toThrow(TypeError);
  });
});

describe('resolveResources', () => {
  it('takes, per dimension, the first layer that declares it and records where from', () => {
    const r = resolveResources([
      { requests: { cpus: '500m' } },
      undefined,
      { limits: { memory: '2Gi' } },
      { requests: { cpus: 8, memory: '16Gi' } },
    ]);
    expect(r.requests).toEqual({ cpus: 0.5, memBytes: 2 * Gi });
    expect(r.limits).toEqual({ cpus: 0.5, memBytes: 2 * Gi });
    expect(r.provenance).toEqual({
      requests: { cpus: 'job', memBytes: 'scaler' },
      limits: { cpus: 'job', memBytes: 'scaler' },
    });
  });

  it('requests are zero ("zero") and limits unset ("unset") when nothing declares a value', () => {
    const r = resolveResources([undefined, {}, undefined, undefined]);
    expect(r.requests).toEqual({ cpus: 0, memBytes: 0 });
    expect(r.limits).toEqual({});
    expect(r.provenance.requests.cpus).toBe('zero');
    expect(r.provenance.limits.memBytes).toBe('unset');
  });

  it('a job limit alone wins over a larger default request (no LimitRange surprise)', () => {
    // kubernetes#51430: a limit with a defaulted larger request is rejected there.
    const r = resolveResources([{ limits: { cpus: 1 } }, undefined, { requests: { cpus: 4 } }]);
    expect(r.requests.cpus).toBe(1);
    expect(r.limits.cpus).toBe(1);
  });

  it('refuses a request above its limit, naming the layers', () => {
    let caught: unknown;
    try {
      resolveResources([undefined, { requests: { memory: '4Gi' }, limits: { memory: '2Gi' } }]);
    } catch (error) {
      caught = error;
    }
    expect(isResourceConflictError(caught)).toBe(true);
    const error = caught as ResourceConflictError;
    expect(error.dimension).toBe('memBytes');
    expect(error.request).toBe(4 * Gi);
    expect(error.limit).toBe(2 * Gi);
    expect(error.requestLayer).toBe('labelSet');
    expect(error.limitLayer).toBe('labelSet');
    expect(error.message).toContain('labelSet');
  });

  it('names the layer and field of an invalid quantity', () => {
    expect(() => resolveResources([undefined, undefined, { requests: { cpus: 'x' } }])).toThrow(
      /scaler requests\.cpus: Invalid CPU quantity "x"/,
    );
    let caught: unknown;
    try {
      resolveResources([{ limits: { memory: '8GB' } }], ['mine']);
    } catch (error) {
      caught = error;
    }
    expect(isResourceParseError(caught)).toBe(true);
    expect((caught as Error).message).toMatch(/^mine limits\.memory: .*did you mean "8Gi"/);
  });

  it('uses custom names, falls back to layerN, and honours the memory convention', () => {
    const r = resolveResources([undefined, undefined, { requests: { memory: '1G' } }], ['a'], {
      convention: 'kubernetes',
    });
    expect(r.provenance.requests.memBytes).toBe('layer2');
    expect(r.requests.memBytes).toBe(1e9);
  });

  it('throws TypeError when layers is not an array', () => {
    expect(() => resolveResources({} as never)).toThrow(TypeError);
  });

  it('always yields requests <= limits, each from the first declaring layer', () => {
    const spec = fc.record(
      { cpus: fc.integer({ min: 0, max: 64_000 }).map((m) => m / 1000) },
      { requiredKeys: [] },
    );
    const layer = fc.option(fc.record({ requests: spec, limits: spec }, { requiredKeys: [] }), {
      nil: undefined,
    });
    fc.assert(
      fc.property(fc.array(layer, { maxLength: 5 }), (layers) => {
        let result: ReturnType<typeof resolveResources>;
        try {
          result = resolveResources(layers);
        } catch (error) {
          // Only a layer that itself declares request > limit may conflict.
          expect(isResourceConflictError(error)).toBe(true);
          return;
        }
        // A limit is positive or unset (absent), never 0.
        if (result.limits.cpus !== undefined) {
          expect(result.limits.cpus).toBeGreaterThan(0);
          expect(result.requests.cpus).toBeLessThanOrEqual(result.limits.cpus);
        }
        const first = layers.findIndex(
          (l) => l?.requests?.cpus !== undefined || l?.limits?.cpus !== undefined,
        );
        if (first === -1) {
          expect(result.provenance.requests.cpus).toBe('zero');
          expect(result.provenance.limits.cpus).toBe('unset');
          expect(result.limits.cpus).toBeUndefined();
        } else {
          const l = layers[first]!;
          expect(result.requests.cpus).toBe(l.requests?.cpus ?? l.limits?.cpus);
          const limit = l.limits?.cpus ?? l.requests?.cpus;
          expect(result.limits.cpus).toBe(limit === 0 ? undefined : limit);
        }
      }),
    );
  });
});

describe('resolveResources input checks', () => {
  it('throws TypeError for a layer that is not an object', () => {
    expect(() => resolveResources([null as never])).toThrow(/layer 0/);
  });
});
