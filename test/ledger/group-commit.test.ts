import { describe, expect, it } from 'vitest';
import { GroupCommit, type Settled } from '../../src/ledger/group-commit.js';

describe('GroupCommit', () => {
  it('commits calls that arrive during a commit as one batch, answering each in order', async () => {
    const batches: Array<[string, number[]]> = [];
    const group = new GroupCommit<number, { value: number }>(async (pool, ops) => {
      batches.push([pool, ops]);
      await new Promise((r) => setTimeout(r, 10));
      return ops.map(
        (n): Settled<{ value: number }> =>
          n < 0 ? { ok: false, error: new Error(`bad ${n}`) } : { ok: true, value: n * 2 },
      );
    });
    const first = group.enqueue('a', 1);
    const rest = [2, -3, 4].map((n) =>
      group.enqueue('a', n).then(
        (answer) => answer.value,
        (e: Error) => e.message,
      ),
    );
    const other = group.enqueue('b', 5);
    expect((await first).value).toBe(2);
    expect(await Promise.all(rest)).toEqual([4, 'bad -3', 8]);
    expect((await other).value).toBe(10);
    expect(batches).toEqual([
      ['a', [1]],
      ['b', [5]],
      ['a', [2, -3, 4]],
    ]);
    expect(group.pools()).toEqual(['a', 'b']);
  });

  it('a failed commit rejects its whole batch and the next batch still runs', async () => {
    let calls = 0;
    const group = new GroupCommit<string, { value: string }>(async (_pool, ops) => {
      calls++;
      if (calls === 1) throw new Error('store down');
      return ops.map((op): Settled<{ value: string }> => ({ ok: true, value: op }));
    });
    await expect(group.enqueue('p', 'x')).rejects.toThrow('store down');
    expect((await group.enqueue('p', 'y')).value).toBe('y');
    await group.idle();
  });
});
