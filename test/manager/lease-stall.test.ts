import type { Clock, ClockTimer } from 'scaler-primitives';
import type { ScalerConfigInput, ScalerEvent } from 'scaler-primitives/manager';
import {
  createTestFleet,
  MemoryPoolLedger,
  MemoryPoolStore,
  TestClock,
} from 'scaler-primitives/testing';
import { describe, expect, it } from 'vitest';

const START = '2026-01-05T09:00:00Z';

const config: ScalerConfigInput = {
  globalMaxAgents: 4,
  machinePools: { host: { maxCpu: 8, maxMemory: '16Gi' } },
  scalers: [
    {
      name: 'vm',
      type: 'vm',
      maxAgents: 4,
      machinePool: 'host',
      labelSets: [{ labels: ['linux'], resources: { cpus: 1, memory: '1Gi' } }],
    },
  ],
};

/**
 * The ledger's clock, as a stopped process sees it: while `stalled`, time goes
 * on but no timer runs; `resume()` (SIGCONT) runs every overdue one at once,
 * in the order it was due (an interval once), as Node does after a stop.
 */
function stallableClock(inner: TestClock) {
  let stalled = false;
  const overdue: Array<() => void> = [];
  const wrap = (fn: () => void) => () => {
    if (!stalled) return fn();
    if (!overdue.includes(fn)) overdue.push(fn);
  };
  const clock: Clock = {
    now: () => inner.now(),
    setTimeout: (fn, ms): ClockTimer => inner.setTimeout(wrap(fn), ms),
    clearTimeout: (timer) => inner.clearTimeout(timer),
    setInterval: (fn, ms): ClockTimer => inner.setInterval(wrap(fn), ms),
    clearInterval: (timer) => inner.clearInterval(timer),
  };
  return {
    clock,
    stall: () => {
      stalled = true;
    },
    resume: () => {
      stalled = false;
      for (const fn of overdue.splice(0)) fn();
    },
  };
}

function leaseEvents(events: ScalerEvent[]) {
  return events.filter((e) => e.kind.startsWith('lease-'));
}

async function stalledFleet(agents: number) {
  const ledgerClock = new TestClock(START);
  const stall = stallableClock(ledgerClock);
  const ledger = new MemoryPoolLedger({
    instanceId: 'stalled',
    store: new MemoryPoolStore(),
    clock: stall.clock,
  });
  const fleet = createTestFleet(config, {
    start: START,
    backend: { registerAfterMs: 1_000 },
    manager: { ledgers: { host: ledger } },
  });
  const both = async (ms: number) => {
    await ledgerClock.advance(ms);
    await fleet.clock.advance(ms);
  };
  for (let i = 0; i < agents; i++) {
    await fleet.manager.requestScale({ jobId: `j-${i}`, labels: ['linux'] });
  }
  await both(1_000);
  return { fleet, ledger, stall, both };
}

describe('a stalled controller resuming (SIGSTOP, then SIGCONT past the lease)', () => {
  it('one lease event per transition, naming the agents it destroys', async () => {
    const { fleet, stall, both } = await stalledFleet(2);
    expect(fleet.backends.vm!.running()).toHaveLength(2);
    stall.stall();
    await both(60_000); // twice the 30 s lease: lost while stopped
    expect(leaseEvents(fleet.events)).toEqual([]);
    stall.resume();
    await fleet.clock.advance(0);
    const lease = leaseEvents(fleet.events);
    expect(lease.map((e) => e.kind)).toEqual(['lease-at-risk', 'lease-lost', 'lease-renewed']);
    expect(lease[0]!.message).toMatch(/destroying 2 agent\(s\) that hold pool rows/);
    expect(lease[0]!.data).toMatchObject({ agents: ['vm-1', 'vm-2'] });
    for (const event of lease) expect(event.message).not.toMatch(/destroying 0/);
    expect(fleet.backends.vm!.running()).toEqual([]);
    fleet.checkInvariants();
    await fleet.shutdown();
  });

  it('with no agent holding a row, no event says "destroying 0 agent(s)"', async () => {
    const { fleet, stall, both } = await stalledFleet(0);
    stall.stall();
    await both(60_000);
    stall.resume();
    await fleet.clock.advance(0);
    const lease = leaseEvents(fleet.events);
    expect(lease.map((e) => e.kind)).toEqual(['lease-at-risk', 'lease-lost', 'lease-renewed']);
    for (const event of lease) expect(event.message).not.toMatch(/destroying 0/);
    expect(lease[0]!.message).toMatch(/no agent holds a pool row/);
    await fleet.shutdown();
  });
});
