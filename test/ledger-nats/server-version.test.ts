import { describe, expect, it } from 'vitest';
import { isNatsServerVersionError } from '../../src/errors/nats.js';
import {
  checkServerVersion,
  isSafeServerVersion,
  MIN_SAFE_NATS_SERVER_VERSION,
  parseServerVersion,
} from '../../src/ledger/nats/server-version.js';

describe('nats-server version check', () => {
  it('parses versions and compares them with the minimum', () => {
    expect(MIN_SAFE_NATS_SERVER_VERSION).toBe('2.11.0');
    expect(parseServerVersion('2.9.10')).toEqual([2, 9, 10]);
    expect(parseServerVersion('v2.11.0-RC.1')).toEqual([2, 11, 0]);
    for (const bad of [undefined, null, 2.11, '', 'two', '2.11']) {
      expect(parseServerVersion(bad)).toBeUndefined();
      expect(isSafeServerVersion(bad)).toBe(false);
    }
    expect(isSafeServerVersion('2.9.10')).toBe(false);
    expect(isSafeServerVersion('2.9.21')).toBe(false);
    expect(isSafeServerVersion('2.10.29')).toBe(false);
    expect(isSafeServerVersion('2.11.0')).toBe(true);
    expect(isSafeServerVersion('2.12.1')).toBe(true);
    expect(isSafeServerVersion('3.0.0')).toBe(true);
  });

  it('refuses an older clustered server under refuse, naming both versions; a safe one passes', () => {
    let error: unknown;
    try {
      checkServerVersion('2.9.10', 'refuse', true);
    } catch (e) {
      error = e;
    }
    expect(isNatsServerVersionError(error)).toBe(true);
    expect(error).toMatchObject({
      code: 'ERR_NATS_SERVER_VERSION',
      version: '2.9.10',
      minimum: '2.11.0',
    });
    expect((error as Error).message).toMatch(/nats-server 2\.9\.10 is older than 2\.11\.0/);
    expect(() => checkServerVersion('2.11.3', 'refuse', true)).not.toThrow();
    expect(() => checkServerVersion('2.11.3', 'loud' as never, true)).toThrow(
      /`serverVersionPolicy` to be 'warn', 'refuse' or 'ignore', got `loud`/,
    );
  });

  it('passes a single server of any version, and an older cluster under ignore', async () => {
    const seen: Error[] = [];
    const onWarning = (w: Error) => seen.push(w);
    process.on('warning', onWarning);
    try {
      for (const policy of ['warn', 'refuse', 'ignore'] as const) {
        expect(() => checkServerVersion('2.9.10', policy, false)).not.toThrow();
      }
      expect(() => checkServerVersion('2.9.10', 'ignore', true)).not.toThrow();
      await new Promise((r) => setImmediate(r));
      expect(
        seen.filter((w) => (w as { code?: string }).code === 'SCALER_NATS_SERVER_VERSION'),
      ).toEqual([]);
    } finally {
      process.off('warning', onWarning);
    }
  });

  it('warns once per version and process about an older cluster under warn', async () => {
    const seen: Error[] = [];
    const onWarning = (w: Error) => seen.push(w);
    process.on('warning', onWarning);
    try {
      checkServerVersion('2.8.4', 'warn', true);
      checkServerVersion('2.8.4', 'warn', true);
      checkServerVersion(undefined, 'warn', true);
      await new Promise((r) => setImmediate(r));
      expect(seen.map((w) => [(w as { code?: string }).code, w.message.slice(0, 42)])).toEqual([
        ['SCALER_NATS_SERVER_VERSION', 'nats-server 2.8.4 is older than 2.11.0, th'],
        ['SCALER_NATS_SERVER_VERSION', 'nats-server unknown is older than 2.11.0, '],
      ]);
    } finally {
      process.off('warning', onWarning);
    }
  });
});
