import { decodeAgentCaps, encodeAgentCaps } from 'scaler-primitives/agent-caps';
import { describe, expect, it } from 'vitest';
import { isValidCpuQuota, isValidMemoryMax } from '../../src/agent-caps/grammar.js';
import { isCapsValueError } from '../../src/errors/agent-caps.js';

// Each row was checked against systemd 252's parsers (see docs/agent-caps.md).
const validCpu = [
  '50%',
  '400%',
  '12.5%',
  '12.34%',
  '0.5%',
  '0.01%',
  '100%',
  '1600%',
  '21474836.47%',
];
const invalidCpu: Array<[string, string]> = [
  ['0%', 'zero is refused by systemd'],
  ['0.00%', 'zero'],
  ['2', 'no percent sign'],
  ['12.345%', 'three decimals'],
  ['50 %', 'space before the sign'],
  [' 50%', 'leading space'],
  ['50%%', 'two signs'],
  ['-50%', 'negative'],
  ['+50%', 'explicit sign'],
  ['050%', 'leading zero'],
  ['.5%', 'no integer part'],
  ['5.%', 'empty fraction'],
  ['0x10%', 'hex'],
  ['50‰', 'permille form'],
  ['21474836.48%', 'above INT_MAX hundredths'],
  ['', 'empty'],
  ['infinity', 'not a CPU value'],
];

const validMemory = [
  '1',
  '1073741824',
  '512K',
  '512M',
  '8G',
  '1.5G',
  '0.5K',
  '2T',
  '1P',
  '1E',
  '15E',
  'infinity',
];
const invalidMemory: Array<[string, string]> = [
  ['8Gi', 'IEC suffix'],
  ['8GB', 'two-letter unit'],
  ['8g', 'lower case'],
  ['8B', 'B suffix'],
  ['0', 'zero stops the unit'],
  ['0G', 'zero'],
  ['8G # c', 'trailing comment'],
  ['8 G', 'space before the unit'],
  [' 8G', 'leading space'],
  ['1G 512M', 'compound size'],
  ['1.5', 'fractional bytes'],
  ['08G', 'leading zero'],
  ['-1G', 'negative'],
  ['16E', 'overflows 64 bits'],
  ['18446744073709551615', 'UINT64_MAX is systemd\u2019s "no limit"'],
  ['0.0001K', 'rounds to 0 bytes'],
  ['50%', 'percentages are refused by default'],
  ['Infinity', 'case matters'],
  ['max', 'the cgroup spelling, not systemd\u2019s'],
  ['', 'empty'],
];

describe('CPUQuota= grammar', () => {
  it.each(validCpu)('accepts %j', (value) => {
    expect(isValidCpuQuota(value)).toBe(true);
    expect(() => encodeAgentCaps({ cpuQuota: value })).not.toThrow();
  });

  it.each(invalidCpu)('refuses %j (%s) on encode and on decode', (value) => {
    expect(isValidCpuQuota(value)).toBe(false);
    let thrown: unknown;
    try {
      encodeAgentCaps({ cpuQuota: value });
    } catch (error) {
      thrown = error;
    }
    expect(isCapsValueError(thrown)).toBe(true);
    expect(thrown).toMatchObject({ field: 'cpuQuota', value, code: 'ERR_CAPS_VALUE' });
    expect((thrown as Error).message).toContain(JSON.stringify(value));
    expect((thrown as Error).message).toContain('"400%"');
    expect(() => decodeAgentCaps(JSON.stringify({ cpu_quota: value }))).toThrow(
      /Invalid cpuQuota .* in a stored caps value/,
    );
    expect(decodeAgentCaps(JSON.stringify({ cpu_quota: value }), { raw: true })).toEqual({
      cpuQuota: value,
    });
  });
});

describe('MemoryMax= grammar', () => {
  it.each(validMemory)('accepts %j', (value) => {
    expect(isValidMemoryMax(value)).toBe(true);
    expect(() => encodeAgentCaps({ memoryMax: value })).not.toThrow();
  });

  it.each(invalidMemory)('refuses %j (%s) on encode and on decode', (value) => {
    expect(isValidMemoryMax(value)).toBe(false);
    expect(() => encodeAgentCaps({ memoryMax: value })).toThrow(
      expect.objectContaining({ code: 'ERR_CAPS_VALUE', field: 'memoryMax', value }),
    );
    expect(() => decodeAgentCaps(JSON.stringify({ memory_max: value }))).toThrow(
      /Invalid memoryMax/,
    );
    expect(decodeAgentCaps(JSON.stringify({ memory_max: value }), { raw: true })).toEqual({
      memoryMax: value,
    });
  });

  it('accepts a percentage only when asked, and only (0, 100]', () => {
    expect(() => encodeAgentCaps({ memoryMax: '50%' })).toThrow(/allowMemoryPercent/);
    const opts = { allowMemoryPercent: true };
    for (const ok of ['50%', '100%', '0.01%', '12.5%']) {
      expect(isValidMemoryMax(ok, { allowPercent: true })).toBe(true);
      expect(decodeAgentCaps(JSON.stringify({ memory_max: ok }), opts)).toEqual({ memoryMax: ok });
    }
    for (const bad of ['0%', '100.01%', '150%', '12.345%', '50 %']) {
      expect(isValidMemoryMax(bad, { allowPercent: true })).toBe(false);
      expect(() => encodeAgentCaps({ memoryMax: bad }, opts)).toThrow(/Invalid memoryMax/);
    }
  });
});

describe('bad input', () => {
  it.each([
    ['not JSON', '{cpu_quota:1}'],
    ['an array', '["400%"]'],
    ['null', 'null'],
    ['a string', '"400%"'],
    ['a number field', '{"cpu_quota":400}'],
    ['an object field', '{"memory_max":{"v":"8G"}}'],
  ])('refuses %s with a CapsValueError on field "value"', (_, data) => {
    expect(() => decodeAgentCaps(data)).toThrow(
      expect.objectContaining({ code: 'ERR_CAPS_VALUE', field: 'value' }),
    );
  });

  it('refuses bytes that are not UTF-8', () => {
    expect(() => decodeAgentCaps(new Uint8Array([0x7b, 0xff, 0x7d]))).toThrow(/not UTF-8 JSON/);
  });

  it('refuses a non-string field on encode with a TypeError naming it', () => {
    // biome-ignore lint/suspicious/noExplicitAny: a JS caller passing a number
    expect(() => encodeAgentCaps({ cpuQuota: 400 as any })).toThrow(
      new TypeError('Expected `caps.cpuQuota` to be a string or undefined, got `number` (`400`)'),
    );
    // biome-ignore lint/suspicious/noExplicitAny: a JS caller passing null
    expect(() => encodeAgentCaps(null as any)).toThrow(TypeError);
  });
});
