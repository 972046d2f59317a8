/**
 * NatsPoolLedger metrics and spans against a real `nats-server -js` on loopback.
 */
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { NatsPoolLedger } from '../../src/ledger/nats/nats-pool-ledger.js';
import { withNatsLedgerHooks } from '../../src/ledger/nats/options.js';
import { type NatsServer, startNatsServer } from '../helpers/nats-server.js';
import { MetricsHarness, points, pointValue, TracesHarness } from '../helpers/otel.js';
import { hasSystem } from '../helpers/system.js';

const ok = hasSystem(['nats-server'], 'NatsPoolLedger telemetry');
const pool = { 'scaler.pool': 'p', 'scaler.ledger.backend': 'nats' };

describe.runIf(ok)('NatsPoolLedger telemetry', () => {
  let server: NatsServer;
  let metrics: MetricsHarness;
  let traces: TracesHarness;
  const ledgers: NatsPoolLedger[] = [];
  let bucket = 0;

  beforeAll(async () => {
    server = await startNatsServer();
  });
  afterAll(async () => {
    await server?.stop();
  });
  beforeEach(() => {
    metrics = new MetricsHarness();
    traces = new TracesHarness();
    bucket++;
    conflictsSeen = 0;
  });
  afterEach(async () => {
    await Promise.all(ledgers.splice(0).map((l) => l.close()));
    await metrics.shutdown();
    await traces.shutdown();
  });

  let conflictsSeen = 0;
  async function connect(instanceId: string, telemetry = true) {
    const ledger = await NatsPoolLedger.connect(
      withNatsLedgerHooks(
        {
          servers: server.url,
          bucket: `otel-${bucket}`,
          instanceId,
          combine: false,
          ...(telemetry
            ? { meterProvider: metrics.provider, tracerProvider: traces.provider }
            : {}),
        },
        {
          onConflict: () => {
            if (telemetry) conflictsSeen++;
          },
        },
      ),
    );
    ledger.registerPool('p', { maxCpu: 2, maxMemoryBytes: 1000 });
    ledgers.push(ledger);
    return ledger;
  }

  it('records operations, usage as last read, and conflicts between two writers', async () => {
    const a = await connect('a');
    const b = await connect('b', false);
    expect((await a.reserve('p', 'a1', 1, 100)).ok).toBe(true);
    expect((await b.reserve('p', 'b1', 0.5, 200)).ok).toBe(true);
    expect((await a.reserve('p', 'a2', 1, 100)).ok).toBe(false); // 2.5 > 2 cpu
    expect(await a.release('p', 'a1')).toBe(true);
    // Contention: both write at once, one loses compare-and-set races and retries.
    await Promise.all(
      Array.from({ length: 10 }, (_, i) =>
        Promise.all([a.reserve('p', `ca${i}`, 0, 1), b.reserve('p', `cb${i}`, 0, 1)]),
      ),
    );
    const m = await metrics.collect();
    const ops = (operation: string, result: string) =>
      pointValue(m, 'scaler.ledger.operations', {
        ...pool,
        'scaler.ledger.operation': operation,
        'scaler.result': result,
      });
    expect(ops('reserve', 'granted')).toBe(11);
    expect(ops('reserve', 'refused')).toBe(1);
    expect(ops('release', 'released')).toBe(1);
    // The last document a read: b1 and every contention row.
    expect(pointValue(m, 'scaler.ledger.cpu.cap', pool)).toBe(2);
    expect(pointValue(m, 'scaler.ledger.memory.cap', pool)).toBe(1000);
    const agents = pointValue(m, 'scaler.ledger.agents', pool) as number;
    expect(agents).toBeGreaterThanOrEqual(11); // b1 + a's 10, plus b's rows a saw
    expect(pointValue(m, 'scaler.ledger.cpu.reserved', pool)).toBe(0.5);
    // Every compare-and-set race a lost is counted (the ledger's own hook says how many).
    const conflicts = points(m, 'scaler.ledger.cas.conflicts');
    expect(conflicts.reduce((sum, p) => sum + (p.value as number), 0)).toBe(conflictsSeen);
    for (const p of conflicts) expect(p.attributes).toEqual(pool);
    // No lock in NATS: no lock totals (and no lock histograms unless asked for).
    expect(points(m, 'scaler.ledger.lock.cycles')).toEqual([]);
    expect(points(m, 'scaler.ledger.lock.wait.time')).toEqual([]);
    expect(m.has('scaler.ledger.lock.wait.duration')).toBe(false);
    // Reads refresh the gauges too.
    await b.release('p', 'b1');
    await a.getUsage('p');
    expect(pointValue(await metrics.collect(), 'scaler.ledger.cpu.reserved', pool)).toBe(0);
  });

  it('counts reaped rows of a closed peer and makes spans', async () => {
    const a = await connect('a');
    const peer = await connect('peer', false);
    await peer.reserve('p', 'gone', 1, 1);
    await peer.close(); // its lease ends: its row is stale for a at once
    expect(await a.reapStale('p')).toBe(1);
    const m = await metrics.collect();
    expect(points(m, 'scaler.ledger.rows.reaped')).toEqual([
      { attributes: { ...pool, 'scaler.stale.reason': 'lease-expired' }, value: 1 },
    ]);
    const [reap] = traces.named('scaler.ledger.reap');
    expect(reap!.attributes).toMatchObject({ ...pool, 'scaler.result': 'ok' });
  });

  it('refuses a bad provider before connecting', async () => {
    await expect(
      NatsPoolLedger.connect({
        servers: 'nats://127.0.0.1:1',
        instanceId: 'x',
        meterProvider: {} as never,
      }),
    ).rejects.toThrow(/meterProvider.*getMeter/);
  });

  it('refuses a lockHistograms that is not a boolean before connecting', async () => {
    await expect(
      NatsPoolLedger.connect({
        servers: 'nats://127.0.0.1:1',
        instanceId: 'x',
        meterProvider: metrics.provider,
        lockHistograms: 'on' as never,
      }),
    ).rejects.toThrow(/lockHistograms.*boolean, got `string`/);
  });
});
