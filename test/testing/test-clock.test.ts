import { TestClock } from 'scaler-primitives/testing';
import { describe, expect, it } from 'vitest';

const T0 = '2026-01-05T09:00:00.000Z';

describe('TestClock', () => {
  it('starts at a Date, an ISO string or epoch ms, and refuses anything else', () => {
    expect(new TestClock(T0).now()).toBe(Date.parse(T0));
    expect(new TestClock(new Date(T0)).now()).toBe(Date.parse(T0));
    expect(new TestClock(Date.parse(T0)).date().toISOString()).toBe(T0);
    expect(new TestClock('2026-01-05').now()).toBe(Date.parse('2026-01-05T00:00:00Z'));
    for (const bad of ['tomorrow', '2026-13-45T00:00:00Z', '', Number.NaN, new Date('x'), null]) {
      expect(() => new TestClock(bad as never)).toThrow(TypeError);
    }
    expect(() => new TestClock(T0, { settleTurns: -1 })).toThrow(/settleTurns/);
    expect(() => new TestClock(T0, { turns: 2 } as never)).toThrow(/Unknown TestClock option/);
  });

  it('advance fires due timers in time order (creation order among equals), each at its instant', async () => {
    const clock = new TestClock(T0);
    const fired: Array<[string, number]> = [];
    const at = (name: string) => () => fired.push([name, clock.now() - Date.parse(T0)]);
    clock.setTimeout(at('c'), 300);
    clock.setTimeout(at('a'), 100);
    clock.setTimeout(at('b1'), 200);
    clock.setTimeout(at('b2'), 200);
    clock.setTimeout(at('late'), 1000);
    await clock.advance(500);
    expect(fired).toEqual([
      ['a', 100],
      ['b1', 200],
      ['b2', 200],
      ['c', 300],
    ]);
    expect(clock.now() - Date.parse(T0)).toBe(500);
    await clock.advanceTo('2026-01-05T09:00:01Z');
    expect(fired.at(-1)).toEqual(['late', 1000]);
  });

  it('lets the promise chain a timer starts settle before the next timer fires', async () => {
    const clock = new TestClock(T0);
    const log: string[] = [];
    clock.setTimeout(async () => {
      log.push('idle timeout');
      for (let i = 0; i < 50; i++) await Promise.resolve();
      await new Promise((resolve) => process.nextTick(resolve));
      log.push('destroyed');
    }, 1000);
    clock.setTimeout(() => log.push('next timer'), 1000);
    await clock.advance(1000);
    expect(log).toEqual(['idle timeout', 'destroyed', 'next timer']);
  });

  it('takes a real turn only while one would run something (an immediate here), at most settleTurns', async () => {
    for (const settleTurns of [0, 1]) {
      const clock = new TestClock(T0, { settleTurns });
      const log: string[] = [];
      clock.setTimeout(() => setImmediate(() => log.push('immediate')), 1000);
      clock.setTimeout(() => log.push('next timer'), 1000);
      await clock.advance(1000);
      // With no turn the immediate runs only after the advance, on a later real turn.
      expect(log).toEqual(settleTurns === 0 ? ['next timer'] : ['immediate', 'next timer']);
      await new Promise((resolve) => setImmediate(resolve));
    }
  });

  it('a chain that waits on the clock itself completes within the same advance', async () => {
    const clock = new TestClock(T0);
    const sleep = (ms: number) => new Promise<void>((r) => clock.setTimeout(r, ms));
    let done = 0;
    clock.setTimeout(async () => {
      await sleep(100);
      await sleep(100);
      done = clock.now() - Date.parse(T0);
    }, 100);
    await clock.advance(299);
    expect(done).toBe(0);
    await clock.advance(1);
    expect(done).toBe(300);
  });

  it('intervals repeat, clear cancels, and Node coerces bad delays to 1 ms', async () => {
    const clock = new TestClock(T0);
    let ticks = 0;
    const interval = clock.setInterval(() => {
      ticks++;
      if (ticks === 3) clock.clearInterval(interval);
    }, 10);
    let cancelled = false;
    const t = clock.setTimeout(() => {
      cancelled = true;
    }, 5);
    clock.clearTimeout(t);
    clock.clearTimeout(undefined);
    let coerced = -1;
    clock.setTimeout(() => {
      coerced = clock.now() - Date.parse(T0);
    }, -5);
    await clock.advance(100);
    expect(ticks).toBe(3);
    expect(cancelled).toBe(false);
    expect(coerced).toBe(1);
    expect(clock.pending()).toEqual([]);
  });

  it('runAll runs until no ref’d timer is left; unref’d ones fire on the way but keep nothing going', async () => {
    const clock = new TestClock(T0);
    let maintenance = 0;
    clock
      .setInterval(() => {
        maintenance++;
      }, 5000)
      .unref();
    const done: number[] = [];
    clock.setTimeout(() => {
      done.push(clock.now());
      clock.setTimeout(() => done.push(clock.now()), 60_000);
    }, 60_000);
    expect(await clock.runAll()).toBe(2 + 23);
    expect(done.map((t) => t - Date.parse(T0))).toEqual([60_000, 120_000]);
    // 5 s, 10 s ... 115 s: the one due at 120 s was scheduled after the timeout due then.
    expect(maintenance).toBe(23);
    expect(clock.pending()).toMatchObject([{ kind: 'interval', ref: false, intervalMs: 5000 }]);
  });

  it('runAll gives up after limit firings when a ref’d interval never stops', async () => {
    const clock = new TestClock(T0);
    clock.setInterval(function heartbeat() {}, 1000);
    await expect(clock.runAll({ limit: 50 })).rejects.toThrow(
      /fired 50 timers and ref'd timers remain \(#1 interval heartbeat due/,
    );
  });

  it('pending lists timers soonest first with their ref state', () => {
    const clock = new TestClock(T0);
    clock.setTimeout(function later() {}, 2000);
    const t = clock.setTimeout(function sooner() {}, 1000);
    expect(t.unref().hasRef()).toBe(false);
    expect(t.ref().hasRef()).toBe(true);
    t.unref();
    expect(clock.pending()).toEqual([
      {
        id: 2,
        kind: 'timeout',
        dueAt: Date.parse(T0) + 1000,
        due: '2026-01-05T09:00:01.000Z',
        inMs: 1000,
        ref: false,
        name: 'sooner',
      },
      {
        id: 1,
        kind: 'timeout',
        dueAt: Date.parse(T0) + 2000,
        due: '2026-01-05T09:00:02.000Z',
        inMs: 2000,
        ref: true,
        name: 'later',
      },
    ]);
  });

  it('refuses to go back, bad amounts, and overlapping advances', async () => {
    const clock = new TestClock(T0);
    await expect(clock.advance(-1)).rejects.toThrow(/finite number >= 0/);
    await expect(clock.advance(Number.POSITIVE_INFINITY)).rejects.toThrow(TypeError);
    await expect(clock.advanceTo('2026-01-05T08:00:00Z')).rejects.toThrow(/never goes back/);
    clock.setTimeout(() => {}, 10);
    const first = clock.advance(100);
    await expect(clock.advance(1)).rejects.toThrow(/already running/);
    await first;
    expect(clock.now()).toBe(Date.parse(T0) + 100);
  });

  it('a timer that throws rejects the advance at its instant', async () => {
    const clock = new TestClock(T0);
    clock.setTimeout(() => {
      throw new Error('boom');
    }, 40);
    await expect(clock.advance(100)).rejects.toThrow('boom');
    expect(clock.now()).toBe(Date.parse(T0) + 40);
    await clock.advance(60);
    expect(clock.now()).toBe(Date.parse(T0) + 100);
  });
});
