// The edges of what a quantity may be: a leading `+` (as Kubernetes reads it) and
// the largest CPU amount that a number of cores can carry to the millicore.
import fc from 'fast-check';
import {
  formatCpu,
  parseCpu,
  parseMemory,
  parseMillicores,
  resourceSchemas,
} from 'scaler-primitives/resources';
import { describe, expect, it } from 'vitest';
import { isResourceParseError, type ResourceParseError } from '../../src/errors/resources.js';
import { checkFit, sumRows } from '../../src/ledger/document/fit.js';
import type { ReservationRow } from '../../src/ledger/types.js';
import { MAX_MILLICORES } from '../../src/resources/decimal.js';
import { capToMillicores, coresToMillicores, MAX_CPU_CORES } from '../../src/resources/quantity.js';

const k8s = { convention: 'kubernetes' } as const;

function refusal(fn: () => unknown): ResourceParseError {
  try {
    fn();
  } catch (error) {
    expect(isResourceParseError(error)).toBe(true);
    return error as ResourceParseError;
  }
  throw new Error('expected a refusal');
}

describe('a leading + is read as Kubernetes reads it, in both conventions', () => {
  it.each([
    ['+2', 2000, '2'],
    ['+1.5', 1500, '1.5'],
    ['+.5', 500, '.5'],
    ['+500m', 500, '500m'],
    ['+0', 0, '0'],
  ])('CPU %j is %d millicores, as %j', (text, milli, plain) => {
    expect(parseMillicores(text)).toBe(milli);
    expect(parseMillicores(text, k8s)).toBe(milli);
    expect(parseMillicores(text)).toBe(parseMillicores(plain));
  });

  it.each([
    ['+8Gi', 8 * 1024 ** 3],
    ['+1024', 1024],
    ['+2g', 2 * 1024 ** 3],
    ['+.5Ki', 512],
  ])('memory %j is %d bytes (binary)', (text, bytes) => {
    expect(parseMemory(text)).toBe(bytes);
  });

  it('memory with + in the kubernetes convention', () => {
    expect(parseMemory('+8Gi', k8s)).toBe(8 * 1024 ** 3);
    expect(parseMemory('+500M', k8s)).toBe(500_000_000);
    expect(parseMemory('+1e3', k8s)).toBe(1000);
  });

  it('the schemas and resolved layers take it too', () => {
    const { request } = resourceSchemas();
    expect(request.parse({ cpus: '+2', memory: '+1Gi' })).toEqual({
      requests: { cpus: 2, memory: 1024 ** 3 },
      limits: { cpus: 2, memory: 1024 ** 3 },
    });
  });

  // One sign, then a number: what Kubernetes refuses, and what the binary grammar never reads.
  it.each([
    ['++1', 'binary'],
    ['+-1', 'binary'],
    ['+', 'binary'],
    ['+ 1', 'binary'],
    ['1+', 'binary'],
    ['+1.', 'binary'],
    ['+1e3', 'binary'],
    ['++1', 'kubernetes'],
    ['+-1', 'kubernetes'],
    ['+ 1', 'kubernetes'],
  ] as const)('refuses %j (%s)', (text, convention) => {
    expect(refusal(() => parseCpu(text, { convention })).message).toContain('Invalid CPU quantity');
    expect(refusal(() => parseMemory(text, { convention })).message).toContain(
      'Invalid memory quantity',
    );
  });

  it('hints still read the number after the sign', () => {
    expect(refusal(() => parseMemory('+8GB')).message).toContain('did you mean "8Gi"?');
    expect(refusal(() => parseCpu('+500M')).message).toContain('lower-case m');
    expect(refusal(() => parseCpu('+1k')).message).toContain('convention: "kubernetes"');
  });
});

