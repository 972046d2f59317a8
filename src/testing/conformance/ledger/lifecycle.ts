/**
 * The lifecycle checks of poolLedgerConformance: a closed instance's rows are reaped
 * by a peer, a closed ledger refuses work, a restarted instance adopts its rows,
 * bad input is refused and writes nothing.
 */
import {
  type ConformanceCheck,
  eventually,
  expectEqual,
  expectReject,
  expectTrue,
} from '../check.js';
import type { LedgerSuite } from './harness.js';

/** Close, reap, restart (adopt) and bad input. */
export function lifecycleChecks({
  check,
  rows,
  instanceOf,
  staleWait,
}: LedgerSuite): ConformanceCheck[] {
  return [
    check(
      'stale',
      "a closed instance's rows are left in place, then reaped by a peer; the capacity comes back",
      async ({ pool, pair }) => {
        const p = pool();
        const [a, b] = await pair(p, { maxCpu: 2 });
        expectEqual(await a.reserve(p, 'gone', 2, 0), { ok: true }, 'a reserves the whole pool');
        expectEqual(
          (await b.reserve(p, 'wait', 1, 0)).ok,
          false,
          'b is refused while a holds the pool',
        );
        const staleMs = staleWait(a);
        await a.close(); // without releaseAllForInstance
        let reaped = 0;
        await eventually(
          async () => {
            reaped += await b.reapStale(p);
            return reaped > 0;
          },
          staleMs,
          `a peer reaped nothing within ${staleMs} ms of the owner's close()`,
        );
        expectEqual(reaped, 1, 'rows reaped (the closed instance left exactly one)');
        expectEqual(await b.list(p), [], 'rows after the reap');
        expectEqual(
          await b.reserve(p, 'wait', 2, 0),
          { ok: true },
          'b reserves the freed capacity',
        );
        expectEqual(await b.reapStale(p), 0, 'a second reap (nothing left to reap)');
      },
    ),

    check(
      'closed',
      'a closed ledger refuses work, and close is idempotent',
      async ({ pool, open }) => {
        const p = pool();
        const a = await open('a');
        a.registerPool(p, { maxCpu: 2 });
        await a.close();
        await a.close();
        await expectReject(
          () => a.reserve(p, 'x', 1, 0),
          () => true,
          'reserve after close()',
        );
      },
    ),

    check(
      'adopt',
      "adopt takes a restarted instance's row over in one write (never counted twice), reserves a gone one again if it fits, and never takes another instance's row",
      async ({ pool, open }) => {
        const p = pool();
        const before = await open('a');
        const other = await open('b');
        for (const l of [before, other]) l.registerPool(p, { maxCpu: 2 });
        expectEqual(await before.reserve(p, 'x1', 1, 0), { ok: true }, 'reserve x1 (1 core)');
        expectEqual(await other.reserve(p, 'y1', 1, 0), { ok: true }, 'reserve y1 (1 core)');
        // The same instance id again: the host after a restart.
        const after = await open('a');
        after.registerPool(p, { maxCpu: 2 });
        expectTrue(
          typeof after.adopt === 'function',
          'adopt is not implemented: a restarted host cannot take its rows over',
        );
        // x1's row exists: taken over. x2 has none and the pool is full: refused.
        const first = await after.adopt!(p, [
          { agentId: 'x1', cpus: 1, memBytes: 0 },
          { agentId: 'x2', cpus: 1, memBytes: 0 },
        ]);
        expectEqual(first[0], { ok: true, adopted: true }, 'adopt x1 (its row exists)');
        expectEqual(first[1]?.ok, false, 'adopt x2 (no row, the pool is full)');
        expectEqual(
          await rows(other, p),
          [`${instanceOf(after)}/x1:1:0`, `${instanceOf(other)}/y1:1:0`].sort(),
          'rows after the adoption (one per agent)',
        );
        expectEqual(await other.getUsage(p), { cpus: 2, memBytes: 0 }, 'usage after the adoption');
        expectEqual(await other.release(p, 'y1'), true, 'release y1');
        expectEqual(await other.reserve(p, 'z1', 0, 0), { ok: true }, 'reserve z1 (0 cores)');
        expectEqual(
          await after.adopt!(p, [
            { agentId: 'x2', cpus: 1, memBytes: 0 },
            { agentId: 'z1', cpus: 0, memBytes: 0 },
          ]),
          [
            { ok: true, adopted: false },
            { ok: false, heldBy: instanceOf(other) },
          ],
          "adopt x2 (no row, it fits now) and z1 (another instance's row: never taken)",
        );
        await expectReject(
          () => after.adopt!(p, []),
          (e) => e instanceof Error,
          'adopt of no agents',
        );
        expectEqual(
          await rows(other, p),
          [
            `${instanceOf(after)}/x1:1:0`,
            `${instanceOf(after)}/x2:1:0`,
            `${instanceOf(other)}/z1:0:0`,
          ].sort(),
          'rows at the end',
        );
      },
    ),

    check(
      'input',
      'bad input is refused with an error and writes nothing',
      async ({ pool, open }) => {
        const p = pool();
        const a = await open('a');
        a.registerPool(p, { maxCpu: 2 });
        const bad: Array<[string, () => Promise<unknown>]> = [
          ['an unregistered pool', () => a.reserve(pool('unregistered'), 'x', 1, 0)],
          ['negative cpus', () => a.reserve(p, 'x', -1, 0)],
          ['NaN memory', () => a.reserve(p, 'x', 1, Number.NaN)],
          ['an empty agent id', () => a.reserve(p, '', 1, 0)],
          ['a pool name with a slash', () => a.reserve('../etc', 'x', 1, 0)],
        ];
        for (const [what, call] of bad)
          await expectReject(call, (e) => e instanceof Error, `reserve with ${what}`);
        expectEqual(await a.list(p), [], 'rows after the bad calls');
      },
    ),
  ];
}
