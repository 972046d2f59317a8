/**
 * The capacity checks of poolLedgerConformance: grants within the cap, contention
 * from several instances, all-or-nothing refusals and what a refusal says, extended
 * resources and `maxAgents`.
 */
import type { ReserveResult } from '../../../ledger/types.js';
import { type ConformanceCheck, expectEqual, expectTrue } from '../check.js';
import { GiB, type LedgerSuite } from './harness.js';

/** Grants, contention, refusals and extended resources against the cap. */
export function capacityChecks({
  check,
  rows,
  instanceOf,
  instances,
  perInstance,
}: LedgerSuite): ConformanceCheck[] {
  return [
    check(
      'grants',
      'grants within the cap; list and getUsage agree with the grants, for every instance',
      async ({ pool, pair }) => {
        const p = pool();
        const [a, b] = await pair(p, { maxCpu: 4, maxMemoryBytes: 4 * GiB });
        expectEqual(await a.reserve(p, 'x1', 1, GiB), { ok: true }, 'reserve x1 (1 core, 1 GiB)');
        expectEqual(
          await b.reserve(p, 'x2', 0.5, GiB / 2),
          { ok: true },
          'reserve x2 (0.5 core, 0.5 GiB)',
        );
        expectEqual(await a.tryReserve(p, 'x3', 0.25, 0), true, 'tryReserve x3 (0.25 core)');
        const want = [
          `${instanceOf(a)}/x1:1:${GiB}`,
          `${instanceOf(b)}/x2:0.5:${GiB / 2}`,
          `${instanceOf(a)}/x3:0.25:0`,
        ].sort();
        for (const [who, l] of [
          ['a', a],
          ['b', b],
        ] as const) {
          expectEqual(await rows(l, p), want, `list as seen by instance ${who}`);
          expectEqual(
            await l.getUsage(p),
            { cpus: 1.75, memBytes: 1.5 * GiB },
            `getUsage as seen by instance ${who}`,
          );
        }
      },
    ),

    ...(['cpu', 'memory'] as const).map((dimension) =>
      check(
        `contend-${dimension}`,
        `concurrent reserves from ${instances} instances never exceed the ${dimension} cap`,
        async ({ pool, open }) => {
          const p = pool();
          const cap =
            dimension === 'cpu'
              ? { maxCpu: 5, maxMemoryBytes: 1000 * GiB }
              : { maxCpu: 1000, maxMemoryBytes: 5 * GiB };
          const ledgers = await Promise.all(
            Array.from({ length: instances }, (_, i) => open(`i${i}`)),
          );
          for (const l of ledgers) l.registerPool(p, cap);
          const results = await Promise.allSettled(
            ledgers.flatMap((l, i) =>
              Array.from({ length: perInstance }, (_, j) => l.reserve(p, `c${i}-${j}`, 1, GiB)),
            ),
          );
          const granted = results.filter((r) => r.status === 'fulfilled' && r.value.ok).length;
          const errors = results.flatMap((r) => (r.status === 'rejected' ? [r.reason] : []));
          const total = instances * perInstance;
          expectTrue(
            granted <= 5,
            `${granted} reserves of 1 unit were granted against a ${dimension} cap of 5`,
          );
          for (const l of ledgers) {
            const usage = await l.getUsage(p);
            expectTrue(
              usage.cpus <= cap.maxCpu && usage.memBytes <= cap.maxMemoryBytes,
              `usage ${JSON.stringify(usage)} exceeds the cap ${JSON.stringify(cap)}`,
            );
            expectEqual(
              (await l.list(p)).length,
              granted,
              'rows listed after the contention (one per grant)',
            );
          }
          expectEqual(
            errors.map((e) => (e instanceof Error ? `${e.name}: ${e.message}` : String(e))),
            [],
            'errors under contention',
          );
          for (const r of results) {
            if (r.status === 'fulfilled' && !r.value.ok) {
              expectEqual(r.value.dimension, dimension, 'the refused dimension');
            }
          }
          // Whatever contention did, the pool fills up to its cap once calls stop racing.
          let more = 0;
          while (more < 10 && (await ledgers[0]!.reserve(p, `late-${more}`, 1, GiB)).ok) more++;
          expectEqual(granted + more, Math.min(5, total + 10), 'grants once the pool is full');
        },
      ),
    ),

    check(
      'atomic',
      'a refused reserve writes nothing (all or nothing across CPU and memory)',
      async ({ pool, pair }) => {
        const p = pool();
        const [a, b] = await pair(p, { maxCpu: 4, maxMemoryBytes: 4 * GiB });
        expectEqual(await a.reserve(p, 'held', 1, 3 * GiB), { ok: true }, 'reserve held');
        const before = await rows(b, p);
        // CPU fits, memory does not; then memory fits, CPU does not.
        expectEqual(
          (await b.reserve(p, 'y', 1, 2 * GiB)).ok,
          false,
          'reserve y (memory does not fit)',
        );
        expectEqual((await b.reserve(p, 'z', 4, 0)).ok, false, 'reserve z (CPU does not fit)');
        expectEqual(await rows(a, p), before, 'rows after two refusals');
        expectEqual(
          await a.getUsage(p),
          { cpus: 1, memBytes: 3 * GiB },
          'usage after two refusals',
        );
        // A refused agent left no residue: once capacity is free it is granted.
        expectEqual(await a.release(p, 'held'), true, 'release held');
        expectEqual(
          await b.reserve(p, 'y', 1, 2 * GiB),
          { ok: true },
          'reserve y once capacity is free',
        );
        expectEqual(await b.reserve(p, 'z', 3, 0), { ok: true }, 'reserve z once capacity is free');
      },
    ),

    check(
      'refusal',
      'a refusal names the dimension, what was requested, used and the max, and whether it can ever fit',
      async ({ pool, open }) => {
        const p = pool();
        const a = await open('a');
        a.registerPool(p, { maxCpu: 4, maxMemoryBytes: 8 * GiB });
        expectEqual(await a.reserve(p, 'held', 3, 2 * GiB), { ok: true }, 'reserve held');
        const refused = (r: ReserveResult, fields: object, what: string) =>
          expectEqual(r, { ok: false, pool: p, ...fields }, what);
        refused(
          await a.reserve(p, 'cpu', 2, 0),
          { dimension: 'cpu', requested: 2, used: 3, max: 4, neverFits: false },
          'CPU refusal',
        );
        refused(
          await a.reserve(p, 'mem', 0.5, 7 * GiB),
          {
            dimension: 'memory',
            requested: 7 * GiB,
            used: 2 * GiB,
            max: 8 * GiB,
            neverFits: false,
          },
          'memory refusal',
        );
        refused(
          await a.reserve(p, 'huge-cpu', 5, 0),
          { dimension: 'cpu', requested: 5, used: 3, max: 4, neverFits: true },
          'CPU refusal that never fits',
        );
        refused(
          await a.reserve(p, 'huge-mem', 0.5, 9 * GiB),
          { dimension: 'memory', requested: 9 * GiB, used: 2 * GiB, max: 8 * GiB, neverFits: true },
          'memory refusal that never fits',
        );
        expectEqual(await a.tryReserve(p, 'cpu', 2, 0), false, 'tryReserve of a refused request');
      },
    ),

    check(
      'extended',
      'extended resources and maxAgents: rows carry the counts, the cap holds across instances, refusals name the resource',
      async ({ pool, pair }) => {
        const p = pool();
        const gpu = 'nvidia.com/gpu';
        const [a, b] = await pair(p, { maxExtended: { [gpu]: 2 }, maxAgents: 3 });
        const one = { extended: { [gpu]: 1 } };
        expectEqual(await a.reserve(p, 'g1', 1, 0, one), { ok: true }, 'reserve g1 (1 GPU)');
        expectEqual(await b.reserve(p, 'g2', 1, 0, one), { ok: true }, 'reserve g2 (1 GPU)');
        expectEqual(
          await a.reserve(p, 'g3', 1, 0, one),
          { ok: false, pool: p, dimension: gpu, requested: 1, used: 2, max: 2, neverFits: false },
          'reserve g3 (a third GPU of 2)',
        );
        expectEqual(
          (await b.reserve(p, 'f1', 1, 0, { extended: { 'example.com/fpga': 1 } })).ok,
          false,
          'reserve of a resource the cap neither caps nor provides',
        );
        expectEqual(await b.tryReserve(p, 'c1', 1, 0), true, 'reserve c1 (no GPU)');
        expectEqual((await a.reserve(p, 'c2', 1, 0)).ok, false, 'a fourth agent under maxAgents 3');
        expectEqual(
          (await b.list(p)).map((r) => [r.agentId, r.extended]).sort(),
          [
            ['c1', undefined],
            ['g1', { [gpu]: 1 }],
            ['g2', { [gpu]: 1 }],
          ],
          'rows and their extended counts',
        );
        expectEqual(
          await a.getUsage(p),
          { cpus: 3, memBytes: 0, extended: { [gpu]: 2 } },
          'getUsage with extended resources',
        );
      },
    ),
  ];
}
