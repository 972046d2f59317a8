import fc from 'fast-check';
import {
  formatCpu,
  formatMemory,
  parseCpu,
  parseMemory,
  parseMillicores,
} from 'scaler-primitives/resources';
import { describe, expect, it } from 'vitest';
import { isResourceParseError } from '../../src/errors/resources.js';
import { MAX_MILLICORES, MAX_QUANTITY_LENGTH } from '../../src/resources/decimal.js';
import {
  CPU_STRING_CASES,
  INVALID_CASES,
  MEMORY_STRING_CASES,
  PARSE_CASES,
  SAME_VALUE_CASES,
  ZERO_CASES,
} from './kubernetes-cases.js';

const k8s = { convention: 'kubernetes' } as const;

// The oracle: ceil of an exact rational, written independently of src/.
function ceilRational(numerator: bigint, denominator: bigint): bigint {
  return (numerator + denominator - 1n) / denominator;
}
function ceilOf(coefficient: bigint, exponent: number): bigint {
  return exponent >= 0
    ? coefficient * 10n ** BigInt(exponent)
    : ceilRational(coefficient, 10n ** BigInt(-exponent));
}

function refusal(fn: () => unknown): string {
  try {
    fn();
  } catch (error) {
    expect(isResourceParseError(error)).toBe(true);
    return (error as Error).message;
  }
  throw new Error('expected a refusal');
}

describe('kubernetes convention: the apimachinery ParseQuantity table', () => {
  for (const [input, coefficient, exponent] of PARSE_CASES) {
    const milli = ceilOf(coefficient, exponent + 3);
    const bytes = ceilOf(coefficient, exponent);
    it(`${input}: MilliValue() ${milli}, Value() ${bytes}, also with + and -`, () => {
      for (const text of [input, `+${input}`]) {
        if (milli <= BigInt(MAX_MILLICORES)) {
          expect(parseMillicores(text, k8s)).toBe(Number(milli));
          expect(parseCpu(text, k8s)).toBe(Number(milli) / 1000);
        } else {
          expect(refusal(() => parseCpu(text, k8s))).toContain('too large');
        }
        if (bytes <= BigInt(Number.MAX_SAFE_INTEGER)) {
          expect(parseMemory(text, k8s)).toBe(Number(bytes));
        } else {
          expect(refusal(() => parseMemory(text, k8s))).toContain('too large');
        }
      }
      if (coefficient === 0n) {
        expect(parseCpu(`-${input}`, k8s)).toBe(0);
      } else {
        expect(refusal(() => parseCpu(`-${input}`, k8s))).toContain('cannot be negative');
        expect(refusal(() => parseMemory(`-${input}`, k8s))).toContain('cannot be negative');
      }
    });
  }

  it.each(ZERO_CASES)('%j is zero, as in Kubernetes', (input) => {
    expect(parseCpu(input, k8s)).toBe(0);
    expect(parseMemory(input, k8s)).toBe(0);
  });

  it.each(INVALID_CASES)('refuses %j, as Kubernetes does', (input) => {
    expect(refusal(() => parseCpu(input, k8s))).toContain('Expected a Kubernetes quantity');
    expect(refusal(() => parseMemory(input, k8s))).toContain('Expected a Kubernetes quantity');
  });

  it.each(SAME_VALUE_CASES)('%j is the same value as %j, with or without +', (input, same) => {
    for (const text of [input, `+${input}`]) {
      const milli = tryParse(() => parseMillicores(text, k8s));
      expect(milli).toBe(tryParse(() => parseMillicores(same, k8s)));
      const bytes = tryParse(() => parseMemory(text, k8s));
      expect(bytes).toBe(tryParse(() => parseMemory(same, k8s)));
    }
  });

  it('reads the strings the issue found misread, as Kubernetes does', () => {
    expect(parseMillicores('1u', k8s)).toBe(1);
    expect(parseMillicores('1080n', k8s)).toBe(1);
    expect(parseMillicores('3k', k8s)).toBe(3_000_000);
    expect(parseMillicores('1Ki', k8s)).toBe(1_024_000);
    expect(parseMillicores('1G', k8s)).toBe(1e12);
    expect(parseMillicores('1e3', k8s)).toBe(1_000_000);
    expect(parseMillicores('+1', k8s)).toBe(1000);
    expect(parseMillicores('0.0000000001', k8s)).toBe(1);
    expect(parseMillicores('0.0010000001', k8s)).toBe(2);
    expect(parseMemory('1.3E+6', k8s)).toBe(1_300_000);
    expect(parseMemory('1.', k8s)).toBe(1);
    expect(parseMemory('1.G', k8s)).toBe(1e9);
    expect(parseMemory('500m', k8s)).toBe(1);
  });

  it('refuses an exponent Kubernetes would wrap, saying so', () => {
    expect(refusal(() => parseCpu('1e4294967296', k8s))).toContain('32-bit');
    expect(refusal(() => parseMemory('1e-2147483649', k8s))).toContain('32-bit');
    // Inside the range, a tiny positive value rounds up; a huge one is too large.
    expect(parseMillicores('1e-2147483648', k8s)).toBe(1);
    expect(refusal(() => parseCpu('1e2147483647', k8s))).toContain('too large');
  });
});

