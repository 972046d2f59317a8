// The fast paths (no BigInt) must agree with the exact decimal path everywhere.
import fc from 'fast-check';
import { parseMillicores } from 'scaler-primitives/resources';
import { describe, expect, it } from 'vitest';
import {
  decimalOfDigits,
  decimalOfNumber,
  MAX_MILLICORES,
  millicoresOf,
} from '../../src/resources/decimal.js';
import { coresToMillicores } from '../../src/resources/quantity.js';

describe('fast paths agree with the exact path', () => {
  it('coresToMillicores for random doubles and exact millicore values', () => {
    fc.assert(
      fc.property(
        fc.oneof(
          fc.double({ min: 0, max: 1e11, noNaN: true }),
          fc.double({ min: 1e11, max: 1e13, noNaN: true }),
          fc.integer({ min: 0, max: MAX_MILLICORES }).map((m) => m / 1000),
          fc.constantFrom(
            MAX_MILLICORES / 1000,
            (MAX_MILLICORES - 1) / 1000,
            (MAX_MILLICORES + 1) / 1000,
            0.1 + 0.2,
            1e-10,
          ),
          fc.integer({ min: 0, max: 1_000_000 }).map((m) => m / 1e6),
        ),
        (cores) => {
          const exact = millicoresOf(decimalOfNumber(cores));
          if (exact === undefined) expect(() => coresToMillicores(cores)).toThrow(TypeError);
          else expect(coresToMillicores(cores)).toBe(exact);
        },
      ),
      { numRuns: 5000 },
    );
  });

  it('parseMillicores for random binary-grammar strings', () => {
    fc.assert(
      fc.property(
        fc.stringMatching(/^\d{1,10}$/),
        fc.stringMatching(/^\d{0,5}$/),
        fc.boolean(),
        (whole, fraction, milli) => {
          if (milli) {
            expect(parseMillicores(`${whole}m`)).toBe(Number(whole));
            return;
          }
          const text = fraction === '' ? whole : `${whole}.${fraction}`;
          expect(parseMillicores(text)).toBe(millicoresOf(decimalOfDigits(whole, fraction)));
        },
      ),
      { numRuns: 5000 },
    );
  });
});
