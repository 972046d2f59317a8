/**
 * Warm-pool schedules (croner): periods in a time zone, the latest-started
 * active period wins, the next change in getStatus(), across a DST change.
 */

import type { ScalerConfigInput, ScalerManagerOptions } from 'scaler-primitives/manager';
import { describe, expect, it } from 'vitest';
import { handFleet } from './hand-fleet.js';

/** A fleet on the kit from `start`, driven by hand. */
function fleet(
  { config, ...manager }: Partial<ScalerManagerOptions> & { config: ScalerConfigInput },
  start = '2026-01-05T12:00:00Z',
) {
  return handFleet(config, { manager, start });
}

function config(schedules: unknown[]): ScalerConfigInput {
  return {
    globalMaxAgents: 20,
    scalers: [
      {
        name: 'vm',
        type: 'c',
        maxAgents: 10,
        labelSets: [{ labels: ['linux'] }],
        warmPool: { size: 1, idleTimeoutSeconds: 600, schedules: schedules as never },
      },
    ],
  };
}

const berlin = [
  { cron: '* 8-17 * * *', timezone: 'Europe/Berlin', size: 3 },
  { cron: '* 12-13 * * *', timezone: 'Europe/Berlin', size: 5 },
];

describe('warm-pool schedules', () => {
  it('follows local time across the spring DST change (Europe/Berlin, 2026-03-29)', async () => {
    // Saturday 07:59 CET = 06:59Z: outside every period.
    const { manager, clock } = fleet({ config: config(berlin) }, '2026-03-28T06:59:00Z');
    const warm = () => manager.getStatus().scalers[0]!.warmPool!;
    expect(warm()).toMatchObject({ size: 1, baseSize: 1 });
    expect(warm().activeSchedule).toBeUndefined();
    expect(warm().nextChangeAt).toBe(Date.UTC(2026, 2, 28, 7, 0));
    await clock.advanceTo(Date.UTC(2026, 2, 28, 7, 0));
    expect(warm()).toMatchObject({ size: 3, activeSchedule: 0 });
    // Ends at 18:00 CET = 17:00Z ... but 12:00 CET (11:00Z) comes first.
    expect(warm().nextChangeAt).toBe(Date.UTC(2026, 2, 28, 11, 0));
    await clock.advanceTo(Date.UTC(2026, 2, 28, 11, 30));
    // Both active: the later-started one wins.
    expect(warm()).toMatchObject({ size: 5, activeSchedule: 1 });
    expect(warm().nextChangeAt).toBe(Date.UTC(2026, 2, 28, 13, 0));
    await clock.advanceTo(Date.UTC(2026, 2, 28, 13, 0));
    expect(warm()).toMatchObject({ size: 3, activeSchedule: 0 });
    // Sunday after the change: 08:00 CEST is 06:00Z, an hour earlier in UTC.
    await clock.advanceTo(Date.UTC(2026, 2, 29, 0, 0));
    expect(warm().size).toBe(1);
    expect(warm().nextChangeAt).toBe(Date.UTC(2026, 2, 29, 6, 0));
    await clock.advanceTo(Date.UTC(2026, 2, 29, 5, 59));
    expect(warm().size).toBe(1);
    await clock.advanceTo(Date.UTC(2026, 2, 29, 6, 0));
    expect(warm().size).toBe(3);
  });

  it('maintain spawns up to the scheduled size and reaping shrinks back after it', async () => {
    const { manager, backend, clock } = fleet(
      {
        config: config([{ cron: '* 9-10 * * *', timezone: 'UTC', size: 3 }]),
        demandHoldMs: 0,
      },
      '2026-06-01T08:00:00Z',
    );
    await manager.maintain();
    expect(backend.spawned()).toHaveLength(1);
    manager.onAgentRegistered('vm-1', []);
    await clock.advanceTo(Date.UTC(2026, 5, 1, 9, 0));
    await manager.maintain();
    expect(backend.spawned()).toHaveLength(3);
    for (const s of backend.spawned()) manager.onAgentRegistered(s.agentId, []);
    // After the period, idle agents above the base size go at their idle timeout.
    await clock.advanceTo(Date.UTC(2026, 5, 1, 11, 0));
    await manager.maintain();
    expect(backend.destroyed()).toHaveLength(2);
    expect(manager.getStatus().scalers[0]!.idleCount).toBe(1);
  });

  it('refuses bad patterns, unknown zones and sizes above maxAgents, with their paths', () => {
    for (const [schedule, message] of [
      [{ cron: '* * * *', size: 1 }, /five-field/],
      [{ cron: '0 * * * * *', size: 1 }, /five-field/],
      [{ cron: '* 25 * * *', size: 1 }, /Invalid cron/],
      [{ cron: '* * * * *', timezone: 'Mars/Base', size: 1 }, /Unknown time zone/],
      [{ cron: '* * * * *', size: 11 }, /exceeds maxAgents/],
      [{ cron: '* * * * *', size: 1, tz: 'UTC' }, /tz/],
    ] as const) {
      expect(() => fleet({ config: config([schedule]) })).toThrow(message);
    }
    expect(() => fleet({ config: config([{ cron: '* 25 * * *', size: 1 }]) })).toThrow(
      /scalers\[0\]\.warmPool\.schedules\[0\]/,
    );
  });
});
