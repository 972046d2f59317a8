// Issue 11, "Numbers": conversions refuse what their own encoder would reject and
// never return an unsafe integer.

import {
  capsFromResources,
  encodeAgentCaps,
  resourcesFromCaps,
} from 'scaler-primitives/agent-caps';
import { describe, expect, it } from 'vitest';
import { isCapsValueError } from '../../src/errors/agent-caps.js';

describe('conversion limits', () => {
  it('accepts the largest CPUQuota= systemd reads, and the encoder agrees', () => {
    const caps = capsFromResources({ cpus: 214748.36 });
    expect(caps).toEqual({ cpuQuota: '21474836%' });
    expect(() => encodeAgentCaps(caps)).not.toThrow();
  });

  it.each([214748.37, 214748.361, 1e9])('refuses %d cores (beyond CPUQuota=)', (cpus) => {
    expect(() => capsFromResources({ cpus })).toThrow(/<= 214748\.36/);
  });

  it('rounds a sub-percent CPU up, exactly', () => {
    expect(capsFromResources({ cpus: 1e-10 })).toEqual({ cpuQuota: '1%' });
    expect(capsFromResources({ cpus: 1.1 })).toEqual({ cpuQuota: '110%' });
    expect(capsFromResources({ cpus: 1.0000000001 })).toEqual({ cpuQuota: '101%' });
  });

  it('refuses to convert a memoryMax beyond safe integers', () => {
    let caught: unknown;
    try {
      resourcesFromCaps({ memoryMax: '15E' });
    } catch (error) {
      caught = error;
    }
    expect(isCapsValueError(caught)).toBe(true);
    expect((caught as Error).message).toContain('"15E"');
    expect(resourcesFromCaps({ memoryMax: '7P' }).memBytes).toBe(7 * 1024 ** 5);
  });
});
