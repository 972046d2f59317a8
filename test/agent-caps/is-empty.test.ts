// `isEmpty`, the Rust crate's `AgentCaps::is_empty`, from the public subpath.
import { decodeAgentCaps, isEmpty } from 'scaler-primitives/agent-caps';
import { ErrorCode, isScalerError } from 'scaler-primitives/errors';
import { describe, expect, it } from 'vitest';

describe('isEmpty (AgentCaps::is_empty)', () => {
  it('is true when no field is set, as the crate says of `{}` and of nulls', () => {
    expect(isEmpty({})).toBe(true);
    expect(isEmpty({ cpuQuota: undefined, memoryMax: undefined })).toBe(true);
    // serde reads `null` as unset; a raw decode keeps shapes the crate would accept.
    expect(isEmpty(decodeAgentCaps('{"cpu_quota":null,"memory_max":null}'))).toBe(true);
    expect(isEmpty(decodeAgentCaps('{"io_weight":"10"}'))).toBe(true);
  });

  it('is false when any field is set', () => {
    expect(isEmpty({ cpuQuota: '400%' })).toBe(false);
    expect(isEmpty({ memoryMax: '8G' })).toBe(false);
    expect(isEmpty({ cpuQuota: '400%', memoryMax: '8G' })).toBe(false);
    expect(isEmpty(decodeAgentCaps('{"memory_max":"8G"}'))).toBe(false);
  });

  it('refuses what is not caps: an unknown key (a typo would read as empty) or a non-object', () => {
    let caught: unknown;
    try {
      isEmpty({ cpu_quota: '400%' } as never);
    } catch (error) {
      caught = error;
    }
    expect(isScalerError(caught, ErrorCode.INVALID_INPUT)).toBe(true);
    expect(String((caught as Error).message)).toMatch(/cpu_quota/);
    for (const value of [null, undefined, 'caps', 42, ['400%']]) {
      expect(() => isEmpty(value as never)).toThrow(TypeError);
    }
  });
});
