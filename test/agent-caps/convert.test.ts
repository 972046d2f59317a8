import { capsFromResources, renderDropIn, resourcesFromCaps } from 'scaler-primitives/agent-caps';
import { describe, expect, it } from 'vitest';
import { isEmpty } from '../../src/agent-caps/codec.js';

const GiB = 1024 ** 3;

describe('capsFromResources', () => {
  it.each([
    [{ cpus: 4 }, { cpuQuota: '400%' }],
    [{ cpus: 1.5 }, { cpuQuota: '150%' }],
    [{ cpus: 0.5 }, { cpuQuota: '50%' }],
    [{ cpus: 1.1 }, { cpuQuota: '110%' }],
    [{ cpus: 1.234 }, { cpuQuota: '124%' }],
    [{ cpus: 0.001 }, { cpuQuota: '1%' }],
    [{ memBytes: 8 * GiB }, { memoryMax: '8G' }],
    [{ memBytes: 1.5 * GiB }, { memoryMax: '1536M' }],
    [{ memBytes: 512 * 1024 }, { memoryMax: '512K' }],
    [{ memBytes: 1000 }, { memoryMax: '1000' }],
    [{ memBytes: 1024 ** 4 }, { memoryMax: '1T' }],
    [
      { cpus: 2, memBytes: 4 * GiB },
      { cpuQuota: '200%', memoryMax: '4G' },
    ],
    [{}, {}],
  ])('%j -> %j', (amount, caps) => {
    expect(capsFromResources(amount)).toEqual(caps);
  });

  it.each([
    [{ cpus: 0 }, 'Expected `cpus` to be a finite number > 0'],
    [{ cpus: -1 }, 'got `-1`'],
    [{ cpus: Number.NaN }, 'got `NaN`'],
    [{ cpus: Number.POSITIVE_INFINITY }, 'got `Infinity`'],
    [
      { memBytes: 0 },
      'Expected `memBytes` to be a whole number of bytes from 1 to Number.MAX_SAFE_INTEGER, got `0`',
    ],
    [{ memBytes: 1.5 }, 'got `1.5`'],
    [{ memBytes: 2 ** 60 }, 'got `1152921504606847000`'],
  ])('refuses %j with a TypeError', (amount, message) => {
    expect(() => capsFromResources(amount)).toThrow(TypeError);
    expect(() => capsFromResources(amount)).toThrow(message);
  });
});

describe('resourcesFromCaps', () => {
  it.each([
    [
      { cpuQuota: '400%', memoryMax: '8G' },
      { cpus: 4, memBytes: 8 * GiB },
    ],
    [{ cpuQuota: '12.5%' }, { cpus: 0.125 }],
    [{ memoryMax: '1.5G' }, { memBytes: 1610612736 }],
    [{ memoryMax: '0.5K' }, { memBytes: 512 }],
    [{ memoryMax: 'infinity' }, {}],
    [{}, {}],
  ])('%j -> %j', (caps, amount) => {
    expect(resourcesFromCaps(caps)).toEqual(amount);
  });

  it('leaves a memory percentage undefined (its size depends on the host)', () => {
    expect(resourcesFromCaps({ memoryMax: '50%' }, { allowMemoryPercent: true })).toEqual({});
    expect(() => resourcesFromCaps({ memoryMax: '50%' })).toThrow(/allowMemoryPercent/);
  });

  it('refuses invalid values', () => {
    expect(() => resourcesFromCaps({ cpuQuota: '2' })).toThrow(/Invalid cpuQuota "2"/);
  });
});

describe('renderDropIn', () => {
  it('renders one line per set field under [Service] by default', () => {
    expect(renderDropIn({ cpuQuota: '400%', memoryMax: '8G' })).toBe(
      '[Service]\nCPUQuota=400%\nMemoryMax=8G\n',
    );
  });

  it.each(['Service', 'Scope', 'Slice'] as const)('renders the [%s] section', (section) => {
    expect(renderDropIn({ memoryMax: '8G' }, { section })).toBe(`[${section}]\nMemoryMax=8G\n`);
  });

  it('renders nothing for empty caps', () => {
    expect(isEmpty({})).toBe(true);
    expect(renderDropIn({})).toBe('');
    expect(renderDropIn({ cpuQuota: undefined }, { section: 'Scope' })).toBe('');
  });

  it('never renders an invalid value', () => {
    expect(() => renderDropIn({ memoryMax: '8G\nCPUQuota=0%' })).toThrow(/Invalid memoryMax/);
    expect(() => renderDropIn({ cpuQuota: '50 %' })).toThrow(/Invalid cpuQuota/);
  });

  it('refuses an unknown section', () => {
    // biome-ignore lint/suspicious/noExplicitAny: a JS caller passing a bad section
    expect(() => renderDropIn({ memoryMax: '8G' }, { section: 'Unit' as any })).toThrow(
      new TypeError('Expected `section` to be one of Service, Scope, Slice, got `Unit`'),
    );
  });
});
