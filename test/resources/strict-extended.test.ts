import {
  isExtendedResourceName,
  parseExtendedCount,
  resolveResources,
  resourceCapSchema,
  resourceRequestSchema,
  resourceSpecSchema,
} from 'scaler-primitives/resources';
import { describe, expect, it } from 'vitest';
import { isInvalidInputError } from '../../src/errors/input.js';
import { isResourceParseError } from '../../src/errors/resources.js';
import {
  MAX_EXTENDED_NAME_LENGTH,
  validateExtendedResourceName,
} from '../../src/resources/names.js';
import { mirrorRequestsLimits } from '../../src/resources/resolve.js';

function caught(fn: () => unknown): Error {
  try {
    fn();
  } catch (error) {
    return error as Error;
  }
  throw new Error('expected a throw');
}

describe('strict resource declarations', () => {
  it('refuses a typo at the top, naming it, the accepted keys and the nearest', () => {
    const error = caught(() => resolveResources([{ reqeusts: { cpus: 2 } } as never]));
    expect(isInvalidInputError(error)).toBe(true);
    expect(error.message).toContain('"reqeusts"');
    expect(error.message).toContain('did you mean "requests"?');
    expect(error.message).toContain('Accepted keys: requests, limits, cpus, memory');
  });

  it('refuses a typo inside a side', () => {
    const error = caught(() => resolveResources([{ requests: { cpu: 2 } } as never]));
    expect(error.message).toContain('did you mean "cpus"?');
    expect(error.message).toContain('job requests');
  });

  it('refuses a typo in a lower layer even when a higher layer declares everything', () => {
    const error = caught(() =>
      resolveResources([{ requests: { cpus: 1, memory: 1 } }, undefined, { limtis: {} } as never]),
    );
    expect(error.message).toContain('did you mean "limits"?');
    expect(error.message).toContain('scaler resources');
  });

  it('reads the flat form as both sides, and refuses mixing it with the nested form', () => {
    const r = resolveResources([{ cpus: 2, memory: '1Gi' } as never]);
    expect(r.requests).toEqual({ cpus: 2, memBytes: 1024 ** 3 });
    expect(r.limits).toEqual({ cpus: 2, memBytes: 1024 ** 3 });
    const error = caught(() => resolveResources([{ requests: { cpus: 1 }, memory: 1 } as never]));
    expect(error.message).toContain('mixes the flat form');
  });

  it('the schema refuses the same things with paths', () => {
    const result = resourceRequestSchema.safeParse({ requests: { cpus: 1, memroy: '1Gi' } });
    expect(result.success).toBe(false);
    expect(result.error!.issues[0]!.path).toEqual(['requests', 'memroy']);
    expect(result.error!.issues[0]!.message).toContain('did you mean "memory"?');
    expect(resourceSpecSchema.safeParse({ cpus: 1, gpu: 1 }).success).toBe(false);
  });
});

