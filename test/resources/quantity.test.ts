import fc from 'fast-check';
import { formatCpu, formatMemory, parseCpu, parseMemory } from 'scaler-primitives/resources';
import { describe, expect, it } from 'vitest';
import { isResourceParseError, ResourceParseError } from '../../src/errors/resources.js';
import { MAX_CPU_CORES } from '../../src/resources/quantity.js';

const Gi = 1024 ** 3;
const Mi = 1024 ** 2;

describe('parseCpu', () => {
  it.each([
    [0, 0],
    [2, 2],
    [1.5, 1.5],
    ['2', 2],
    ['1.5', 1.5],
    ['.5', 0.5],
    ['0', 0],
    ['500m', 0.5],
    ['1500m', 1.5],
    ['0m', 0],
    ['1m', 0.001],
    // A number is the decimal it prints as; float noise in a sum is kept and rounds up.
    [0.3, 0.3],
    [0.1 + 0.2, 0.301],
    [1e-10, 0.001],
    ['0.0000000001', 0.001],
    ['0.0010000001', 0.002],
    [0.0001, 0.001],
    ['0.0005', 0.001],
  ] as const)('parses %j as %d cores', (input, cores) => {
    expect(parseCpu(input)).toBe(cores);
  });

  it.each([
    [-1, 'must be finite and >= 0'],
    [Number.NaN, 'must be finite and >= 0'],
    [Number.POSITIVE_INFINITY, 'must be finite and >= 0'],
    ['', 'Invalid CPU quantity ""'],
    ['1.5.5', '"1.5.5"'],
    ['2 cores', '"2 cores"'],
    ['500M', 'lower-case m'],
    ['-1', '"-1"'],
    ['1.5m', 'whole number'],
    [' 2', 'whitespace'],
    ['2.', '"2."'],
    ['1e3', '"1e3"'],
    [MAX_CPU_CORES * 10, 'too large'],
  ] as const)('refuses %j, naming it and the accepted forms', (input, fragment) => {
    let caught: unknown;
    try {
      parseCpu(input);
    } catch (error) {
      caught = error;
    }
    expect(caught).toBeInstanceOf(ResourceParseError);
    expect(isResourceParseError(caught)).toBe(true);
    const error = caught as ResourceParseError;
    expect(error.code).toBe('ERR_RESOURCE_PARSE');
    expect(error.kind).toBe('cpu');
    expect(error.value).toBe(input);
    expect(error.message).toContain(fragment);
    if (!fragment.includes('too large')) expect(error.message).toContain('"500m"');
  });

  it.each([null, undefined, {}, [], true])('throws TypeError for %j', (input) => {
    expect(() => parseCpu(input as never)).toThrow(TypeError);
  });
});

describe('parseMemory', () => {
  it.each([
    [0, 0],
    [1024, 1024],
    [1.2, 2],
    ['1024', 1024],
    ['8Gi', 8 * Gi],
    ['1.5Gi', 1.5 * Gi],
    ['1Ki', 1024],
    ['7Pi', 7 * 1024 ** 5],
    ['2g', 2 * Gi],
    ['2G', 2 * Gi],
    ['512m', 512 * Mi],
    ['512M', 512 * Mi],
    ['1k', 1024],
    ['1K', 1024],
    ['1t', 1024 ** 4],
    ['1P', 1024 ** 5],
    ['.5Ki', 512],
    ['0.1Gi', Math.ceil(0.1 * Gi)],
  ] as const)('binary: parses %j as %d bytes', (input, bytes) => {
    expect(parseMemory(input)).toBe(bytes);
  });

  it.each([
    ['1k', 1000],
    ['500M', 500_000_000],
    ['2G', 2_000_000_000],
    ['1T', 1e12],
    ['1P', 1e15],
    ['8Gi', 8 * Gi],
    ['1e9', 1e9],
    ['1E3', 1000],
    ['1.5e3', 1500],
    ['2', 2],
  ] as const)('kubernetes: parses %j as %d bytes', (input, bytes) => {
    expect(parseMemory(input, { convention: 'kubernetes' })).toBe(bytes);
  });

  it.each([
    ['8GB', 'did you mean "8Gi"?', 'binary'],
    ['8Gb', 'did you mean "8Gi"?', 'binary'],
    ['512mb', 'did you mean "512Mi"?', 'binary'],
    ['1.5.5', '"1.5.5"', 'binary'],
    ['-1', '>= 0', 'binary'],
    [-1, '>= 0', 'binary'],
    [Number.NaN, '>= 0', 'binary'],
    [Number.POSITIVE_INFINITY, '>= 0', 'binary'],
    ['', '""', 'binary'],
    ['8 Gi', '"8 Gi"', 'binary'],
    ['8gi', '"8Gi"', 'binary'],
    ['1e9', 'kubernetes convention', 'binary'],
    ['8Ki1', '"8Ki1"', 'binary'],
    ['8Ei', 'too large', 'binary'],
    ['1e', 'too large', 'binary'],
    ['8Pi', 'too large', 'binary'],
    [2 ** 60, 'too large', 'binary'],
    ['9007199254740992', 'too large', 'binary'],
    ['1K', '"1K"', 'kubernetes'],
    ['1g', '"1g"', 'kubernetes'],
    ['8GB', 'did you mean "8Gi"?', 'kubernetes'],
    ['1e99999', 'too large', 'kubernetes'],
  ] as const)('refuses %j (%s...) in the %s convention', (input, fragment, convention) => {
    let caught: unknown;
    try {
      parseMemory(input, { convention });
    } catch (error) {
      caught = error;
    }
    expect(isResourceParseError(caught)).toBe(true);
    const error = caught as ResourceParseError;
    expect(error.kind).toBe('memory');
    expect(error.value).toBe(input);
    expect(error.message).toContain(fragment);
    if (!fragment.includes('too large')) expect(error.message).toContain('Expected');
  });

  it('throws TypeError for a bad convention or a non-quantity', () => {
    expect(() => parseMemory('1', { convention: 'si' as never })).toThrow(TypeError);
    expect(() => parseMemory(null as never)).toThrow(TypeError);
  });
});

