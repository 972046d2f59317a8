// `private constructor` binds TypeScript only: a JavaScript caller (or a cast)
// can still write `new`. It must get a clear error naming `open()`, not a store
// that fails later with `this[#kv].create is not a function`.

import { NatsStateStore } from 'scaler-primitives/manager/nats';
import { describe, expect, it } from 'vitest';

// biome-ignore lint/suspicious/noExplicitAny: a JavaScript caller has no types
const Store = NatsStateStore as any;

describe('new NatsStateStore(...) from JavaScript', () => {
  const fakeKv = { create: 1, update: 1, get: 1, keys: 1, delete: 1 };
  it.each([
    ['a connection and options', [{ request: () => undefined }, { name: 'ci-1' }]],
    ['no argument', []],
    ['what the constructor takes inside', [fakeKv, 'scaler-manager-state', 'ci-1', 65_536]],
  ])('with %s throws a TypeError naming NatsStateStore.open()', (_, args) => {
    expect(() => new Store(...args)).toThrow(TypeError);
    expect(() => new Store(...args)).toThrow(
      /no public constructor: open one with `await NatsStateStore\.open\(nc, options\)`/,
    );
  });
});
