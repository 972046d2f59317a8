import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Histogram } from '@opentelemetry/sdk-metrics';
import { MachineLedger, type MachineLedgerOptions } from 'scaler-primitives/ledger';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { isLedgerLeaseExpiredError } from '../../src/errors/ledger.js';
import { MetricsHarness, points, pointValue, TracesHarness } from '../helpers/otel.js';

let dir: string;
let metrics: MetricsHarness;
let traces: TracesHarness;
const ledgers: MachineLedger[] = [];

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'ledger-otel-'));
  metrics = new MetricsHarness();
  traces = new TracesHarness();
});

afterEach(async () => {
  await Promise.all(ledgers.splice(0).map((l) => l.close()));
  await metrics.shutdown();
  await traces.shutdown();
  rmSync(dir, { recursive: true, force: true });
});

function make(options: Partial<MachineLedgerOptions> = {}): MachineLedger {
  const ledger = new MachineLedger({
    instanceId: 'me',
    dir,
    bootId: 'boot-1',
    fsync: false,
    ...options,
  });
  ledgers.push(ledger);
  return ledger;
}

const GiB = 2 ** 30;
const pool = { 'scaler.pool': 'p', 'scaler.ledger.backend': 'file' };

describe('MachineLedger metrics', () => {
  it('records every instrument after a scripted scenario: names, units, attributes, values', async () => {
    // A row left by a previous boot: stale, reaped by the first write.
    writeFileSync(
      join(dir, 'p.json'),
      JSON.stringify({
        version: 1,
        cap: { maxCpu: 4, maxMemoryBytes: 8 * GiB },
        reservations: [
          {
            instanceId: 'old',
            pid: 1,
            bootId: 'boot-0',
            agentId: 'ghost',
            cpus: 1,
            memBytes: GiB,
            reservedAt: 1,
          },
        ],
      }),
    );
    const ledger = make({ meterProvider: metrics.provider });
    ledger.registerPool('p', { maxCpu: 4, maxMemoryBytes: 8 * GiB });
    expect((await ledger.reserve('p', 'a1', 1.5, 2 * GiB)).ok).toBe(true);
    expect((await ledger.reserve('p', 'a2', 0.1, GiB)).ok).toBe(true);
    expect((await ledger.reserve('p', 'a3', 3, GiB)).ok).toBe(false); // cpu
    expect(await ledger.release('p', 'a2')).toBe(true);
    expect(await ledger.release('p', 'a2')).toBe(false);

    const m = await metrics.collect();
    const ops = (operation: string, result: string) =>
      pointValue(m, 'scaler.ledger.operations', {
        ...pool,
        'scaler.ledger.operation': operation,
        'scaler.result': result,
      });
    expect(m.get('scaler.ledger.operations')?.descriptor.unit).toBe('{operation}');
    expect(ops('reserve', 'granted')).toBe(2);
    expect(ops('reserve', 'refused')).toBe(1);
    expect(ops('release', 'released')).toBe(1);
    expect(ops('release', 'absent')).toBe(1);

    expect(points(m, 'scaler.ledger.rows.reaped')).toEqual([
      { attributes: { ...pool, 'scaler.stale.reason': 'other-boot' }, value: 1 },
    ]);
    expect(m.get('scaler.ledger.rows.reaped')?.descriptor.unit).toBe('{row}');

    // Usage as last read under the lock: a1 only.
    expect(points(m, 'scaler.ledger.cpu.reserved')).toEqual([{ attributes: pool, value: 1.5 }]);
    expect(m.get('scaler.ledger.cpu.reserved')?.descriptor.unit).toBe('{cpu}');
    expect(pointValue(m, 'scaler.ledger.memory.reserved', pool)).toBe(2 * GiB);
    expect(m.get('scaler.ledger.memory.reserved')?.descriptor.unit).toBe('By');
    expect(pointValue(m, 'scaler.ledger.cpu.cap', pool)).toBe(4);
    expect(pointValue(m, 'scaler.ledger.memory.cap', pool)).toBe(8 * GiB);
    expect(pointValue(m, 'scaler.ledger.agents', pool)).toBe(1);
    expect(m.get('scaler.ledger.agents')?.descriptor.unit).toBe('{agent}');
    const age = pointValue(m, 'scaler.ledger.usage.age', pool) as number;
    expect(m.get('scaler.ledger.usage.age')?.descriptor.unit).toBe('s');
    expect(age).toBeGreaterThanOrEqual(0);
    expect(age).toBeLessThan(60);

    // One lock cycle per batch; five sequential calls, five cycles, totalled.
    expect(points(m, 'scaler.ledger.lock.cycles')).toEqual([{ attributes: pool, value: 5 }]);
    expect(m.get('scaler.ledger.lock.cycles')?.descriptor.unit).toBe('{cycle}');
    for (const name of ['scaler.ledger.lock.wait.time', 'scaler.ledger.lock.hold.time']) {
      expect(m.get(name)?.descriptor.unit).toBe('s');
      expect(points(m, name).map((p) => p.attributes)).toEqual([pool]);
    }
    const waited = pointValue(m, 'scaler.ledger.lock.wait.time', pool) as number;
    const held = pointValue(m, 'scaler.ledger.lock.hold.time', pool) as number;
    expect(waited).toBeGreaterThanOrEqual(0);
    expect(held).toBeGreaterThan(0);
    expect(held).toBeLessThan(60);
    // The lock histograms are opt-in: not created by default.
    expect(m.has('scaler.ledger.lock.wait.duration')).toBe(false);
    expect(m.has('scaler.ledger.lock.hold.duration')).toBe(false);
    expect(pointValue(m, 'scaler.ledger.reservations.lost', pool)).toBeUndefined();
  });

  it('records the lock wait and hold histograms with lockHistograms: true, agreeing with the totals', async () => {
    const ledger = make({ meterProvider: metrics.provider, lockHistograms: true });
    ledger.registerPool('p', { maxCpu: 4 });
    expect((await ledger.reserve('p', 'a1', 1, 0)).ok).toBe(true);
    expect((await ledger.reserve('p', 'a2', 1, 0)).ok).toBe(true);
    expect(await ledger.release('p', 'a1')).toBe(true);
    const m = await metrics.collect();
    const wait = pointValue(m, 'scaler.ledger.lock.wait.duration', pool) as Histogram;
    const hold = pointValue(m, 'scaler.ledger.lock.hold.duration', pool) as Histogram;
    expect(m.get('scaler.ledger.lock.wait.duration')?.descriptor.unit).toBe('s');
    expect(m.get('scaler.ledger.lock.hold.duration')?.descriptor.unit).toBe('s');
    expect(points(m, 'scaler.ledger.lock.hold.duration').map((p) => p.attributes)).toEqual([pool]);
    expect(wait.count).toBe(3);
    expect(hold.count).toBe(3);
    expect(hold.sum).toBeGreaterThan(0);
    // The cheap totals are there too, and sum the same seconds the histograms did.
    expect(pointValue(m, 'scaler.ledger.lock.cycles', pool)).toBe(3);
    expect(pointValue(m, 'scaler.ledger.lock.wait.time', pool)).toBeCloseTo(wait.sum!, 9);
    expect(pointValue(m, 'scaler.ledger.lock.hold.time', pool)).toBeCloseTo(hold.sum!, 9);
  });

  it('keeps lock totals per pool', async () => {
    const ledger = make({ meterProvider: metrics.provider });
    ledger.registerPool('p', { maxCpu: 4 });
    ledger.registerPool('q', { maxCpu: 4 });
    await ledger.reserve('p', 'a1', 1, 0);
    await ledger.reserve('q', 'b1', 1, 0);
    await ledger.release('q', 'b1');
    const m = await metrics.collect();
    expect(points(m, 'scaler.ledger.lock.cycles')).toEqual([
      { attributes: pool, value: 1 },
      { attributes: { ...pool, 'scaler.pool': 'q' }, value: 2 },
    ]);
  });

  it('counts lost reservations and errors by error.type', async () => {
    const ledger = make({ meterProvider: metrics.provider });
    const operator = make({ instanceId: 'operator' });
    ledger.registerPool('p', { maxCpu: 4 });
    operator.registerPool('p', { maxCpu: 4 });
    await ledger.reserve('p', 'a1', 1, 0);
    await ledger.reserve('p', 'a2', 1, 0);
    await operator.release('p', 'a1', { anyInstance: true });
    await operator.release('p', 'a2', { anyInstance: true });
    const error = await ledger.reserve('p', 'a3', 1, 0).catch((e: unknown) => e);
    expect(isLedgerLeaseExpiredError(error)).toBe(true);
    const m = await metrics.collect();
    expect(pointValue(m, 'scaler.ledger.reservations.lost', pool)).toBe(2);
    expect(
      pointValue(m, 'scaler.ledger.operations', {
        'scaler.ledger.operation': 'reserve',
        'scaler.result': 'error',
        'error.type': 'ERR_LEDGER_LEASE_EXPIRED',
      }),
    ).toBe(1);
    // No attribute carries an agent or instance id.
    for (const metric of m.values()) {
      for (const p of points(m, metric.descriptor.name)) {
        expect(JSON.stringify(p.attributes)).not.toMatch(/a1|a2|a3|"me"|operator/);
      }
    }
  });

  it('keeps usage observable without an operation: reads refresh it, and the background refresh runs', async () => {
    const writer = make({ instanceId: 'writer' });
    writer.registerPool('p', { maxCpu: 8 });
    const watcher = make({
      instanceId: 'watcher',
      meterProvider: metrics.provider,
      usageRefreshMs: 100,
    });
    watcher.registerPool('p', { maxCpu: 8 });
    // Nothing read yet: no usage point at all (never a made-up zero).
    expect(points(await metrics.collect(), 'scaler.ledger.cpu.reserved')).toEqual([]);
    await writer.reserve('p', 'w1', 2, 0);
    await watcher.getUsage('p');
    expect(pointValue(await metrics.collect(), 'scaler.ledger.cpu.reserved', pool)).toBe(2);
    await writer.reserve('p', 'w2', 3, 0);
    // The refresh timer (100 ms) reads the pool again.
    const deadline = Date.now() + 10_000;
    while (pointValue(await metrics.collect(), 'scaler.ledger.cpu.reserved', pool) !== 5) {
      if (Date.now() > deadline) throw new Error('the background refresh never read the pool');
      await new Promise((r) => setTimeout(r, 50));
    }
  });

  it('stops observing once closed', async () => {
    const ledger = make({ meterProvider: metrics.provider });
    ledger.registerPool('p', { maxCpu: 8 });
    await ledger.reserve('p', 'a', 1, 0);
    await ledger.close();
    // The SDK repeats a series' last point; a callback still registered would age it.
    const before = pointValue(await metrics.collect(), 'scaler.ledger.usage.age', pool);
    await new Promise((r) => setTimeout(r, 50));
    expect(pointValue(await metrics.collect(), 'scaler.ledger.usage.age', pool)).toBe(before);
  });

  it('refuses a bad provider or refresh interval, naming the option', () => {
    expect(() => make({ meterProvider: {} as never })).toThrow(/meterProvider.*getMeter/);
    expect(() => make({ tracerProvider: 3 as never })).toThrow(/tracerProvider.*getTracer/);
    expect(() => make({ meterProvider: metrics.provider, usageRefreshMs: 5 })).toThrow(
      /usageRefreshMs.*>= 100, got `5`/,
    );
    expect(() => make({ meterProvidr: metrics.provider } as never)).toThrow(/meterProvider/);
  });

  it('refuses a lockHistograms that is not a boolean, with or without a provider', () => {
    for (const bad of ['yes', 1, null]) {
      const named = `got \`${bad === null ? 'null' : typeof bad}\``;
      expect(() => make({ meterProvider: metrics.provider, lockHistograms: bad as never })).toThrow(
        TypeError,
      );
      expect(() => make({ meterProvider: metrics.provider, lockHistograms: bad as never })).toThrow(
        new RegExp(`lockHistograms.*boolean, ${named}`),
      );
      expect(() => make({ lockHistograms: bad as never })).toThrow(/lockHistograms/);
    }
    expect(() => make({ lockHistograms: false })).not.toThrow();
  });
});