describe('formatCpu and formatMemory', () => {
  it.each([
    [0, '0'],
    [0.5, '500m'],
    [0.001, '1m'],
    [1.5, '1.5'],
    [2, '2'],
    [1.234, '1.234'],
  ])('formatCpu(%d) = %s', (cores, text) => {
    expect(formatCpu(cores)).toBe(text);
  });

  it.each([
    [0, '0'],
    [1000, '1000'],
    [1024, '1Ki'],
    [8 * Gi, '8Gi'],
    [1.5 * Gi, '1536Mi'],
    [1024 ** 5 * 3, '3Pi'],
    [1024 ** 5 * 7 + 1024 ** 4, '7169Ti'],
  ])('formatMemory(%d) = %s', (bytes, text) => {
    expect(formatMemory(bytes)).toBe(text);
  });

  it.each([-1, Number.NaN, 1.5, Number.POSITIVE_INFINITY, 2 ** 53])(
    'formatMemory refuses %j with a ResourceParseError (kind memory)',
    (bytes) => {
      let caught: unknown;
      try {
        formatMemory(bytes);
      } catch (error) {
        caught = error;
      }
      expect(caught).toBeInstanceOf(ResourceParseError);
      expect((caught as ResourceParseError).kind).toBe('memory');
      expect((caught as ResourceParseError).value).toBe(bytes);
      expect((caught as Error).message).toContain(String(bytes));
      expect((caught as Error).message).toContain('whole bytes');
    },
  );

  it.each([
    [-1, '>= 0'],
    [Number.NaN, '>= 0'],
    [Number.POSITIVE_INFINITY, '>= 0'],
    [MAX_CPU_CORES * 2, 'too large'],
  ])('formatCpu refuses %j with a ResourceParseError (kind cpu)', (cores, why) => {
    for (const convention of ['binary', 'kubernetes'] as const) {
      let caught: unknown;
      try {
        formatCpu(cores, { convention });
      } catch (error) {
        caught = error;
      }
      expect(caught).toBeInstanceOf(ResourceParseError);
      expect((caught as ResourceParseError).kind).toBe('cpu');
      expect((caught as ResourceParseError).value).toBe(cores);
      expect((caught as Error).message).toContain(why);
    }
  });

  it('keeps TypeError for an argument that is not a number at all', () => {
    expect(() => formatCpu('1' as never)).toThrow(TypeError);
    expect(() => formatMemory('1' as never)).toThrow(TypeError);
  });

  it('round-trips every millicore value through formatCpu and parseCpu', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 10_000_000 }), (milli) => {
        const cores = milli / 1000;
        expect(parseCpu(formatCpu(cores))).toBe(cores);
      }),
    );
  });

  it('round-trips every byte count through formatMemory and parseMemory', () => {
    fc.assert(
      fc.property(
        fc.oneof(
          fc.integer({ min: 0, max: Number.MAX_SAFE_INTEGER }),
          fc
            .tuple(fc.integer({ min: 1, max: 8191 }), fc.integer({ min: 0, max: 4 }))
            .map(([n, unit]) => n * 1024 ** unit),
        ),
        (bytes) => {
          const text = formatMemory(bytes);
          expect(parseMemory(text)).toBe(bytes);
          expect(parseMemory(text, { convention: 'kubernetes' })).toBe(bytes);
        },
      ),
    );
  });

  it('parses any canonical decimal CPU string to the millicore it names', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 1_000_000 }), (milli) => {
        expect(parseCpu(`${milli}m`)).toBe(milli / 1000);
        expect(parseCpu(String(milli / 1000))).toBe(milli / 1000);
      }),
    );
  });

  it('never returns a fraction or a negative from parseMemory', () => {
    fc.assert(
      fc.property(fc.double({ min: 0, max: 2 ** 50, noNaN: true }), (value) => {
        const bytes = parseMemory(value);
        expect(Number.isSafeInteger(bytes)).toBe(true);
        expect(bytes).toBeGreaterThanOrEqual(value);
        expect(bytes - 1).toBeLessThan(value);
      }),
    );
  });
});
