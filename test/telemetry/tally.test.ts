import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  KeyedCache,
  type KeyPart,
  type OtelAttributes,
  type OtelMeter,
  type OtelObservableCallback,
  Tally,
} from '../../src/internal/telemetry/index.js';
import { MetricsHarness, points } from '../helpers/otel.js';

describe('KeyedCache', () => {
  it('makes the value of a key once and finds it again without making it', () => {
    const made: KeyPart[][] = [];
    const cache = new KeyedCache((a, b, c, d, e) => {
      made.push([a, b, c, d, e]);
      return { key: [a, b, c, d, e].join('|') };
    });
    const first = cache.get('spawned', 'vm', 'pool-cap', 'host', 'cpu');
    expect(cache.get('spawned', 'vm', 'pool-cap', 'host', 'cpu')).toBe(first);
    expect(cache.get('spawned', 'vm')).not.toBe(first);
    expect(cache.get('spawned', 'vm', 'pool-cap', 'host', 'memory')).not.toBe(first);
    expect(made).toHaveLength(3);
  });

  it('treats trailing undefined parts as absent, and undefined inside a key as a part', () => {
    const cache = new KeyedCache((a, b, c) => ({ a, b, c }));
    const short = cache.get('a', 'b');
    expect(cache.get('a', 'b', undefined, undefined, undefined)).toBe(short);
    const gap = cache.get('a', undefined, 'c');
    expect(gap).toEqual({ a: 'a', b: undefined, c: 'c' });
    expect(gap).not.toBe(short);
    expect(cache.get('a', undefined, 'c')).toBe(gap);
    // Parts are compared by value and type: false, 0 and '' are three keys.
    const kinds = [cache.get('x', false), cache.get('x', 0), cache.get('x', '')];
    expect(new Set(kinds).size).toBe(3);
  });

  it('keeps at most 10,000 keys; past that, find answers undefined and get makes a fresh value', () => {
    let made = 0;
    const cache = new KeyedCache((a) => ({ a, n: ++made }));
    for (let i = 0; i < 10_000; i++) cache.get(`k${i}`);
    expect(made).toBe(10_000);
    expect(cache.find('k0')).toEqual({ a: 'k0', n: 1 });
    expect(cache.find('new')).toBeUndefined();
    const a = cache.get('new');
    const b = cache.get('new');
    expect(a).toEqual({ a: 'new', n: 10_001 });
    expect(b).toEqual({ a: 'new', n: 10_002 });
    expect(cache.find('new')).toBeUndefined();
  });
});

describe('Tally (real SDK MeterProvider)', () => {
  let metrics: MetricsHarness;
  beforeEach(() => {
    metrics = new MetricsHarness();
  });
  afterEach(async () => {
    await metrics.shutdown();
  });

  it('reports each key total as an observable counter point with its attributes', async () => {
    const meter = metrics.provider.getMeter('t');
    let described = 0;
    const tally = new Tally(meter, 'test.ops', { unit: '{op}', description: 'ops' }, (a, b) => {
      described++;
      return b === undefined ? { op: a as string } : { op: a as string, result: b as string };
    });
    for (let i = 0; i < 5; i++) tally.add(1, 'reserve', 'granted');
    tally.add(2, 'reserve', 'refused');
    tally.add(1, 'release');
    expect(described).toBe(3);
    const m = await metrics.collect();
    expect(m.get('test.ops')?.descriptor.unit).toBe('{op}');
    const got = points(m, 'test.ops')
      .map((p) => ({ ...p.attributes, value: p.value }))
      .sort((x, y) => JSON.stringify(x).localeCompare(JSON.stringify(y)));
    expect(got).toEqual([
      { op: 'release', value: 1 },
      { op: 'reserve', result: 'granted', value: 5 },
      { op: 'reserve', result: 'refused', value: 2 },
    ]);
    // Cumulative: later adds grow the same points.
    tally.add(1, 'release');
    const again = await metrics.collect();
    expect(points(again, 'test.ops').find((p) => p.attributes.op === 'release')?.value).toBe(2);
  });

  it('counts keys past the bound into one otel.metric.overflow point, and stops reporting on close', () => {
    // A structural meter that keeps the callback (the SDK would cap the points
    // at its own cardinality limit of 2,000 before ours is reached).
    let callback: OtelObservableCallback | undefined;
    const meter = {
      createObservableCounter: () => ({
        addCallback: (cb: OtelObservableCallback) => {
          callback = cb;
        },
        removeCallback: (cb: OtelObservableCallback) => {
          if (callback === cb) callback = undefined;
        },
      }),
    } as unknown as OtelMeter;
    const collect = () => {
      const seen: Array<{ value: number; attributes?: OtelAttributes }> = [];
      void callback?.({ observe: (value, attributes) => seen.push({ value, attributes }) });
      return seen;
    };
    const tally = new Tally(meter, 'test.many', {}, (a) => ({ key: a as string }));
    expect(collect()).toEqual([]); // nothing counted: no point, not even the overflow
    for (let i = 0; i < 10_000; i++) tally.add(1, `k${i}`);
    tally.add(3, 'one-too-many');
    tally.add(4, 'another');
    tally.add(1, 'k9999');
    const all = collect();
    expect(all).toHaveLength(10_001);
    expect(all.find((p) => p.attributes?.key === 'k9999')?.value).toBe(2);
    expect(all.at(-1)).toEqual({ value: 7, attributes: { 'otel.metric.overflow': true } });
    tally.close();
    expect(callback).toBeUndefined();
  });
});
