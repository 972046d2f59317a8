/**
 * The ScalerManager's own options are strict, as every other entry point: an
 * unknown key (a typo) is an InvalidInputError naming it, the nearest option
 * and every option, never silently ignored.
 */

import { ScalerManager, type ScalerManagerOptions } from 'scaler-primitives/manager';
import { FakeBackend, TestClock } from 'scaler-primitives/testing';
import { describe, expect, it } from 'vitest';
import { type InvalidInputError, isInvalidInputError } from '../../src/errors/input.js';

function base(): ScalerManagerOptions {
  const clock = new TestClock('2026-01-05T12:00:00Z');
  return {
    config: {
      globalMaxAgents: 2,
      scalers: [{ name: 'vm', type: 'c', maxAgents: 2, labelSets: [{ labels: ['linux'] }] }],
    },
    backends: [{ name: 'vm', backend: new FakeBackend({ clock }) }],
    clock,
  };
}

function refusal(extra: Record<string, unknown>): InvalidInputError {
  try {
    new ScalerManager({ ...base(), ...extra } as ScalerManagerOptions);
  } catch (error) {
    expect(isInvalidInputError(error)).toBe(true);
    return error as InvalidInputError;
  }
  throw new Error('expected a refusal');
}

describe('new ScalerManager(options): unknown keys', () => {
  it.each([
    ['polices', 'policies'],
    ['Policies', 'policies'],
    ['reconcileIntervalMS', 'reconcileIntervalMs'],
    ['stateStor', 'stateStore'],
    ['onConfigACK', 'onConfigAck'],
    ['maintenanceInterval', 'maintenanceIntervalMs'],
    ['backend', 'backends'],
    ['ledger', 'ledgers'],
    ['telemetri', 'telemetry'],
  ])('%j is refused, naming the nearest option %j', (key, nearest) => {
    const error = refusal({ [key]: 'report' });
    expect(error.what).toBe('ScalerManager options key');
    expect(error.value).toBe(key);
    expect(error.message).toContain(`Unknown key ${JSON.stringify(key)} in ScalerManager options.`);
    expect(error.message).toContain(`Did you mean \`${nearest}\`?`);
    expect(error.message).toContain('`policies`');
  });

  it('a key near no option is refused with every option listed', () => {
    const error = refusal({ colour: 'blue' });
    expect(error.message).not.toContain('Did you mean');
    for (const key of ['config', 'backends', 'ledgers', 'onConfigAck', 'telemetry']) {
      expect(error.message).toContain(`\`${key}\``);
    }
  });

  it('an unknown key set to undefined is refused too (a typo is a typo)', () => {
    expect(refusal({ polices: undefined }).value).toBe('polices');
  });

  it.each([
    ['policies', { leaseLots: 'report' }, 'leaseLost'],
    ['policies', { unrecordedAgent: 'leave' }, 'unrecordedAgents'],
    ['telemetry', { meterprovider: {} }, 'meterProvider'],
  ])('an unknown key inside %j is refused, naming the nearest one', (group, value, nearest) => {
    const error = refusal({ [group]: value });
    expect(error.what).toBe(`ScalerManager options.${group} key`);
    expect(error.message).toContain(`Did you mean \`${nearest}\`?`);
  });

  it('a group that is not an object is a TypeError naming it', () => {
    expect(() => new ScalerManager({ ...base(), policies: 'report' as never })).toThrow(
      /Expected `policies` to be an object \{ reservationLost, leaseLost, unrecordedAgents \}/,
    );
  });

  it('every documented option is accepted', () => {
    const manager = new ScalerManager({
      ...base(),
      onScalerEvent: () => {},
      onEvent: () => {},
      registrationTimeoutMs: 1000,
      maintenanceIntervalMs: 1000,
      reconcileIntervalMs: 60_000,
      policies: { reservationLost: 'report', leaseLost: 'report', unrecordedAgents: 'leave' },
      demandHoldMs: 0,
      maxBufferedEvents: 10,
      random: () => 0.5,
      generateAgentId: (scaler) => `${scaler}-1`,
      onConfigAck: () => {},
      sweeps: {},
      telemetry: { spawnDurationHistogram: false },
    });
    expect(manager.getStatus().shuttingDown).toBe(false);
  });
});

describe('the facade stays small (issue 39)', () => {
  it('ScalerManager has at most 20 public methods and at most 18 options', () => {
    const methods = Object.getOwnPropertyNames(ScalerManager.prototype).filter(
      (name) => name !== 'constructor',
    );
    expect(methods.length, methods.join(', ')).toBeLessThanOrEqual(20);
    const listed = [...refusal({ colour: 'blue' }).message.matchAll(/`([A-Za-z]+)`/g)].map(
      (match) => match[1],
    );
    expect(listed).toContain('telemetry');
    expect(listed.length, listed.join(', ')).toBeLessThanOrEqual(18);
  });
});
