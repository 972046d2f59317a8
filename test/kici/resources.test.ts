import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import fc from 'fast-check';
import { parseKiciMemory } from 'scaler-primitives/kici';
import { parseMemory } from 'scaler-primitives/resources';
import { describe, expect, it } from 'vitest';
import { isInvalidInputError } from '../../src/errors/input.js';
import { isResourceParseError } from '../../src/errors/resources.js';
import { fromKiciCap, fromKiciResources } from '../../src/kici/resources.js';
import { kiciPackageDir } from '../helpers/kici-ledger.js';

// kici 0.9.1's own parseMemoryString, cut from the published bundle at run time.
function kiciParseMemoryString(): (memory: string) => number {
  const bundle = readFileSync(join(kiciPackageDir(), 'dist', 'server.js'), 'utf8');
  const start = bundle.indexOf('function parseMemoryString(memory) {');
  if (start < 0) throw new Error('kici bundle: parseMemoryString not found');
  const end = bundle.indexOf('\n}\n', start);
  const source = bundle.slice(start, end + 2);
  return new Function(`${source}\nreturn parseMemoryString;`)() as (memory: string) => number;
}

const errorOf = (fn: () => unknown): unknown => {
  try {
    fn();
  } catch (error) {
    return error;
  }
  return undefined;
};

describe('parseKiciMemory', () => {
  it('reads kici’s forms with kici’s rounding', () => {
    expect(parseKiciMemory('512m')).toBe(512 * 2 ** 20);
    expect(parseKiciMemory('512 m')).toBe(512 * 2 ** 20);
    expect(parseKiciMemory('512\tM')).toBe(512 * 2 ** 20);
    expect(parseKiciMemory('2g')).toBe(2 * 2 ** 30);
    expect(parseKiciMemory('2G')).toBe(2 * 2 ** 30);
    expect(parseKiciMemory('1024k')).toBe(2 ** 20);
    expect(parseKiciMemory('1.5g')).toBe(1.5 * 2 ** 30);
    // Fractions round down as in kici, where parseMemory rounds up.
    expect(parseKiciMemory('0.3m')).toBe(314572);
    expect(parseMemory('0.3m')).toBe(314573);
    expect(parseKiciMemory(1000)).toBe(1000);
  });

  it('refuses what kici refuses, naming the value and the forms', () => {
    for (const bad of ['2gb', '2Gi', '2', ' 2g', '2g ', '-1g', '.5g', '2t', '', 'g']) {
      const error = errorOf(() => parseKiciMemory(bad));
      expect(isResourceParseError(error), bad).toBe(true);
      expect(String((error as Error).message)).toContain(JSON.stringify(bad));
      expect(String((error as Error).message)).toContain('"512 m"');
    }
    expect(() => parseKiciMemory(-1)).toThrow();
    expect(() => parseKiciMemory(true as unknown as string)).toThrow(TypeError);
    expect(isResourceParseError(errorOf(() => parseKiciMemory('99999999999g')))).toBe(true);
  });

  it('agrees with kici 0.9.1’s parseMemoryString on every input (property)', () => {
    const kici = kiciParseMemoryString();
    const outcome = (fn: () => number): number | 'error' => {
      try {
        return fn();
      } catch {
        return 'error';
      }
    };
    const quantity = fc
      .tuple(
        fc.oneof(
          fc.nat({ max: 100_000 }).map(String),
          fc.double({ min: 0, max: 4096, noNaN: true }).map((d) => String(d)),
        ),
        fc.constantFrom('', ' ', '  ', '\t'),
        fc.constantFrom('k', 'm', 'g', 'K', 'M', 'G', 'Gi', 'b', 't', ''),
      )
      .map(([n, blank, unit]) => `${n}${blank}${unit}`);
    fc.assert(
      fc.property(fc.oneof(quantity, fc.string()), (text) => {
        const theirs = outcome(() => kici(text));
        const ours = outcome(() => parseKiciMemory(text));
        if (typeof theirs === 'number' && !Number.isSafeInteger(theirs)) return ours === 'error';
        return theirs === ours;
      }),
      { numRuns: 3000 },
    );
  });
});

describe('fromKiciResources', () => {
  it('mirrors the flat form to both sides, as kici does', () => {
    expect(fromKiciResources({ cpus: 2, memory: '512 m' })).toEqual({
      requests: { cpus: 2, memory: 512 * 2 ** 20 },
      limits: { cpus: 2, memory: 512 * 2 ** 20 },
    });
    expect(fromKiciResources({ cpus: undefined })).toEqual({});
  });

  it('keeps the nested form nested', () => {
    expect(fromKiciResources({ requests: { cpus: 0.5 }, limits: { memory: '1g' } })).toEqual({
      requests: { cpus: 0.5 },
      limits: { memory: 2 ** 30 },
    });
  });

  it('refuses unknown keys and bad quantities', () => {
    expect(isInvalidInputError(errorOf(() => fromKiciResources({ gpus: 1 } as never)))).toBe(true);
    expect(
      isInvalidInputError(errorOf(() => fromKiciResources({ requests: { cpu: 1 } } as never))),
    ).toBe(true);
    expect(isResourceParseError(errorOf(() => fromKiciResources({ memory: '8GB' })))).toBe(true);
    expect(isResourceParseError(errorOf(() => fromKiciResources({ cpus: '2' } as never)))).toBe(
      true,
    );
    expect(isInvalidInputError(errorOf(() => fromKiciResources(null as never)))).toBe(true);
  });
});

describe('fromKiciCap', () => {
  it('reads the written and the parsed forms', () => {
    expect(fromKiciCap({ maxCpu: 16, maxMemory: '64g' })).toEqual({
      maxCpu: 16,
      maxMemoryBytes: 64 * 2 ** 30,
    });
    expect(fromKiciCap({ maxCpu: 8, maxMemoryBytes: 1024 })).toEqual({
      maxCpu: 8,
      maxMemoryBytes: 1024,
    });
    expect(fromKiciCap({})).toEqual({});
  });

  it('refuses both memory forms at once, unknown keys and wrong types', () => {
    expect(
      isInvalidInputError(errorOf(() => fromKiciCap({ maxMemory: '1g', maxMemoryBytes: 1 }))),
    ).toBe(true);
    expect(isInvalidInputError(errorOf(() => fromKiciCap({ maxGpu: 1 } as never)))).toBe(true);
    expect(isResourceParseError(errorOf(() => fromKiciCap({ maxCpu: '2' } as never)))).toBe(true);
    expect(isResourceParseError(errorOf(() => fromKiciCap({ maxMemoryBytes: '1' } as never)))).toBe(
      true,
    );
  });
});
