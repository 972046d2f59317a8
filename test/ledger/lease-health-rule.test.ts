import { describe, expect, it } from 'vitest';
import {
  atRiskAt,
  breaksStreak,
  deadlineOf,
  healthAt,
  LeaseEvents,
  renewDue,
} from '../../src/ledger/lease-health.js';
import type { LeaseEvent, LeaseHealth, LeaseInfo } from '../../src/ledger/types.js';

// The one lease-health rule the file, NATS and memory ledgers share (their own
// lease tests check it through each ledger; these pin the rule itself).
describe('the lease-health rule', () => {
  const L = 30_000;

  it('held until two thirds of the window, at risk until the deadline, lost from it', () => {
    expect(atRiskAt(1000, L)).toBe(21_000);
    expect(deadlineOf(1000, L)).toBe(31_000);
    expect(healthAt(1000, L, 1000)).toBe('held');
    expect(healthAt(1000, L, 20_999)).toBe('held');
    expect(healthAt(1000, L, 21_000)).toBe('at-risk');
    expect(healthAt(1000, L, 30_999)).toBe('at-risk');
    expect(healthAt(1000, L, 31_000)).toBe('lost');
  });

  it('a renewal is due after a third of the window; a gap over half of it breaks the streak', () => {
    expect(renewDue(10_000, L)).toBe(false);
    expect(renewDue(10_001, L)).toBe(true);
    expect(breaksStreak(15_000, L)).toBe(false);
    expect(breaksStreak(15_001, L)).toBe(true);
  });

  it('announces each transition once and in order, and renewed only after one', () => {
    const infos: LeaseHealth[] = [];
    const info = (health: LeaseHealth): LeaseInfo => {
      infos.push(health);
      return {
        health,
        leaseId: 'l',
        confirmedAt: undefined,
        deadline: undefined,
        leaseMs: L,
        marginMs: 0,
        location: { kind: 'memory' },
      };
    };
    const events = new LeaseEvents(info);
    const seen: LeaseEvent[] = [];
    const off = events.listen((event) => seen.push(event));
    events.listen(() => {
      throw new Error('a listener that throws is ignored');
    });
    events.renewed();
    events.report('held');
    expect(seen).toEqual([]);
    const error = new Error('EROFS');
    events.report('lost', error);
    events.report('lost', error);
    events.report('at-risk');
    expect(seen.map((e) => e.type)).toEqual(['lease-at-risk', 'lease-lost']);
    expect(seen.map((e) => e.lease.health)).toEqual(['at-risk', 'lost']);
    expect(seen[1]!.error).toBe(error);
    events.renewed();
    events.renewed();
    expect(seen.map((e) => e.type)).toEqual(['lease-at-risk', 'lease-lost', 'lease-renewed']);
    expect(seen[2]!.error).toBeUndefined();
    expect(events.reported).toBe('held');
    // Fenced: lost at once, without at-risk first.
    events.lost();
    expect(seen.at(-1)!.type).toBe('lease-lost');
    expect(seen).toHaveLength(4);
    off();
    events.renewed();
    expect(seen).toHaveLength(4);
    expect(infos).toEqual(['at-risk', 'lost', 'held', 'lost', 'held']);
    expect(() => events.listen('nope' as never)).toThrow(/Expected `listener` to be a function/);
  });
});
