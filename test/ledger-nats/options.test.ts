import { describe, expect, it } from 'vitest';
import { isScalerError } from '../../src/errors/base.js';
import { NatsPoolLedger } from '../../src/ledger/nats/nats-pool-ledger.js';
import { withNatsLedgerHooks } from '../../src/ledger/nats/options.js';

describe('NatsPoolLedger options are strict', () => {
  it('refuses an unknown key, naming it, the nearest accepted key and all of them', async () => {
    const error = await NatsPoolLedger.connect({
      servers: 'nats://127.0.0.1:1',
      instanceId: 'x',
      leasMs: 1000,
    } as never).catch((e: unknown) => e);
    expect(isScalerError(error) && error.code).toBe('ERR_INVALID_INPUT');
    expect((error as Error).message).toMatch(/Unknown key "leasMs" in NatsPoolLedger options/);
    expect((error as Error).message).toMatch(/did you mean "leaseMs"\?/);
    expect((error as Error).message).toMatch(/accepted keys: nc, servers, bucket, instanceId/);
  });

  it('refuses a `hooks` option: test hooks are not public and no user option reaches them', async () => {
    await expect(
      NatsPoolLedger.connect({
        servers: 'nats://127.0.0.1:1',
        instanceId: 'x',
        hooks: { afterCommit: () => {} },
      } as never),
    ).rejects.toThrow(/Unknown key "hooks" in NatsPoolLedger options/);
  });

  it('refuses an unknown test hook and a non-object', async () => {
    await expect(
      NatsPoolLedger.connect(
        withNatsLedgerHooks({ servers: 'nats://127.0.0.1:1', instanceId: 'x' }, {
          afterComit: () => {},
        } as never),
      ),
    ).rejects.toThrow(
      /Unknown key "afterComit" in NatsPoolLedger hooks \(did you mean "afterCommit"\?\)/,
    );
    await expect(NatsPoolLedger.connect(null as never)).rejects.toThrow(
      /Expected NatsPoolLedger options to be an object, got null/,
    );
    await expect(NatsPoolLedger.connect([] as never)).rejects.toThrow(/got an array/);
  });

  it('names no suggestion when nothing is close, and never echoes a huge key whole', async () => {
    const error = (await NatsPoolLedger.connect({
      servers: 'nats://127.0.0.1:1',
      instanceId: 'x',
      ['z'.repeat(5000)]: 1,
    } as never).catch((e: unknown) => e)) as Error;
    expect(error.message).not.toMatch(/did you mean/);
    expect(error.message.length).toBeLessThan(400);
  });
});

describe('NatsPoolLedger lease margin and server version options', () => {
  it.each([
    [
      { leaseMarginMs: -1 },
      /`leaseMarginMs` to be a finite number >= 0 and < `leaseMs` \(30000\), got `-1`/,
    ],
    [{ leaseMarginMs: 30_000 }, /got `30000`/],
    [{ leaseMarginMs: Number.NaN }, /got `NaN`/],
    [{ leaseMarginMs: '5' }, /got `5`/],
    [{ leaseMs: 1000, leaseMarginMs: 1000 }, /< `leaseMs` \(1000\)/],
    [
      { serverVersionPolicy: 'quiet' },
      /`serverVersionPolicy` to be 'warn', 'refuse' or 'ignore', got `quiet`/,
    ],
  ])('refuses %j before connecting', async (extra, message) => {
    const error = await NatsPoolLedger.connect({
      servers: 'nats://127.0.0.1:1',
      instanceId: 'x',
      ...extra,
    } as never).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(TypeError);
    expect((error as Error).message).toMatch(message);
  });
});