describe('extended resources', () => {
  it.each(['nvidia.com/gpu', 'example.com/fpga', 'a.b-c.io/x_y.z-1'])('accepts %j', (name) => {
    expect(isExtendedResourceName(name)).toBe(true);
    expect(validateExtendedResourceName(name)).toBe(name);
  });

  it.each([
    ['gpu', 'no domain prefix'],
    ['/gpu', 'prefix'],
    ['Nvidia.com/gpu', 'prefix'],
    ['nvidia.com/', 'name after'],
    ['nvidia.com/-gpu', 'name after'],
    ['kubernetes.io/gpu', 'reserved'],
    ['x.kubernetes.io/gpu', 'reserved'],
    [`nvidia.com/${'g'.repeat(64)}`, 'name after'],
    [`${'a.'.repeat(160)}com/gpu`, 'longer than'],
    [`${'a'.repeat(64)}.com/gpu`, 'prefix'],
  ])('refuses %j (%s)', (name, reason) => {
    const error = caught(() => validateExtendedResourceName(name));
    expect(isInvalidInputError(error)).toBe(true);
    expect(error.message).toContain(reason);
    expect(error.message.length).toBeLessThan(400);
  });

  it('MAX_EXTENDED_NAME_LENGTH is the Kubernetes qualified-name bound', () => {
    expect(MAX_EXTENDED_NAME_LENGTH).toBe(253 + 1 + 63);
  });

  it.each([
    [0, 0],
    [2, 2],
    ['1', 1],
    ['1k', 1000],
    ['+3', 3],
    ['2.0', 2],
  ] as const)('counts %j as %d', (value, count) => {
    expect(parseExtendedCount('nvidia.com/gpu', value)).toBe(count);
  });

  it.each([0.5, '0.5', '500m', -1, '-1', Number.NaN, 2 ** 53, '1e20', 'x'])(
    'refuses %j: whole counts only',
    (value) => {
      const error = caught(() => parseExtendedCount('nvidia.com/gpu', value));
      expect(isResourceParseError(error)).toBe(true);
      expect(error.message).toContain('nvidia.com/gpu');
    },
  );

  it('mirrors one side to the other and resolves through layers', () => {
    expect(mirrorRequestsLimits({ limits: { 'nvidia.com/gpu': 1 } })).toEqual({
      requests: { 'nvidia.com/gpu': 1 },
      limits: { 'nvidia.com/gpu': 1 },
    });
    const r = resolveResources([
      { requests: { cpus: 1 } },
      { limits: { 'nvidia.com/gpu': '2' } },
      undefined,
      { requests: { 'nvidia.com/gpu': 1, 'example.com/fpga': 1 } },
    ]);
    expect(r.requests.extended).toEqual({ 'nvidia.com/gpu': 2, 'example.com/fpga': 1 });
    expect(r.limits.extended).toEqual(r.requests.extended);
    expect(r.provenance.requests.extended).toEqual({
      'nvidia.com/gpu': 'labelSet',
      'example.com/fpga': 'global',
    });
  });

  it('refuses a request that differs from its limit, as Kubernetes does', () => {
    const error = caught(() =>
      resolveResources([{ requests: { 'nvidia.com/gpu': 1 }, limits: { 'nvidia.com/gpu': 2 } }]),
    );
    expect(isResourceParseError(error)).toBe(true);
    expect(error.message).toContain('must equal its limit');
  });

  it('leaves `extended` absent when no layer declares one', () => {
    const r = resolveResources([{ requests: { cpus: 1 } }]);
    expect('extended' in r.requests).toBe(false);
  });

  it('refuses an invalid extended name used as a key', () => {
    const error = caught(() => resolveResources([{ requests: { 'Nvidia.com/gpu': 1 } }]));
    expect(isInvalidInputError(error)).toBe(true);
    expect(resourceSpecSchema.parse({ 'nvidia.com/gpu': '1' })).toEqual({ 'nvidia.com/gpu': 1 });
  });
});

describe('resourceCapSchema with extended resources and agents', () => {
  it('parses maxExtended, provides and maxAgents', () => {
    expect(
      resourceCapSchema.parse({
        maxCpu: '8',
        maxExtended: { 'nvidia.com/gpu': '4' },
        provides: ['example.com/scratch'],
        maxAgents: 10,
      }),
    ).toEqual({
      maxCpu: 8,
      maxExtended: { 'nvidia.com/gpu': 4 },
      provides: ['example.com/scratch'],
      maxAgents: 10,
    });
  });

  it.each([
    [{ maxExtended: { gpu: 1 } }, 'key'],
    [{ maxExtended: { 'nvidia.com/gpu': 0.5 } }, 'whole'],
    [{ maxAgents: 1.5 }, ''],
    [{ maxGpu: 1 }, ''],
    [{ maxExtended: { 'a.io/x': 1 }, provides: ['a.io/x'] }, 'give one'],
  ])('refuses %j', (cap, fragment) => {
    const result = resourceCapSchema.safeParse(cap);
    expect(result.success).toBe(false);
    expect(result.error!.issues.map((i) => i.message).join(' ')).toContain(fragment);
  });
});
