import {
  type FenceLease,
  leaseEnv,
  readLeaseEnv,
  watchLeaseFromEnv,
} from 'scaler-primitives/fence';
import { describe, expect, it } from 'vitest';
import { isScalerError } from '../../src/errors/base.js';
import { LEASE_ENV } from '../../src/fence/lease.js';

const fileLease: FenceLease = {
  location: { kind: 'file', path: '/var/lib/ci/ledger/4f0c9e1a.lease' },
  leaseMs: 30_000,
  marginMs: 3_000,
};
const natsLease: FenceLease = {
  location: { kind: 'nats', bucket: 'scaler-ledger', key: 'lease.host-a' },
  leaseMs: 6_000,
  marginMs: 1_000,
};

const envWith = (value: unknown) => ({ [LEASE_ENV]: JSON.stringify(value) });
const good = JSON.parse(leaseEnv(fileLease)[LEASE_ENV]!) as Record<string, unknown>;

describe('leaseEnv and readLeaseEnv', () => {
  it('round-trip a file lease and a NATS lease through one variable', () => {
    for (const lease of [fileLease, natsLease]) {
      const env = leaseEnv(lease);
      expect(Object.keys(env)).toEqual(['SCALER_LEASE']);
      expect(readLeaseEnv(env)).toEqual(lease);
    }
  });

  it('hand over nothing for no lease or a memory lease, and read nothing back', () => {
    expect(leaseEnv(undefined)).toEqual({});
    expect(leaseEnv({ location: { kind: 'memory' }, leaseMs: 30_000, marginMs: 3_000 })).toEqual(
      {},
    );
    expect(readLeaseEnv({})).toBeUndefined();
    expect(watchLeaseFromEnv({ env: {} })).toBeUndefined();
  });

  it('leaseEnv refuses a lease it could not hand over', () => {
    expect(() => leaseEnv({ ...fileLease, leaseMs: 0 })).toThrow(/lease\.leaseMs.*got `0`/);
    expect(() =>
      leaseEnv({ ...fileLease, location: { kind: 'file', path: 'relative.lease' } }),
    ).toThrow(/absolute file path, got `"relative.lease"`/);
    expect(() => leaseEnv('x' as never)).toThrow(/Expected `lease` to be an object/);
    expect(() =>
      leaseEnv({ ...fileLease, location: { ...fileLease.location, extra: 1 } as never }),
    ).toThrow(/Unknown key "extra"/);
  });

  it.each<[string, Record<string, string | undefined>, RegExp]>([
    ['empty', { [LEASE_ENV]: '' }, /not JSON: `""`/],
    ['not JSON', { [LEASE_ENV]: '{lease' }, /not JSON: `"\{lease"`/],
    ['an array', envWith([1]), /expected a JSON object, got `\[1\]`/],
    ['an unknown key', envWith({ ...good, leaseMS: 1 }), /Unknown key "leaseMS".*`leaseMs`/],
    ['another version', envWith({ ...good, version: 3 }), /`version` 1 .*or 2 .*got `3`/],
    ['no version', envWith({ ...good, version: undefined }), /`version` 1 .*got `undefined`/],
    [
      'an unknown kind',
      envWith({ ...good, location: { kind: 'disk', path: '/x' } }),
      /SCALER_LEASE\.location\.kind` to be `file` or `nats`, got `"disk"`/,
    ],
    [
      'a memory lease',
      envWith({ ...good, location: { kind: 'memory' } }),
      /memory.*cannot watch it/,
    ],
    [
      'a relative path',
      envWith({ ...good, location: { kind: 'file', path: 'a.lease' } }),
      /location\.path` to be an absolute file path, got `"a.lease"`/,
    ],
    [
      'an unknown location key',
      envWith({ ...good, location: { kind: 'file', path: '/a.lease', mode: 1 } }),
      /Unknown key "mode"/,
    ],
    [
      'a negative lease',
      envWith({ ...good, leaseMs: -1 }),
      /leaseMs` to be a finite number > 0, got `-1`/,
    ],
    ['a null lease', envWith({ ...good, leaseMs: null }), /leaseMs`.*got `null`/],
    ['a string margin', envWith({ ...good, marginMs: '3s' }), /marginMs`.*got `"3s"`/],
    [
      'a bad bucket',
      envWith({ ...good, location: { kind: 'nats', bucket: 'a b', key: 'k' } }),
      /bucket name.*got `"a b"`/,
    ],
    [
      'a bad key',
      envWith({ ...good, location: { kind: 'nats', bucket: 'b', key: 'a..b' } }),
      /NATS KV key, got `"a..b"`/,
    ],
  ])('readLeaseEnv refuses %s, naming the value', (_name, env, message) => {
    let caught: unknown;
    try {
      readLeaseEnv(env);
    } catch (error) {
      caught = error;
    }
    expect(isScalerError(caught)).toBe(true);
    expect((caught as Error).message).toMatch(/^Invalid SCALER_LEASE: /);
    expect((caught as Error).message).toMatch(message);
    // The same refusal from the agent's entry point.
    expect(() => watchLeaseFromEnv({ env })).toThrow(message);
  });

  it('watchLeaseFromEnv: required makes a missing variable an error; bad options are refused', () => {
    expect(() => watchLeaseFromEnv({ env: {}, required: true })).toThrow(/SCALER_LEASE is not set/);
    expect(() => watchLeaseFromEnv({ env: {}, requird: true } as never)).toThrow(
      /Unknown key "requird".*`required`/,
    );
    expect(() => watchLeaseFromEnv({ env: {}, required: 'yes' } as never)).toThrow(
      /`required` to be a boolean, got `"yes"`/,
    );
    expect(() => watchLeaseFromEnv({ env: leaseEnv(natsLease) })).toThrow(
      /carries a NATS lease \(scaler-ledger\/lease\.host-a\): fence it with `watchLeasesFromEnv` of `scaler-primitives\/fence\/nats`/,
    );
  });
});
