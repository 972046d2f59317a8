import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Histogram } from '@opentelemetry/sdk-metrics';
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  ParentBasedSampler,
  type Sampler,
  SamplingDecision,
  SimpleSpanProcessor,
} from '@opentelemetry/sdk-trace-base';
import { MachineLedger } from 'scaler-primitives/ledger';
import { type ScalerConfigInput, ScalerManager } from 'scaler-primitives/manager';
import { FakeBackend, TestClock } from 'scaler-primitives/testing';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { MetricsHarness, points, pointValue, TracesHarness } from '../helpers/otel.js';

const GiB = 2 ** 30;
const config: ScalerConfigInput = {
  globalMaxAgents: 10,
  resourceCap: { maxCpu: 16 },
  machinePools: { host: { maxCpu: 2, maxMemoryBytes: 8 * GiB } },
  scalers: [
    {
      name: 'vm',
      type: 'firecracker',
      maxAgents: 4,
      machinePool: 'host',
      resourceCap: { maxCpu: 4 },
      labelSets: [{ labels: ['linux'], resources: { cpus: 1, memory: '1Gi' } }],
    },
  ],
};

let dir: string;
let metrics: MetricsHarness;
let traces: TracesHarness;
let ledger: MachineLedger;
let clock: TestClock;
let backend: FakeBackend;
let manager: ScalerManager;

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'manager-otel-'));
  metrics = new MetricsHarness();
  traces = new TracesHarness();
  clock = new TestClock('2026-01-05T09:00:00Z');
  ledger = new MachineLedger({
    instanceId: 'otel',
    dir,
    bootId: 'boot-1',
    fsync: false,
    meterProvider: metrics.provider,
    tracerProvider: traces.provider,
  });
  backend = new FakeBackend({ clock, latencyMs: { spawn: 2000 } });
  let n = 0;
  manager = new ScalerManager({
    config,
    backends: [{ name: 'vm', backend }],
    ledgers: { host: ledger },
    clock,
    generateAgentId: (scaler) => `${scaler}-${++n}`,
    telemetry: {
      meterProvider: metrics.provider,
      tracerProvider: traces.provider,
      spawnDurationHistogram: true,
    },
  });
  backend.attach(manager);
});

afterEach(async () => {
  await manager.shutdownAll({ timeoutMs: 0 }).catch(() => undefined);
  await ledger.close();
  await metrics.shutdown();
  await traces.shutdown();
  rmSync(dir, { recursive: true, force: true });
});

/** Drive the test clock until `promise` settles (the ledger's I/O is real). */
async function drive<T>(promise: Promise<T>): Promise<T> {
  let done = false;
  promise.then(
    () => {
      done = true;
    },
    () => {
      done = true;
    },
  );
  for (let i = 0; i < 1000 && !done; i++) {
    await new Promise((r) => setTimeout(r, 2));
    const next = clock.pending()[0];
    if (next !== undefined && !done) await clock.advanceTo(next.dueAt);
  }
  return promise;
}

const hist = (v: unknown) => v as Histogram;