describe('MachineLedger spans', () => {
  it('one span per call, with the lock wait as an event and the result', async () => {
    const ledger = make({ tracerProvider: traces.provider });
    ledger.registerPool('p', { maxCpu: 1 });
    await ledger.reserve('p', 'a1', 1, 0);
    await ledger.reserve('p', 'a2', 1, 0);
    await ledger.release('p', 'a1');
    const reserves = traces.named('scaler.ledger.reserve');
    expect(reserves.map((s) => s.attributes['scaler.result'])).toEqual(['granted', 'refused']);
    expect(reserves[1]!.attributes['scaler.limit.dimension']).toBe('cpu');
    for (const span of reserves) {
      expect(span.attributes['scaler.pool']).toBe('p');
      const event = span.events.find((e) => e.name === 'scaler.ledger.lock.acquired');
      expect(event?.attributes?.['scaler.ledger.lock.wait']).toBeGreaterThanOrEqual(0);
    }
    expect(traces.named('scaler.ledger.release')[0]!.attributes['scaler.result']).toBe('released');
  });

  it('records an error on the span', async () => {
    const ledger = make({ tracerProvider: traces.provider });
    ledger.registerPool('p', { maxCpu: 1 });
    await ledger.reserve('p', 'a1', 0.5, 0);
    await expect(ledger.reserve('p', 'a1', 0.5, 0)).rejects.toThrow(/already holds/);
    const failed = traces.named('scaler.ledger.reserve')[1]!;
    expect(failed.status.code).toBe(2);
    expect(failed.attributes['error.type']).toBe('ERR_DUPLICATE_RESERVATION');
    expect(failed.events.some((e) => e.name === 'exception')).toBe(true);
  });
});
