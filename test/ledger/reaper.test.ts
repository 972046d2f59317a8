import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { Reaper } from '../../src/ledger/reaper.js';

describe('Reaper', () => {
  beforeEach(() => {
    vi.useFakeTimers();
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  function make(pools: string[]) {
    const reaped: string[] = [];
    const reaper = new Reaper(
      () => pools,
      async (pool) => {
        reaped.push(pool);
        if (pool === 'bad') throw new Error('store down');
      },
    );
    return { reaper, reaped };
  }

  it.each([-1, Number.NaN, Number.POSITIVE_INFINITY, '5'])('refuses interval %j', (value) => {
    const { reaper } = make([]);
    expect(() => reaper.start(value as number)).toThrow(
      `Expected \`intervalMs\` to be a finite number >= 0, got \`${String(value)}\``,
    );
  });

  it('reaps every pool on each tick, reading the pools anew, and survives a failed reap', async () => {
    const pools = ['a', 'bad'];
    const { reaper, reaped } = make(pools);
    reaper.start(100);
    reaper.start(10); // idempotent: the first interval stays
    await vi.advanceTimersByTimeAsync(99);
    expect(reaped).toEqual([]);
    await vi.advanceTimersByTimeAsync(1);
    expect(reaped).toEqual(['a', 'bad']);
    pools.push('c');
    await vi.advanceTimersByTimeAsync(100);
    expect(reaped).toEqual(['a', 'bad', 'a', 'bad', 'c']);
    reaper.stop();
    await vi.advanceTimersByTimeAsync(500);
    expect(reaped).toHaveLength(5);
  });

  it('starts again after stop, but never after close', async () => {
    const { reaper, reaped } = make(['a']);
    reaper.start(100);
    reaper.stop();
    reaper.start(100);
    await vi.advanceTimersByTimeAsync(100);
    expect(reaped).toEqual(['a']);
    reaper.close();
    reaper.start(100);
    await vi.advanceTimersByTimeAsync(1000);
    expect(reaped).toEqual(['a']);
    expect(vi.getTimerCount()).toBe(0);
  });
});
