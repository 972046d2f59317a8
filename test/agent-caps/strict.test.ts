// Fail closed: every exported agent-caps function refuses unknown keys and oversized
// input itself. Decoding stays tolerant of unknown wire fields (as the Rust crate is).

import {
  assertAgentName,
  capsFromResources,
  decodeAgentCaps,
  directGetSubject,
  encodeAgentCaps,
  renderDropIn,
  resourcesFromCaps,
  validateAgentCaps,
} from 'scaler-primitives/agent-caps';
import { readAgentCaps } from 'scaler-primitives/agent-caps/nats';
import { describe, expect, it } from 'vitest';
import { isEmpty, MAX_CAPS_VALUE_BYTES } from '../../src/agent-caps/codec.js';
import { MAX_AGENT_NAME_LENGTH } from '../../src/agent-caps/names.js';
import { isCapsValueError } from '../../src/errors/agent-caps.js';
import type { InvalidInputError } from '../../src/errors/input.js';
import { isInvalidInputError } from '../../src/errors/input.js';

function refused(fn: () => unknown): InvalidInputError {
  try {
    fn();
  } catch (error) {
    expect(isInvalidInputError(error), String(error)).toBe(true);
    return error as InvalidInputError;
  }
  throw new Error('expected an InvalidInputError, nothing was thrown');
}

describe('caps inputs are strict', () => {
  it.each([
    ['memoryMAx', 'memoryMax'],
    ['cpu_quota', 'cpuQuota'],
    ['memory_max', 'memoryMax'],
    ['cpuquota', 'cpuQuota'],
  ])(
    'a typo %s is refused by encode (not encoded as an uncapped agent), suggesting %s',
    (typo, key) => {
      const caps = { [typo]: '4G' } as never;
      const error = refused(() => encodeAgentCaps(caps));
      expect(error.message).toContain(`Did you mean \`${key}\`?`);
      expect(error.message).toContain('`cpuQuota`, `memoryMax`');
      refused(() => validateAgentCaps(caps));
      refused(() => renderDropIn(caps));
      refused(() => resourcesFromCaps(caps));
      refused(() => isEmpty(caps));
    },
  );

  it('options are strict everywhere', () => {
    expect(
      refused(() => encodeAgentCaps({ memoryMax: '50%' }, { allowMemoryPercents: true } as never))
        .message,
    ).toContain('Did you mean `allowMemoryPercent`?');
    refused(() => renderDropIn({ memoryMax: '1G' }, { sections: 'Scope' } as never));
    refused(() => decodeAgentCaps('{}', { raw: true, strict: false } as never));
    refused(() => resourcesFromCaps({}, { section: 'Scope' } as never));
    expect(() => encodeAgentCaps({}, { allowMemoryPercent: 'yes' } as never)).toThrow(TypeError);
  });

  it('capsFromResources refuses keys it cannot carry (a GPU count, a typo) rather than dropping them', () => {
    expect(refused(() => capsFromResources({ cpu: 2 } as never)).message).toContain(
      'Did you mean `cpus`?',
    );
    refused(() => capsFromResources({ cpus: 1, gpus: 1 } as never));
    expect(capsFromResources({ cpus: 1 })).toEqual({ cpuQuota: '100%' });
  });

  it('decode keeps tolerating unknown wire fields (a newer writer), as the Rust crate does', () => {
    expect(decodeAgentCaps('{"cpu_quota":"400%","io_weight":"10","x":{"y":[1]}}')).toEqual({
      cpuQuota: '400%',
    });
  });

  it('over-long values are refused before parsing, with a bounded message', () => {
    const long = `${'9'.repeat(1_000_000)}%`;
    for (const fn of [
      () => encodeAgentCaps({ cpuQuota: long }),
      () => decodeAgentCaps(JSON.stringify({ memory_max: long })),
    ]) {
      try {
        fn();
        throw new Error('not refused');
      } catch (error) {
        expect(isCapsValueError(error)).toBe(true);
        expect((error as Error).message.length).toBeLessThan(500);
      }
    }
  });

  it(`decode reads at most ${MAX_CAPS_VALUE_BYTES} bytes`, () => {
    const padded = `{"cpu_quota":"400%","pad":"${'x'.repeat(MAX_CAPS_VALUE_BYTES)}"}`;
    expect(() => decodeAgentCaps(padded)).toThrow(/at most 65536 are read/);
    expect(() => decodeAgentCaps(new TextEncoder().encode(padded))).toThrow(/at most 65536/);
    expect(() => decodeAgentCaps(42 as never)).toThrow(TypeError);
  });

  it('control characters in a refused value never reach the message raw', () => {
    try {
      encodeAgentCaps({ cpuQuota: '\u009b31m\u001b[2J' });
      throw new Error('not refused');
    } catch (error) {
      // biome-ignore lint/suspicious/noControlCharactersInRegex: looking for them is the point.
      expect((error as Error).message).not.toMatch(/[\u0000-\u001f\u007f-\u009f]/);
    }
  });
});

describe('the grammar predicates', () => {
  it('answer false for over-long values and refuse unknown options', async () => {
    const { isValidCpuQuota, isValidMemoryMax } = await import('../../src/agent-caps/grammar.js');
    expect(isValidCpuQuota(`${'1'.repeat(100)}%`)).toBe(false);
    expect(isValidMemoryMax(`1${'0'.repeat(100)}`)).toBe(false);
    expect(isValidMemoryMax('50%', { allowPercent: true })).toBe(true);
    refused(() => isValidMemoryMax('50%', { allowPercents: true } as never));
  });
});

describe('agent names have a length limit', () => {
  it(`accepts ${MAX_AGENT_NAME_LENGTH} characters, refuses one more`, () => {
    const longest = 'a'.repeat(MAX_AGENT_NAME_LENGTH);
    expect(assertAgentName(longest)).toBe(longest);
    const error = refused(() => directGetSubject(`${longest}a`));
    expect(error.message).toMatch(/257 characters/);
    expect(error.message.length).toBeLessThan(300);
  });

  it('readAgentCaps refuses a 4000-character name without sending anything', async () => {
    let requests = 0;
    const nc = {
      request: async () => {
        requests++;
        throw new Error('must not be called');
      },
    };
    await expect(readAgentCaps(nc as never, 'x'.repeat(4000))).rejects.toSatisfy(
      isInvalidInputError,
    );
    await expect(readAgentCaps(nc as never, 'x', { timeout: 0 })).rejects.toThrow(TypeError);
    await expect(readAgentCaps({} as never, 'x')).rejects.toThrow(TypeError);
    expect(requests).toBe(0);
  });
});