describe('kubernetes convention: formatting is Quantity.String()', () => {
  it.each(CPU_STRING_CASES)('%d millicores print as %j', (milli, text) => {
    expect(formatCpu(milli / 1000, k8s)).toBe(text);
    expect(parseMillicores(text, k8s)).toBe(milli);
  });

  it.each(MEMORY_STRING_CASES)('%d bytes print as %j', (bytes, text) => {
    expect(formatMemory(bytes, k8s)).toBe(text);
    expect(parseMemory(text, k8s)).toBe(bytes);
  });
});

const suffixes = [
  '',
  'n',
  'u',
  'm',
  'k',
  'M',
  'G',
  'T',
  'P',
  'E',
  'Ki',
  'Mi',
  'Gi',
  'Ti',
  'Pi',
  'Ei',
];
const quantityString = fc
  .record({
    sign: fc.constantFrom('', '+'),
    zeros: fc.constantFrom('', '0', '00'),
    whole: fc.stringMatching(/^\d{0,8}$/),
    dot: fc.boolean(),
    fraction: fc.stringMatching(/^\d{0,8}$/),
    suffix: fc.oneof(
      fc.constantFrom(...suffixes),
      fc
        .tuple(
          fc.constantFrom('e', 'E'),
          fc.constantFrom('', '+', '-'),
          fc.integer({ min: 0, max: 25 }),
        )
        .map(([e, s, n]) => `${e}${s}${n}`),
    ),
  })
  .map((r) => `${r.sign}${r.zeros}${r.whole}${r.dot ? `.${r.fraction}` : ''}${r.suffix}`)
  // The one string of this shape Kubernetes refuses.
  .filter((text) => text !== '');

function tryParse<T>(fn: () => T): T | undefined {
  try {
    return fn();
  } catch (error) {
    if (isResourceParseError(error) && error.message.includes('too large')) return undefined;
    throw error;
  }
}

describe('kubernetes convention: properties', () => {
  it('parse -> format -> parse is the identity (CPU and memory)', () => {
    fc.assert(
      fc.property(quantityString, (text) => {
        const milli = tryParse(() => parseMillicores(text, k8s));
        if (milli !== undefined) {
          expect(parseMillicores(formatCpu(milli / 1000, k8s), k8s)).toBe(milli);
        }
        const bytes = tryParse(() => parseMemory(text, k8s));
        if (bytes !== undefined) {
          expect(parseMemory(formatMemory(bytes, k8s), k8s)).toBe(bytes);
        }
      }),
      { numRuns: 2000 },
    );
  });

  it('rounds every decimal to the ceil of its exact rational value', () => {
    fc.assert(
      fc.property(
        fc.bigInt({ min: 0n, max: 10n ** 18n }),
        fc.integer({ min: 0, max: 18 }),
        fc.constantFrom(['', 0], ['m', -3], ['u', -6], ['n', -9], ['k', 3]),
        (digits, point, [suffix, power]) => {
          const raw = digits.toString().padStart(point + 1, '0');
          const text = `${raw.slice(0, raw.length - point)}.${raw.slice(raw.length - point)}${suffix}`;
          const exponent = (power as number) - point;
          const milli = ceilOf(digits, exponent + 3);
          const bytes = ceilOf(digits, exponent);
          if (milli <= BigInt(MAX_MILLICORES)) {
            expect(parseMillicores(text, k8s)).toBe(Number(milli));
            // The binary grammar reads plain decimals (without a trailing dot) the same way.
            if (suffix === '' && point > 0) expect(parseMillicores(text)).toBe(Number(milli));
          }
          if (bytes <= BigInt(Number.MAX_SAFE_INTEGER)) {
            expect(parseMemory(text, k8s)).toBe(Number(bytes));
          }
        },
      ),
      { numRuns: 2000 },
    );
  });

  it('refuses any string longer than MAX_QUANTITY_LENGTH before reading it', () => {
    const long = '1'.repeat(10_000_000);
    for (const convention of ['binary', 'kubernetes'] as const) {
      const cpu = refusal(() => parseCpu(long, { convention }));
      const memory = refusal(() => parseMemory(long, { convention }));
      expect(cpu).toContain(`longer than ${MAX_QUANTITY_LENGTH} characters`);
      expect(memory).toContain('10000000 characters');
      expect(cpu.length).toBeLessThan(1000);
    }
    const exact = `${'0'.repeat(MAX_QUANTITY_LENGTH - 1)}1`;
    expect(parseMemory(exact, k8s)).toBe(1);
    expect(refusal(() => parseMemory(`0${exact}`, k8s))).toContain('longer than');
  });
});
