/**
 * The ownership checks of poolLedgerConformance: release is idempotent, an instance
 * releases only its own rows unless an operator path names another, duplicates are
 * refused, `releaseAllForInstance` takes only this instance's rows.
 */

import { ErrorCode, isScalerError } from '../../../errors/index.js';
import { type ConformanceCheck, expectEqual, expectReject } from '../check.js';
import type { LedgerSuite } from './harness.js';

/** Release, ownership of rows, the operator paths and duplicates. */
export function ownershipChecks({ check, rows, instanceOf }: LedgerSuite): ConformanceCheck[] {
  return [
    check(
      'release',
      'release is idempotent and answers whether a row was removed',
      async ({ pool, open }) => {
        const p = pool();
        const a = await open('a');
        a.registerPool(p, { maxCpu: 2 });
        expectEqual(await a.reserve(p, 'x', 2, 0), { ok: true }, 'reserve x');
        expectEqual(await a.release(p, 'x'), true, 'first release of x');
        expectEqual(await a.release(p, 'x'), false, 'second release of x');
        expectEqual(
          await a.release(p, 'never-reserved'),
          false,
          'release of an agent that holds nothing',
        );
        expectEqual(await a.getUsage(p), { cpus: 0, memBytes: 0 }, 'usage after the releases');
        expectEqual(await a.list(p), [], 'rows after the releases');
        expectEqual(await a.reserve(p, 'x', 2, 0), { ok: true }, 'reserve x again');
      },
    ),

    check(
      'own-rows',
      "a second instance cannot release the first one's row (fail closed)",
      async ({ pool, pair }) => {
        const p = pool();
        const [a, b] = await pair(p, { maxCpu: 2 });
        expectEqual(await a.reserve(p, 'x', 1, 0), { ok: true }, 'a reserves x');
        expectEqual(await b.release(p, 'x'), false, "b releases a's row");
        expectEqual(await rows(b, p), [`${instanceOf(a)}/x:1:0`], "rows after b's release");
        expectEqual(await b.getUsage(p), { cpus: 1, memBytes: 0 }, "usage after b's release");
        expectEqual(await a.release(p, 'x'), true, 'a releases its own row');
      },
    ),

    check(
      'operator',
      "the operator paths remove another instance's row: anyInstance, or the named instance only",
      async ({ pool, pair }) => {
        const p = pool();
        const [a, b] = await pair(p, { maxCpu: 2 });
        expectEqual(await a.reserve(p, 'x', 1, 0), { ok: true }, 'a reserves x');
        expectEqual(await a.reserve(p, 'y', 1, 0), { ok: true }, 'a reserves y');
        expectEqual(
          await b.release(p, 'x', { instanceId: `${instanceOf(b)}-other` }),
          false,
          'release x naming another instance',
        );
        expectEqual(
          await b.release(p, 'x', { instanceId: instanceOf(a) }),
          true,
          'release x naming its owner',
        );
        expectEqual(
          await b.release(p, 'y', { anyInstance: true }),
          true,
          'release y with anyInstance',
        );
        expectEqual(
          await b.release(p, 'y', { anyInstance: true }),
          false,
          'release y with anyInstance again',
        );
        expectEqual(await a.list(p), [], 'rows after the operator releases');
        await expectReject(
          () => b.release(p, 'x', { anyInstance: true, instanceId: 'z' } as never),
          (e) => e instanceof TypeError,
          'release with both anyInstance and instanceId',
        );
        await expectReject(
          () => b.release(p, 'x', { everyone: true } as never),
          (e) => e instanceof TypeError || isScalerError(e, ErrorCode.INVALID_INPUT),
          'release with an unknown option',
        );
      },
    ),

    check(
      'duplicate',
      'an agent that holds a row cannot reserve again in the same pool',
      async ({ pool, pair }) => {
        const p = pool();
        const [a, b] = await pair(p, { maxCpu: 8 });
        expectEqual(await a.reserve(p, 'x', 1, 0), { ok: true }, 'reserve x');
        for (const [who, l] of [
          ['a', a],
          ['b', b],
        ] as const) {
          await expectReject(
            () => l.reserve(p, 'x', 1, 0),
            (e) => isScalerError(e) && e.code === 'ERR_DUPLICATE_RESERVATION',
            `instance ${who} reserves x again (expected ERR_DUPLICATE_RESERVATION)`,
          );
        }
        expectEqual(await a.getUsage(p), { cpus: 1, memBytes: 0 }, 'usage after the duplicates');
      },
    ),

    check(
      'release-all',
      "releaseAllForInstance removes this instance's rows in every pool, and no one else's",
      async ({ pool, open }) => {
        const p1 = pool('one');
        const p2 = pool('two');
        const a = await open('a');
        const b = await open('b');
        for (const l of [a, b]) for (const p of [p1, p2]) l.registerPool(p, { maxCpu: 8 });
        await a.reserve(p1, 'a1', 1, 0);
        await a.reserve(p2, 'a2', 1, 0);
        await b.reserve(p1, 'b1', 1, 0);
        await a.releaseAllForInstance();
        expectEqual(await rows(b, p1), [`${instanceOf(b)}/b1:1:0`], `rows of ${p1}`);
        expectEqual(await rows(b, p2), [], `rows of ${p2}`);
      },
    ),
  ];
}