describe('ScalerManager metrics', () => {
  it('records every instrument after a scripted scenario', async () => {
    expect((await drive(manager.requestScale({ jobId: 'job-1', labels: ['linux'] }))).kind).toBe(
      'spawned',
    );
    await clock.advance(5000);
    backend.register('vm-1'); // 2 s spawn + 5 s = 7 s to registration
    expect((await drive(manager.requestScale({ jobId: 'job-2', labels: ['linux'] }))).kind).toBe(
      'spawned',
    );
    // The pool (2 cpu) is full: job-3 waits.
    const refused = await drive(manager.requestScale({ jobId: 'job-3', labels: ['linux'] }));
    expect(refused.kind).toBe('at-capacity');
    await clock.advance(3000);
    await drive(manager.requestScale({ jobId: 'job-3', labels: ['linux'] })); // refused again: the wait starts at the first refusal
    await manager.onAgentDisconnected('vm-1');
    const third = await drive(manager.requestScale({ jobId: 'job-3', labels: ['linux'] }));
    expect(third.kind).toBe('spawned');
    // A backend failure.
    await manager.onAgentDisconnected('vm-2');
    backend.failNext(1, new Error('cloud quota'));
    expect((await drive(manager.requestScale({ jobId: 'job-4', labels: ['linux'] }))).kind).toBe(
      'spawn-failed',
    );

    const m = await metrics.collect();
    const requests = (result: string, extra: Record<string, unknown> = {}) =>
      pointValue(m, 'scaler.scale.requests', { 'scaler.result': result, ...extra });
    expect(m.get('scaler.scale.requests')?.descriptor.unit).toBe('{request}');
    expect(requests('spawned', { 'scaler.name': 'vm' })).toBe(3);
    expect(
      requests('at-capacity', {
        'scaler.limit': 'pool-cap',
        'scaler.pool': 'host',
        'scaler.limit.dimension': 'cpu',
      }),
    ).toBe(2);
    expect(requests('spawn-failed')).toBe(1);

    expect(
      pointValue(m, 'scaler.spawns', { 'scaler.outcome': 'spawned', 'scaler.warm': false }),
    ).toBe(3);
    expect(
      pointValue(m, 'scaler.spawns', { 'scaler.outcome': 'failed', 'scaler.stage': 'spawn' }),
    ).toBe(1);

    const spawn = hist(pointValue(m, 'scaler.spawn.duration', { 'scaler.outcome': 'spawned' }));
    expect(m.get('scaler.spawn.duration')?.descriptor.unit).toBe('s');
    expect(spawn.count).toBe(3);
    expect(spawn.sum).toBe(6); // three 2 s spawns on the test clock
    expect(hist(pointValue(m, 'scaler.spawn.duration', { 'scaler.outcome': 'failed' })).count).toBe(
      1,
    );

    const registration = hist(
      pointValue(m, 'scaler.agent.registration.duration', { 'scaler.name': 'vm' }),
    );
    expect(registration.count).toBe(1);
    expect(registration.sum).toBe(7);

    const wait = hist(pointValue(m, 'scaler.job.wait.duration', { 'scaler.name': 'vm' }));
    // Only job-3 waited: 3 s between its first refusal and the retry, plus its 2 s spawn.
    expect(wait.count).toBe(1);
    expect(wait.sum).toBe(5);
    expect(wait.max).toBe(5);

    // Gauges: vm-3 spawned and not registered; vm-1, vm-2 gone.
    const agents = (state: string) =>
      pointValue(m, 'scaler.agents', { 'scaler.name': 'vm', 'scaler.agent.state': state });
    expect(m.get('scaler.agents')?.descriptor.unit).toBe('{agent}');
    expect(agents('spawning')).toBe(1);
    expect(agents('idle')).toBe(0);
    expect(agents('busy')).toBe(0);
    expect(pointValue(m, 'scaler.agents.limit', { 'scaler.scope': 'orchestrator' })).toBe(10);
    expect(
      pointValue(m, 'scaler.agents.limit', { 'scaler.scope': 'scaler', 'scaler.name': 'vm' }),
    ).toBe(4);
    const scope = (name: string, attrs: Record<string, unknown>) => pointValue(m, name, attrs);
    expect(scope('scaler.cpu.reserved', { 'scaler.scope': 'orchestrator' })).toBe(1);
    expect(scope('scaler.cpu.reserved', { 'scaler.scope': 'scaler', 'scaler.name': 'vm' })).toBe(1);
    expect(scope('scaler.cpu.reserved', { 'scaler.scope': 'pool', 'scaler.pool': 'host' })).toBe(1);
    expect(scope('scaler.memory.reserved', { 'scaler.scope': 'pool', 'scaler.pool': 'host' })).toBe(
      GiB,
    );
    expect(m.get('scaler.memory.reserved')?.descriptor.unit).toBe('By');
    expect(scope('scaler.cpu.cap', { 'scaler.scope': 'orchestrator' })).toBe(16);
    expect(scope('scaler.cpu.cap', { 'scaler.scope': 'scaler', 'scaler.name': 'vm' })).toBe(4);
    expect(scope('scaler.cpu.cap', { 'scaler.scope': 'pool', 'scaler.pool': 'host' })).toBe(2);
    expect(scope('scaler.memory.cap', { 'scaler.scope': 'pool', 'scaler.pool': 'host' })).toBe(
      8 * GiB,
    );
    // No memory cap at the orchestrator: no point rather than a made-up value.
    expect(scope('scaler.memory.cap', { 'scaler.scope': 'orchestrator' })).toBeUndefined();
    expect(pointValue(m, 'scaler.backoff.failures', { 'scaler.name': 'vm' })).toBe(1);
    expect(pointValue(m, 'scaler.backoff.open', { 'scaler.name': 'vm' })).toBe(0);
    // The ledger beside it reports the whole pool as last read under the lock.
    expect(pointValue(m, 'scaler.ledger.cpu.reserved', { 'scaler.pool': 'host' })).toBe(1);

    // Low cardinality: no agent or job id anywhere in the attributes.
    for (const name of m.keys()) {
      for (const p of points(m, name)) {
        expect(JSON.stringify(p.attributes)).not.toMatch(/vm-\d|job-\d/);
      }
    }
  });

  it('counts destroys by reason and opens the backoff gauge', async () => {
    backend.failNext(3, new Error('down'));
    for (const job of ['a', 'b', 'c'])
      await drive(manager.requestScale({ jobId: job, labels: ['linux'] }));
    expect((await drive(manager.requestScale({ jobId: 'd', labels: ['linux'] }))).kind).toBe(
      'backing-off',
    );
    const m = await metrics.collect();
    expect(pointValue(m, 'scaler.backoff.open', { 'scaler.name': 'vm' })).toBe(1);
    expect(pointValue(m, 'scaler.backoff.failures', { 'scaler.name': 'vm' })).toBe(3);
    expect(
      pointValue(m, 'scaler.scale.requests', {
        'scaler.result': 'backing-off',
        'scaler.limit': 'backing-off',
      }),
    ).toBe(1);
  });

  it('records scaler.spawn.duration only when spawnDurationHistogram is on; scaler.spawns always', async () => {
    const own = new MetricsHarness();
    const quietBackend = new FakeBackend({ clock });
    const quiet = new ScalerManager({
      config: {
        ...config,
        machinePools: undefined,
        scalers: [{ ...config.scalers[0]!, machinePool: undefined }],
      },
      backends: [{ name: 'vm', backend: quietBackend }],
      clock,
      telemetry: { meterProvider: own.provider },
    });
    try {
      expect((await drive(quiet.requestScale({ jobId: 'job-1', labels: ['linux'] }))).kind).toBe(
        'spawned',
      );
      // Counted without the histogram: a failed backend spawn too.
      quietBackend.failNext(1, new Error('cloud quota'));
      expect((await drive(quiet.requestScale({ jobId: 'job-2', labels: ['linux'] }))).kind).toBe(
        'spawn-failed',
      );
      const m = await own.collect();
      expect(m.has('scaler.spawn.duration')).toBe(false);
      expect(pointValue(m, 'scaler.spawns', { 'scaler.outcome': 'spawned' })).toBe(1);
      expect(
        pointValue(m, 'scaler.spawns', { 'scaler.outcome': 'failed', 'scaler.stage': 'spawn' }),
      ).toBe(1);
      expect(pointValue(m, 'scaler.scale.requests', { 'scaler.result': 'spawned' })).toBe(1);
      expect(pointValue(m, 'scaler.scale.requests', { 'scaler.result': 'spawn-failed' })).toBe(1);
    } finally {
      await quiet.shutdownAll({ timeoutMs: 0 });
      await own.shutdown();
    }
  });

  it('refuses a spawnDurationHistogram that is not a boolean, even without a provider', () => {
    for (const bad of ['yes', 1, null]) {
      expect(
        () =>
          new ScalerManager({
            config,
            backends: [{ name: 'vm', backend: new FakeBackend({ clock }) }],
            ledgers: { host: ledger },
            clock,
            telemetry: { spawnDurationHistogram: bad as unknown as boolean },
          }),
      ).toThrow(/Expected `spawnDurationHistogram` to be a boolean, got `(string|number|null)`/);
    }
  });

  it('counts destroys by reason', async () => {
    expect((await drive(manager.requestScale({ jobId: 'job-1', labels: ['linux'] }))).kind).toBe(
      'spawned',
    );
    await clock.advance(301_000); // past registrationTimeoutMs: pruned at the next pass
    await drive(manager.maintain());
    const m = await metrics.collect();
    expect(
      pointValue(m, 'scaler.agents.destroyed', { 'scaler.name': 'vm', 'scaler.reason': 'pruned' }),
    ).toBe(1);
    expect(m.get('scaler.agents.destroyed')?.descriptor.unit).toBe('{agent}');
  });
});

