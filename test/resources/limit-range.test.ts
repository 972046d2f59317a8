import {
  checkLimitRange,
  limitRangeDefaults,
  limitRangeSchema,
  resolveResources,
} from 'scaler-primitives/resources';
import { describe, expect, it } from 'vitest';
import { isInvalidInputError } from '../../src/errors/input.js';

const policy = limitRangeSchema().parse({
  cpus: { min: '250m', max: 4, maxLimitRequestRatio: 2, defaultRequest: '500m', default: 1 },
  memory: { max: '8Gi', defaultRequest: '1Gi' },
  'nvidia.com/gpu': { max: 1 },
});

function resolve(job: object) {
  return resolveResources([job as never, limitRangeDefaults(policy)], ['job', 'limitRange']);
}

describe('LimitRange-like policy', () => {
  it('fills defaults as a layer and admits a job inside the range', () => {
    const r = resolve({});
    expect(r.requests).toEqual({ cpus: 0.5, memBytes: 1024 ** 3 });
    expect(r.limits.cpus).toBe(1);
    expect(checkLimitRange(policy, r)).toEqual({ ok: true });
  });

  it.each([
    [{ requests: { cpus: '100m' } }, 'cpus', 'min', 'requests'],
    [{ limits: { cpus: 5 } }, 'cpus', 'max', 'requests'],
    [{ requests: { cpus: 1 }, limits: { cpus: 3 } }, 'cpus', 'maxLimitRequestRatio', 'limits'],
    [{ requests: { cpus: 1, memory: '9Gi' } }, 'memory', 'max', 'requests'],
    [{ requests: { cpus: 1, 'nvidia.com/gpu': 2 } }, 'nvidia.com/gpu', 'max', 'requests'],
  ])('refuses %j with the rule that refused it', (job, resource, rule, side) => {
    const result = checkLimitRange(policy, resolve(job));
    expect(result).toMatchObject({ ok: false, resource, rule, side });
    expect(result.ok ? '' : result.message).toContain(rule);
  });

  it.each([
    [{ cpus: { min: 1, defaultRequest: '500m' } }, 'below min'],
    [{ cpus: { max: 1, default: 2 } }, 'above max'],
    [{ cpus: { defaultRequest: 2, default: 1 } }, 'above default'],
    [{ cpus: { maxLimitRequestRatio: 2, defaultRequest: 1, default: 3 } }, 'times'],
    [{ cpus: { maxLimitRequestRatio: 0.5 } }, 'below 1'],
    [{ memory: { min: '2Gi', max: '1Gi' } }, 'min'],
  ])('a policy whose defaults break its own range is a config error: %j', (raw, fragment) => {
    const result = limitRangeSchema().safeParse(raw);
    expect(result.success).toBe(false);
    expect(result.error!.issues.map((i) => i.message).join(' ')).toContain(fragment);
  });

  it('refuses unknown rules and resources', () => {
    expect(limitRangeSchema().safeParse({ cpus: { maximum: 1 } }).success).toBe(false);
    expect(limitRangeSchema().safeParse({ gpu: { max: 1 } }).success).toBe(false);
    expect(limitRangeSchema().safeParse({ 'nvidia.com/gpu': { max: 0.5 } }).success).toBe(false);
  });

  it('checkLimitRange validates a policy it is handed directly', () => {
    let error: unknown;
    try {
      checkLimitRange({ cpus: { min: 2, max: 1 } }, resolve({}));
    } catch (e) {
      error = e;
    }
    expect(isInvalidInputError(error)).toBe(true);
  });
});
