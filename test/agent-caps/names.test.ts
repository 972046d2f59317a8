import { assertAgentName, directGetSubject, keySubject } from 'scaler-primitives/agent-caps';
import { describe, expect, it } from 'vitest';
import { isInvalidInputError } from '../../src/errors/input.js';

describe('agent names', () => {
  it.each(['iris', 'agent-7', 'pool_a', 'A1', 'team/iris', 'x=y', '0'])('accepts %j', (name) => {
    expect(assertAgentName(name)).toBe(name);
    expect(keySubject(name)).toBe(`$KV.agent-limits.${name}`);
  });

  it.each([
    ['', 'empty'],
    ['a.b', 'two tokens'],
    ['a.*', 'a wildcard token'],
    ['*', 'a wildcard'],
    ['>', 'the full wildcard'],
    ['iris>', 'a wildcard character'],
    ['ir is', 'a space'],
    ['iris\n', 'a newline'],
    ['iris\t', 'a tab'],
    ['.iris', 'a leading dot'],
    ['iris.', 'a trailing dot'],
    ['ïris', 'outside the KV key charset'],
    ['a:b', 'outside the KV key charset'],
    ['$KV', 'outside the KV key charset'],
  ])('refuses %j (%s) in every function that builds a subject', (name) => {
    for (const fn of [assertAgentName, keySubject, directGetSubject]) {
      let thrown: unknown;
      try {
        fn(name);
      } catch (error) {
        thrown = error;
      }
      expect(isInvalidInputError(thrown)).toBe(true);
      expect(thrown).toMatchObject({ what: 'agent name', value: name });
      expect((thrown as Error).message).toContain(JSON.stringify(name));
      expect((thrown as Error).message).toMatch(/no "\.", "\*", ">", whitespace/);
    }
  });

  it('refuses a non-string with a TypeError', () => {
    // biome-ignore lint/suspicious/noExplicitAny: a JS caller passing a number
    expect(() => keySubject(7 as any)).toThrow(
      new TypeError('Expected `agent` to be a string, got `number`'),
    );
  });
});