describe('ScalerManager spans', () => {
  it('requestScale → pool reserve (→ ledger reserve with the lock wait) and backend spawn', async () => {
    await drive(manager.requestScale({ jobId: 'job-1', labels: ['linux'] }));
    const [scale] = traces.named('scaler.request_scale');
    expect(scale!.attributes).toMatchObject({
      'scaler.result': 'spawned',
      'scaler.name': 'vm',
      'scaler.job.id': 'job-1',
      'scaler.agent.id': 'vm-1',
    });
    const reserve = traces.named('scaler.pool.reserve')[0]!;
    const spawn = traces.named('scaler.backend.spawn')[0]!;
    const ledgerSpan = traces.named('scaler.ledger.reserve')[0]!;
    const id = scale!.spanContext().spanId;
    expect(traces.parentOf(reserve)).toBe(id);
    expect(traces.parentOf(spawn)).toBe(id);
    expect(traces.parentOf(ledgerSpan)).toBe(reserve.spanContext().spanId);
    expect(ledgerSpan.events.map((e) => e.name)).toContain('scaler.ledger.lock.acquired');
    expect(reserve.attributes['scaler.result']).toBe('granted');
    // One trace.
    expect(
      new Set([scale, reserve, spawn, ledgerSpan].map((s) => s!.spanContext().traceId)).size,
    ).toBe(1);
  });

  it('records the limit hit and a failed spawn as an error', async () => {
    await drive(manager.requestScale({ jobId: 'j1', labels: ['linux'] }));
    await drive(manager.requestScale({ jobId: 'j2', labels: ['linux'] }));
    await drive(manager.requestScale({ jobId: 'j3', labels: ['linux'] }));
    const third = traces.named('scaler.request_scale')[2]!;
    expect(third.attributes).toMatchObject({
      'scaler.result': 'at-capacity',
      'scaler.limit': 'pool-cap',
      'scaler.pool': 'host',
    });
    const refusedReserve = traces.named('scaler.pool.reserve')[2]!;
    expect(refusedReserve.attributes['scaler.result']).toBe('refused');
    await manager.onAgentDisconnected('vm-1');
    backend.failNext(1, new Error('cloud quota'));
    await drive(manager.requestScale({ jobId: 'j4', labels: ['linux'] }));
    const failed = traces.named('scaler.request_scale')[3]!;
    expect(failed.status).toMatchObject({ code: 2, message: 'cloud quota' });
    const spawn = traces.named('scaler.backend.spawn').at(-1)!;
    expect(spawn.status.code).toBe(2);
    expect(spawn.events.some((e) => e.name === 'exception')).toBe(true);
  });
});