describe('CPU is counted up to 2^43 cores, where cores still carry every millicore', () => {
  const MAX = 2 ** 43;

  it('the bound is 2^43 cores, below Number.MAX_SAFE_INTEGER millicores', () => {
    expect(MAX_CPU_CORES).toBe(MAX);
    expect(MAX_MILLICORES).toBe(MAX * 1000);
    expect(MAX_MILLICORES).toBeLessThan(Number.MAX_SAFE_INTEGER);
  });

  it('accepts far more than 10^12 cores, up to the bound, in every form', () => {
    expect(parseCpu('5000000000000')).toBe(5e12);
    expect(parseMillicores('5T', k8s)).toBe(5e15);
    expect(parseMillicores('8796093022208')).toBe(MAX_MILLICORES);
    expect(parseMillicores(`${MAX_MILLICORES}m`)).toBe(MAX_MILLICORES);
    expect(parseMillicores('8796093022208', k8s)).toBe(MAX_MILLICORES);
    expect(parseMillicores(MAX)).toBe(MAX_MILLICORES);
    expect(parseMillicores('8796093022207.999')).toBe(MAX_MILLICORES - 1);
    expect(parseCpu('8796093022207.999')).toBe(8796093022207.999);
    expect(formatCpu(MAX)).toBe('8796093022208');
    expect(formatCpu(MAX, k8s)).toBe('8796093022208');
    expect(formatCpu(8796093022207.999)).toBe('8796093022207.999');
  });

  it('refuses one millicore more with a ResourceParseError saying why', () => {
    for (const input of [
      '8796093022208.001',
      '8796093022208001m',
      '9T',
      '1P',
      '1e13',
      MAX + 0.002,
      Number.MAX_SAFE_INTEGER,
    ]) {
      const convention = typeof input === 'string' && /[TPe]/.test(input) ? 'kubernetes' : 'binary';
      const error = refusal(() => parseCpu(input, { convention }));
      expect(error.kind).toBe('cpu');
      expect(error.value).toBe(input);
      expect(error.message).toContain('too large');
      expect(error.message).toContain('8796093022208 cores');
      expect(error.message).toContain('cannot hold every millicore');
    }
  });

  it('past the bound a number of cores would not carry its millicores (why it is the bound)', () => {
    // The double nearest to 8796093022208.001 prints as ...208.002: one millicore more.
    expect(String((MAX_MILLICORES + 1) / 1000)).toBe('8796093022208.002');
    // Below it, doubles are 2^-10 apart (< 1 millicore): every millicore keeps its own number.
    expect(String((MAX_MILLICORES - 1) / 1000)).toBe('8796093022207.999');
  });

  it('every millicore count up to the bound survives cores -> millicores', () => {
    fc.assert(
      fc.property(
        fc.oneof(
          fc.integer({ min: 0, max: MAX_MILLICORES }),
          fc.integer({ min: MAX_MILLICORES - 100_000, max: MAX_MILLICORES }),
          // Around each power of two where the spacing of doubles changes.
          fc
            .tuple(fc.integer({ min: 30, max: 42 }), fc.integer({ min: -50_000, max: 50_000 }))
            .map(([p, d]) => Math.min(MAX_MILLICORES, Math.max(0, 2 ** p * 1000 + d))),
        ),
        (milli) => {
          const cores = milli / 1000;
          expect(coresToMillicores(cores)).toBe(milli);
          expect(parseMillicores(cores)).toBe(milli);
          expect(parseMillicores(formatCpu(cores))).toBe(milli);
          expect(parseMillicores(formatCpu(cores, k8s), k8s)).toBe(milli);
        },
      ),
      { numRuns: 3000 },
    );
  });

  it('a cap past the bound counts as the bound; caps and rows stay exact integers', () => {
    expect(capToMillicores(1e20)).toBe(MAX_MILLICORES);
    expect(capToMillicores(MAX)).toBe(MAX_MILLICORES);
    expect(capToMillicores(8796093022207.999)).toBe(MAX_MILLICORES - 1);
  });
});

describe('pool sums at the bound', () => {
  function row(agentId: string, cpus: number): ReservationRow {
    return {
      instanceId: 'i',
      pid: 1,
      bootId: 'b',
      agentId,
      cpus,
      memBytes: 0,
      reservedAt: 0,
    };
  }
  const half = 4398046511104; // 2^42 cores

  it('two rows of 2^42 cores fill a cap of 2^43 exactly: one millicore more does not fit', () => {
    const rows = [row('a', half), row('b', half - 0.001)];
    const cap = { maxCpu: MAX_CPU_CORES };
    expect(sumRows(rows).cpus).toBe(MAX_CPU_CORES - 0.001);
    expect(checkFit('p', rows, cap, { cpus: 0.001, memBytes: 0 })).toEqual({ ok: true });
    expect(checkFit('p', rows, cap, { cpus: 0.002, memBytes: 0 })).toMatchObject({
      ok: false,
      dimension: 'cpu',
      requested: 0.002,
      used: MAX_CPU_CORES - 0.001,
      max: MAX_CPU_CORES,
      neverFits: false,
    });
  });

  it('rows whose sum passes 2^53 millicores still never fit a cap (every cap is below 2^53)', () => {
    // A row written by another writer beyond the bound reads as more than any cap.
    const rows = [row('a', MAX_CPU_CORES), row('b', MAX_CPU_CORES), row('c', 1e300)];
    const result = checkFit('p', rows, { maxCpu: 1e300 }, { cpus: 0, memBytes: 0 });
    expect(result).toMatchObject({ ok: false, dimension: 'cpu' });
    expect(checkFit('p', rows.slice(0, 1), { maxCpu: 1e300 }, { cpus: 0, memBytes: 0 })).toEqual({
      ok: true,
    });
  });
});
