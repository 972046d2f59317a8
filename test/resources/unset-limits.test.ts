// Issue 22: a limit no layer declares is unset (absent), not 0; the limit range
// reads it as unbounded, and the request side stays a request of nothing.

import {
  checkLimitRange,
  limitRangeDefaults,
  limitRangeSchema,
  type ResourceRequest,
  resolveResources,
} from 'scaler-primitives/resources';
import { describe, expect, it } from 'vitest';
import { isResourceConflictError, isResourceParseError } from '../../src/errors/resources.js';
import { MAX_CPU_LIMIT_CORES } from '../../src/resources/types.js';

const Gi = 1024 ** 3;

describe('unset limits', () => {
  it('a CPU-only declaration leaves the memory limit unset and the memory request 0', () => {
    const r = resolveResources([undefined, { requests: { cpus: '1500m' } }]);
    expect(r.requests).toEqual({ cpus: 1.5, memBytes: 0 });
    expect(r.limits).toEqual({ cpus: 1.5 });
    expect('memBytes' in r.limits).toBe(false);
    expect(r.provenance.requests.memBytes).toBe('zero');
    expect(r.provenance.limits.memBytes).toBe('unset');
  });

  it('a limit declared as 0 is unset too, with the layer that declared it', () => {
    const r = resolveResources([
      { limits: { memory: 0 } },
      undefined,
      { requests: { memory: '8Gi' } },
    ]);
    expect(r.limits).toEqual({});
    expect(r.requests.memBytes).toBe(0);
    expect(r.provenance.limits.memBytes).toBe('job');
    // The flat form (config layers) declares both sides at once.
    const flat = resolveResources([{ cpus: 0, memory: '0Gi' } as ResourceRequest]);
    expect(flat.limits).toEqual({});
    expect(flat.provenance.limits).toEqual({ cpus: 'job', memBytes: 'job' });
  });

  it('a request above a declared 0 limit is still a conflict (checked before unsetting)', () => {
    let caught: unknown;
    try {
      resolveResources([{ requests: { cpus: 2 }, limits: { cpus: 0 } }]);
    } catch (error) {
      caught = error;
    }
    expect(isResourceConflictError(caught)).toBe(true);
    expect((caught as Error).message).toContain('exceeds its limit 0');
  });

  it('refuses a CPU limit beyond what any cap can carry, naming the layer', () => {
    expect(resolveResources([{ limits: { cpus: MAX_CPU_LIMIT_CORES } }]).limits.cpus).toBe(
      214748.36,
    );
    let caught: unknown;
    try {
      resolveResources([undefined, { requests: { cpus: 300_000 } }]);
    } catch (error) {
      caught = error;
    }
    expect(isResourceParseError(caught)).toBe(true);
    expect((caught as Error).message).toMatch(/^labelSet limits\.cpus: .*300000 cores.*214748\.36/);
  });

  it('is not 0 for caps math: an unset limit does not shrink a request', () => {
    const r = resolveResources([{ requests: { memory: '2Gi' } }, { limits: { cpus: 4 } }]);
    expect(r.requests).toEqual({ cpus: 4, memBytes: 2 * Gi });
    expect(r.limits).toEqual({ cpus: 4, memBytes: 2 * Gi });
  });
});

describe('limit ranges and unset limits', () => {
  const maxOnly = limitRangeSchema().parse({ memory: { max: '8Gi' } });
  const minOnly = limitRangeSchema().parse({ memory: { min: '1Gi' } });
  const ratio = limitRangeSchema().parse({ cpus: { maxLimitRequestRatio: 2 } });

  it('max refuses an unset limit (unbounded), as Kubernetes LimitRanger does', () => {
    const result = checkLimitRange(maxOnly, resolveResources([{ requests: { cpus: 1 } }]));
    expect(result).toMatchObject({
      ok: false,
      resource: 'memory',
      rule: 'max',
      side: 'limits',
      value: Number.POSITIVE_INFINITY,
    });
    expect(result.ok ? '' : result.message).toMatch(/memory limit is unset.*`default`/);
  });

  it('max admits the same job once the policy has a default limit', () => {
    const withDefault = limitRangeSchema().parse({ memory: { max: '8Gi', default: '4Gi' } });
    const r = resolveResources([{ requests: { cpus: 1 } }, limitRangeDefaults(withDefault)]);
    expect(r.limits).toEqual({ cpus: 1, memBytes: 4 * Gi });
    expect(checkLimitRange(withDefault, r)).toEqual({ ok: true });
  });

  it('min judges the request (0 when undeclared), never the unset limit', () => {
    expect(checkLimitRange(minOnly, resolveResources([{ requests: { memory: '2Gi' } }]))).toEqual({
      ok: true,
    });
    expect(checkLimitRange(minOnly, resolveResources([{}]))).toMatchObject({
      ok: false,
      rule: 'min',
      side: 'requests',
      value: 0,
    });
  });

  it('a ratio refuses an unset limit', () => {
    expect(
      checkLimitRange(ratio, resolveResources([{ requests: { memory: '1Gi' } }])),
    ).toMatchObject({
      ok: false,
      resource: 'cpus',
      rule: 'maxLimitRequestRatio',
      value: Number.POSITIVE_INFINITY,
    });
    expect(checkLimitRange(ratio, resolveResources([{ requests: { cpus: 1 } }]))).toEqual({
      ok: true,
    });
  });
});