describe('ScalerManager spans, sampled out', () => {
  it('a sampled-out requestScale keeps its reserve, ledger and spawn children out, and still counts', async () => {
    const exporter = new InMemorySpanExporter();
    // Roots are sampled, except requestScale's: children that lost their parent
    // would be roots, sampled in, and show up in the exporter.
    const notScale: Sampler = {
      shouldSample: (_context, _traceId, name) => ({
        decision:
          name === 'scaler.request_scale'
            ? SamplingDecision.NOT_RECORD
            : SamplingDecision.RECORD_AND_SAMPLED,
      }),
      toString: () => 'not-scale',
    };
    const sampledOut = new BasicTracerProvider({
      sampler: new ParentBasedSampler({ root: notScale }),
      spanProcessors: [new SimpleSpanProcessor(exporter)],
    });
    const own = new MetricsHarness();
    const ownDir = mkdtempSync(join(tmpdir(), 'manager-otel-off-'));
    const ownLedger = new MachineLedger({
      instanceId: 'off',
      dir: ownDir,
      bootId: 'boot-1',
      fsync: false,
      tracerProvider: sampledOut,
    });
    const quiet = new ScalerManager({
      config,
      backends: [{ name: 'vm', backend: new FakeBackend({ clock }) }],
      ledgers: { host: ownLedger },
      clock,
      telemetry: { meterProvider: own.provider, tracerProvider: sampledOut },
    });
    try {
      expect((await drive(quiet.requestScale({ jobId: 'job-1', labels: ['linux'] }))).kind).toBe(
        'spawned',
      );
      await ownLedger.release('host', 'never-held'); // a root of its own: sampled in
      expect(exporter.getFinishedSpans().map((span) => span.name)).toEqual([
        'scaler.ledger.release',
      ]);
      const m = await own.collect();
      expect(pointValue(m, 'scaler.scale.requests', { 'scaler.result': 'spawned' })).toBe(1);
    } finally {
      await quiet.shutdownAll({ timeoutMs: 0 });
      await ownLedger.close();
      await own.shutdown();
      await sampledOut.shutdown();
      rmSync(ownDir, { recursive: true, force: true });
    }
  });
});

describe('ScalerManager instruments', () => {
  it('are made once, at construction, from a meter named after the package', async () => {
    const made: string[] = [];
    const scopes: string[] = [];
    const provider = {
      getMeter(name: string, version?: string) {
        scopes.push(`${name}@${version}`);
        const meter = metrics.provider.getMeter(name, version);
        return new Proxy(meter, {
          get(target, key) {
            const value = Reflect.get(target, key);
            if (typeof value !== 'function') return value;
            return (...args: unknown[]) => {
              made.push(String(args[0]));
              return value.apply(target, args);
            };
          },
        });
      },
    };
    const own = new ScalerManager({
      config,
      backends: [{ name: 'vm', backend: new FakeBackend({ clock }) }],
      ledgers: { host: ledger },
      clock,
      telemetry: { meterProvider: provider },
    });
    const atConstruction = made.length;
    expect(scopes).toEqual(['scaler-primitives@0.1.0']);
    expect(atConstruction).toBeGreaterThan(10);
    await drive(own.requestScale({ jobId: 'x', labels: ['linux'] }));
    await metrics.collect();
    expect(made.length).toBe(atConstruction);
    await own.shutdownAll({ timeoutMs: 0 });
  });
});
