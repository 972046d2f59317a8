// `private constructor` binds TypeScript only: a JavaScript caller (or a cast)
// can still write `new`. It must get a clear error naming the factory, not an
// object that fails later with `this[#kv].create is not a function`.

import { NatsPoolLedger } from 'scaler-primitives/ledger/nats';
import { describe, expect, it } from 'vitest';

// biome-ignore lint/suspicious/noExplicitAny: a JavaScript caller has no types
const Ledger = NatsPoolLedger as any;

describe('new NatsPoolLedger(...) from JavaScript', () => {
  it.each([
    ['the connect options', [{ servers: 'nats://127.0.0.1:4222', instanceId: 'ci-1' }]],
    ['no argument', []],
    ['what the constructor takes inside', [{}, {}, {}, false, { instanceId: 'ci-1' }]],
  ])('with %s throws a TypeError naming NatsPoolLedger.connect()', (_, args) => {
    expect(() => new Ledger(...args)).toThrow(TypeError);
    expect(() => new Ledger(...args)).toThrow(
      /no public constructor: use `await NatsPoolLedger\.connect\(options\)`/,
    );
  });
});
