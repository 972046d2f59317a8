/**
 * "Without a provider, nothing is recorded and nothing is allocated per
 * operation": no telemetry object exists, so no telemetry code runs. Every way
 * in from the manager and the ledger (the public methods of ManagerTelemetry
 * and LedgerTelemetry) is spied on; a scripted scenario without providers must
 * call none of them, and the same scenario with a provider calls them (so the
 * spies do see calls when there are any). The call sites are optional calls
 * (`telemetry?.spawn(record, () => ...)`), which evaluate no argument, so not
 * even the closure is made. The heap side is in `npm run bench -- telemetry`.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { MachineLedger } from 'scaler-primitives/ledger';
import { type ScalerConfigInput, ScalerManager } from 'scaler-primitives/manager';
import { FakeBackend, TestClock } from 'scaler-primitives/testing';
import { afterEach, beforeEach, describe, expect, it, type MockInstance, vi } from 'vitest';
import { createLedgerTelemetry, LedgerTelemetry } from '../../src/ledger/telemetry.js';
import { createManagerTelemetry, ManagerTelemetry } from '../../src/manager/telemetry/telemetry.js';
import { MetricsHarness, TracesHarness } from '../helpers/otel.js';

const config: ScalerConfigInput = {
  globalMaxAgents: 10,
  machinePools: { host: { maxCpu: 2 } },
  scalers: [
    {
      name: 'vm',
      type: 'firecracker',
      maxAgents: 4,
      machinePool: 'host',
      labelSets: [{ labels: ['linux'], resources: { cpus: 1, memory: '1Gi' } }],
    },
  ],
};

const MANAGER_METHODS = ['scale', 'reserve', 'spawn', 'wrapOnEvent'] as const;
const LEDGER_METHODS = [
  'op',
  'lockWaitStart',
  'lockAcquired',
  'lockReleased',
  'committed',
  'observed',
  'conflict',
  'refresh',
] as const;

let dir: string;
let spies: MockInstance[];

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'no-provider-'));
  spies = [
    ...MANAGER_METHODS.map((m) => vi.spyOn(ManagerTelemetry.prototype, m)),
    ...LEDGER_METHODS.map((m) => vi.spyOn(LedgerTelemetry.prototype, m)),
  ];
});

afterEach(() => {
  vi.restoreAllMocks();
  rmSync(dir, { recursive: true, force: true });
});

/** Spawn, register, refuse at the pool cap, fail a spawn, disconnect, release: every hot path. */
async function scenario(telemetry: Record<string, unknown>): Promise<void> {
  const clock = new TestClock('2026-01-05T09:00:00Z');
  const ledger = new MachineLedger({
    instanceId: 'np',
    dir,
    bootId: 'boot-1',
    fsync: false,
    ...telemetry,
  });
  const backend = new FakeBackend({ clock });
  let n = 0;
  const manager = new ScalerManager({
    config,
    backends: [{ name: 'vm', backend }],
    ledgers: { host: ledger },
    clock,
    generateAgentId: (scaler) => `${scaler}-${++n}`,
    telemetry,
  });
  backend.attach(manager);
  try {
    for (let round = 0; round < 20; round++) {
      const a = await manager.requestScale({ jobId: `a-${round}`, labels: ['linux'] });
      const b = await manager.requestScale({ jobId: `b-${round}`, labels: ['linux'] });
      if (a.kind !== 'spawned' || b.kind !== 'spawned') throw new Error(`refused: ${b.kind}`);
      expect((await manager.requestScale({ jobId: `c-${round}`, labels: ['linux'] })).kind).toBe(
        'at-capacity',
      );
      backend.register(a.agentId);
      await manager.onAgentDisconnected(a.agentId);
      await manager.onAgentDisconnected(b.agentId);
      await clock.advance(1000); // the fake backend's destroys complete, the rows go back
    }
    backend.failNext(1, new Error('quota'));
    expect((await manager.requestScale({ jobId: 'fail', labels: ['linux'] })).kind).toBe(
      'spawn-failed',
    );
    await ledger.reserve('host', 'direct', 1, 0);
    await ledger.release('host', 'direct');
  } finally {
    await manager.shutdownAll({ timeoutMs: 0 });
    await ledger.close();
  }
}

const calls = () => spies.reduce((total, spy) => total + spy.mock.calls.length, 0);

describe('without a provider', () => {
  it('no telemetry object is built', () => {
    const view = () => {
      throw new Error('never read');
    };
    expect(createManagerTelemetry({}, view)).toBeUndefined();
    expect(createManagerTelemetry({ spawnDurationHistogram: true }, view)).toBeUndefined();
    const reader = {
      clock: new TestClock('2026-01-05T09:00:00Z'),
      pools: () => [],
      read: async () => undefined,
    };
    expect(createLedgerTelemetry({}, 'file', reader)).toBeUndefined();
    expect(createLedgerTelemetry({ usageRefreshMs: 1000 }, 'nats', reader)).toBeUndefined();
    expect(createLedgerTelemetry({ lockHistograms: true }, 'file', reader)).toBeUndefined();
  });

  it('a manager and its ledger run every hot path without one telemetry call', async () => {
    await scenario({});
    expect(calls()).toBe(0);
  });

  it('the same scenario with providers does go through the telemetry (the spies see calls)', async () => {
    const metrics = new MetricsHarness();
    const traces = new TracesHarness();
    try {
      await scenario({ meterProvider: metrics.provider, tracerProvider: traces.provider });
    } finally {
      await metrics.shutdown();
      await traces.shutdown();
    }
    const called = (spy: MockInstance) => spy.mock.calls.length;
    const [scale, reserve, spawn, wrapOnEvent, op, , lockAcquired] = spies;
    expect(called(scale!)).toBe(61);
    expect(called(reserve!)).toBeGreaterThanOrEqual(41);
    expect(called(spawn!)).toBe(41);
    expect(called(wrapOnEvent!)).toBe(1);
    expect(called(op!)).toBeGreaterThan(41);
    expect(called(lockAcquired!)).toBeGreaterThan(0);
  });
});
