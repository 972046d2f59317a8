import fc from 'fast-check';
import {
  type AgentCaps,
  capsFromResources,
  decodeAgentCaps,
  encodeAgentCaps,
  resourcesFromCaps,
} from 'scaler-primitives/agent-caps';
import { describe, expect, it } from 'vitest';
import { isValidCpuQuota, isValidMemoryMax } from '../../src/agent-caps/grammar.js';
import { isCapsValueError } from '../../src/errors/agent-caps.js';

const decimals = fc.oneof(
  fc.constant(''),
  fc.integer({ min: 0, max: 9 }).map((d) => `.${d}`),
  fc.integer({ min: 0, max: 99 }).map((d) => `.${String(d).padStart(2, '0')}`),
);
const cpuQuota = fc
  .tuple(fc.integer({ min: 0, max: 21_474_835 }), decimals)
  .filter(([whole, frac]) => whole > 0 || /[1-9]/.test(frac))
  .map(([whole, frac]) => `${whole}${frac}%`);

const unit = fc.constantFrom('K', 'M', 'G', 'T', 'P');
const memoryMax = fc.oneof(
  fc.integer({ min: 1, max: Number.MAX_SAFE_INTEGER }).map(String),
  fc.tuple(fc.integer({ min: 1, max: 1023 }), unit).map(([n, u]) => `${n}${u}`),
  fc
    .tuple(fc.integer({ min: 1, max: 1023 }), fc.integer({ min: 0, max: 999 }), unit)
    .map(([n, f, u]) => `${n}.${f}${u}`),
  fc.constant('infinity'),
);
const caps: fc.Arbitrary<AgentCaps> = fc.record(
  { cpuQuota: cpuQuota, memoryMax: memoryMax },
  { requiredKeys: [] },
);

describe('round trips', () => {
  it('decode(encode(caps)) is caps for every valid value', () => {
    fc.assert(
      fc.property(caps, (value) => {
        expect(decodeAgentCaps(encodeAgentCaps(value))).toEqual(value);
      }),
    );
  });

  it('encodes unset fields as absent and keeps cpu_quota first', () => {
    fc.assert(
      fc.property(caps, (value) => {
        const text = new TextDecoder().decode(encodeAgentCaps(value));
        expect(text).not.toContain('null');
        expect(text.includes('cpu_quota')).toBe(value.cpuQuota !== undefined);
        expect(text.includes('memory_max')).toBe(value.memoryMax !== undefined);
        if (value.cpuQuota !== undefined && value.memoryMax !== undefined) {
          expect(text.indexOf('cpu_quota')).toBeLessThan(text.indexOf('memory_max'));
        }
      }),
    );
  });

  it('keeps its caps when unknown fields are added around them', () => {
    fc.assert(
      fc.property(
        caps,
        fc.dictionary(
          fc.string().filter((k) => !k.includes('_')),
          fc.jsonValue(),
        ),
        (value, extra) => {
          const wire = JSON.parse(new TextDecoder().decode(encodeAgentCaps(value))) as object;
          expect(decodeAgentCaps(JSON.stringify({ ...extra, ...wire }))).toEqual(value);
        },
      ),
    );
  });

  it('every string either round-trips or is refused with a CapsValueError', () => {
    fc.assert(
      fc.property(fc.string(), fc.constantFrom('cpuQuota', 'memoryMax'), (value, key) => {
        let bytes: Uint8Array;
        try {
          bytes = encodeAgentCaps({ [key]: value });
        } catch (error) {
          expect(isCapsValueError(error)).toBe(true);
          expect(key === 'cpuQuota' ? isValidCpuQuota(value) : isValidMemoryMax(value)).toBe(false);
          return;
        }
        expect(decodeAgentCaps(bytes)).toEqual({ [key]: value });
      }),
    );
  });
});

describe('invalid values are refused', () => {
  const mutations: Array<(v: string) => string> = [
    (v) => ` ${v}`,
    (v) => `${v} `,
    (v) => v.replace(/(\d)(\D*)$/, '$1 $2'),
    (v) => `${v}#`,
    (v) => `-${v}`,
    (v) => `0${v}`,
  ];
  it('a CPU quota with a stray space, sign, comment or leading zero', () => {
    fc.assert(
      fc.property(cpuQuota, fc.constantFrom(...mutations), (value, mutate) => {
        const bad = mutate(value);
        fc.pre(bad !== value);
        expect(isValidCpuQuota(bad)).toBe(false);
        expect(() => encodeAgentCaps({ cpuQuota: bad })).toThrow(/Invalid cpuQuota/);
        expect(() => decodeAgentCaps(JSON.stringify({ cpu_quota: bad }))).toThrow(
          /Invalid cpuQuota/,
        );
      }),
    );
  });

  it('a memory size with a lower-case, IEC or byte-suffixed unit', () => {
    fc.assert(
      fc.property(
        fc.tuple(fc.integer({ min: 1, max: 1023 }), unit),
        fc.constantFrom(
          (n: number, u: string) => `${n}${u.toLowerCase()}`,
          (n: number, u: string) => `${n}${u}i`,
          (n: number, u: string) => `${n}${u}B`,
          (n: number, u: string) => `${n} ${u}`,
        ),
        ([n, u], form) => {
          const bad = form(n, u);
          expect(isValidMemoryMax(bad)).toBe(false);
          expect(() => encodeAgentCaps({ memoryMax: bad })).toThrow(/Invalid memoryMax/);
        },
      ),
    );
  });
});

describe('conversions', () => {
  it('round-trips whole percents of a CPU', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 1_000_000 }), (percent) => {
        const cpus = percent / 100;
        const caps = capsFromResources({ cpus });
        expect(caps.cpuQuota).toBe(`${percent}%`);
        expect(resourcesFromCaps(caps).cpus).toBe(cpus);
      }),
    );
  });

  it('rounds a fraction of a percent up, never down', () => {
    fc.assert(
      fc.property(fc.double({ min: 0.0001, max: 10_000, noNaN: true }), (cpus) => {
        const caps = capsFromResources({ cpus });
        const percent = Number(caps.cpuQuota!.slice(0, -1));
        expect(Number.isInteger(percent)).toBe(true);
        expect(percent).toBeGreaterThanOrEqual(cpus * 100 - 1e-6);
        expect(percent).toBeLessThan(cpus * 100 + 1);
      }),
    );
  });

  it('round-trips every whole number of bytes through the largest exact unit', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: Number.MAX_SAFE_INTEGER }), (memBytes) => {
        const caps = capsFromResources({ memBytes });
        expect(isValidMemoryMax(caps.memoryMax)).toBe(true);
        expect(resourcesFromCaps(caps).memBytes).toBe(memBytes);
        const match = /^(\d+)([KMGTPE]?)$/.exec(caps.memoryMax!)!;
        // Largest unit: the number left in front of it is not a multiple of 1024.
        if (match[2] !== 'E') expect(Number(match[1]) % 1024).not.toBe(0);
      }),
    );
  });
});
