/**
 * poolLedgerConformance: the promises every PoolLedger keeps, as named checks
 * any test runner can run against any implementation.
 */
import { isInvalidInputError, isScalerError } from '../../errors.js';
import type { PoolLedger, ReserveResult } from '../../ledger/index.js';
import {
  type ConformanceCheck,
  eventually,
  expectEqual,
  expectReject,
  expectTrue,
  sample,
} from './check.js';

/**
 * What {@link poolLedgerConformance} passes to the factory, once per instance a check needs.
 *
 * @example
 * ```ts
 * import { MachineLedger } from 'scaler-primitives/ledger';
 * import type { LedgerFactoryArgs } from 'scaler-primitives/testing';
 *
 * declare const dir: string; // a fresh temp directory
 * const make = ({ instanceId, check }: LedgerFactoryArgs) => {
 *   console.log(`${check}: new instance ${instanceId}`);
 *   return new MachineLedger({ instanceId, dir });
 * };
 * ```
 */
export interface LedgerFactoryArgs {
  /** The instance id the new ledger must use (every check uses ids of its own). */
  instanceId: string;
  /** The check being run, for logs. */
  check: string;
}

/**
 * Makes one ledger instance. Every instance of a check must share one backing
 * store (one directory, one KV bucket); checks use pool names of their own, so
 * one store serves the whole suite.
 *
 * @example
 * ```ts
 * import { type MakeLedger, MemoryPoolLedger, MemoryPoolStore, poolLedgerConformance } from 'scaler-primitives/testing';
 *
 * const store = new MemoryPoolStore();
 * const make: MakeLedger = ({ instanceId }) => new MemoryPoolLedger({ instanceId, store });
 * const suite = poolLedgerConformance(make);
 * ```
 */
export type MakeLedger = (args: LedgerFactoryArgs) => PoolLedger | Promise<PoolLedger>;

/**
 * Options of {@link poolLedgerConformance}.
 *
 * @example
 * ```ts
 * import { type MakeLedger, poolLedgerConformance } from 'scaler-primitives/testing';
 *
 * declare const make: MakeLedger; // builds one replica of your ledger
 * const suite = poolLedgerConformance(make, { prefix: 'ci', instances: 5, staleAfterCloseMs: 30_000 });
 * ```
 */
export interface PoolLedgerConformanceOptions {
  /**
   * Prefix of every pool name the suite uses (1-40 characters of
   * `[A-Za-z0-9_-]`). @default `conformance-<random>`
   */
  prefix?: string;
  /** Instances reserving at once in the contention checks. @default 3 */
  instances?: number;
  /** Reserves each of them makes at once. @default 8 */
  reservesPerInstance?: number;
  /**
   * How long (real milliseconds) a peer may take to see a closed instance's
   * rows as stale (the ledger's documented rule after `close()`). @default 10000
   */
  staleAfterCloseMs?: number;
}

const GiB = 2 ** 30;

/**
 * The {@link PoolLedger} contract as named checks: concurrent reserves from
 * several instances never exceed the cap in either dimension; a refused
 * reserve writes nothing; refusal details (`dimension`, `requested`, `used`,
 * `max`, `neverFits`); release is idempotent and fail closed (a second
 * instance cannot release the first one's row, the operator paths can);
 * duplicates are refused; `releaseAllForInstance` takes only this instance's
 * rows; a closed instance's rows are reaped by a peer; `list` and `getUsage`
 * agree with what was granted; a closed ledger refuses work; extended resources
 * and `maxAgents` are held across instances; `adopt` takes a restarted
 * instance's row over without counting it twice; bad input is refused.
 *
 * `makeLedger({ instanceId })` is called once for each instance a check needs
 * (the `adopt` check asks twice for one instance id: the host after a restart);
 * the check closes its ledgers when it ends.
 *
 * @example
 * ```ts
 * import { mkdtempSync } from 'node:fs';
 * import { tmpdir } from 'node:os';
 * import { join } from 'node:path';
 * import { describe, it } from 'vitest';
 * import { MachineLedger } from 'scaler-primitives/ledger';
 * import { poolLedgerConformance } from 'scaler-primitives/testing';
 *
 * const dir = mkdtempSync(join(tmpdir(), 'ledger-'));
 * describe('MachineLedger keeps the PoolLedger contract', () => {
 *   for (const check of poolLedgerConformance(({ instanceId }) => new MachineLedger({ instanceId, dir }))) {
 *     it(check.name, check.run);
 *   }
 * });
 * ```
 */
export function poolLedgerConformance(
  makeLedger: MakeLedger,
  options: PoolLedgerConformanceOptions = {},
): ConformanceCheck[] {
  if (typeof makeLedger !== 'function') {
    throw new TypeError(`Expected \`makeLedger\` to be a function, got \`${typeof makeLedger}\``);
  }
  const known = ['prefix', 'instances', 'reservesPerInstance', 'staleAfterCloseMs'];
  for (const key of Object.keys(options ?? {})) {
    if (!known.includes(key)) {
      throw new TypeError(
        `Unknown conformance option \`${key}\`: the accepted options are ${known.join(', ')}`,
      );
    }
  }
  const prefix = options.prefix ?? `conformance-${sample()}`;
  if (!/^[A-Za-z0-9_-]{1,40}$/.test(prefix)) {
    throw new TypeError(
      `Expected \`prefix\` to be 1-40 characters of A-Z, a-z, 0-9, '_' and '-', got \`${prefix}\``,
    );
  }
  const instances = count('instances', options.instances, 3, 2);
  const perInstance = count('reservesPerInstance', options.reservesPerInstance, 8, 1);
  const staleMs = count('staleAfterCloseMs', options.staleAfterCloseMs, 10_000, 0);

  // Each check gets its own pools and instance ids, and closes what it opened.
  const check = (
    key: string,
    name: string,
    body: (h: {
      pool: (n?: string) => string;
      open: (n: string) => Promise<PoolLedger>;
    }) => Promise<void>,
  ): ConformanceCheck => ({
    name,
    run: async () => {
      const run = sample();
      const opened: PoolLedger[] = [];
      const pool = (n = 'p') => `${prefix}-${key}-${n}-${run}`;
      const open = async (n: string) => {
        const ledger = await makeLedger({
          instanceId: `${prefix}-${key}-${n}-${run}`,
          check: name,
        });
        opened.push(ledger);
        ids.set(ledger, `${prefix}-${key}-${n}-${run}`);
        return ledger;
      };
      try {
        await body({ pool, open });
      } finally {
        for (const ledger of opened) {
          await ledger.releaseAllForInstance().catch(() => {});
          await ledger.close().catch(() => {});
        }
      }
    },
  });

  const rows = async (ledger: PoolLedger, pool: string) =>
    (await ledger.list(pool))
      .map((r) => `${r.instanceId}/${r.agentId}:${r.cpus}:${r.memBytes}`)
      .sort();

  return [
    check(
      'grants',
      'grants within the cap; list and getUsage agree with the grants, for every instance',
      async ({ pool, open }) => {
        const p = pool();
        const a = await open('a');
        const b = await open('b');
        for (const l of [a, b]) l.registerPool(p, { maxCpu: 4, maxMemoryBytes: 4 * GiB });
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
      async ({ pool, open }) => {
        const p = pool();
        const a = await open('a');
        const b = await open('b');
        for (const l of [a, b]) l.registerPool(p, { maxCpu: 4, maxMemoryBytes: 4 * GiB });
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
        // A refused agent left no residue: once there is room it is granted.
        expectEqual(await a.release(p, 'held'), true, 'release held');
        expectEqual(
          await b.reserve(p, 'y', 1, 2 * GiB),
          { ok: true },
          'reserve y once there is room',
        );
        expectEqual(await b.reserve(p, 'z', 3, 0), { ok: true }, 'reserve z once there is room');
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
      async ({ pool, open }) => {
        const p = pool();
        const a = await open('a');
        const b = await open('b');
        for (const l of [a, b]) l.registerPool(p, { maxCpu: 2 });
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
      async ({ pool, open }) => {
        const p = pool();
        const a = await open('a');
        const b = await open('b');
        for (const l of [a, b]) l.registerPool(p, { maxCpu: 2 });
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
          (e) => e instanceof TypeError || isInvalidInputError(e),
          'release with an unknown option',
        );
      },
    ),

    check(
      'duplicate',
      'an agent that holds a row cannot reserve again in the same pool',
      async ({ pool, open }) => {
        const p = pool();
        const a = await open('a');
        const b = await open('b');
        for (const l of [a, b]) l.registerPool(p, { maxCpu: 8 });
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

    check(
      'stale',
      "a closed instance's rows are left in place, then reaped by a peer; the capacity comes back",
      async ({ pool, open }) => {
        const p = pool();
        const a = await open('a');
        const b = await open('b');
        for (const l of [a, b]) l.registerPool(p, { maxCpu: 2 });
        expectEqual(await a.reserve(p, 'gone', 2, 0), { ok: true }, 'a reserves the whole pool');
        expectEqual(
          (await b.reserve(p, 'wait', 1, 0)).ok,
          false,
          'b is refused while a holds the pool',
        );
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
      'extended',
      'extended resources and maxAgents: rows carry the counts, the cap holds across instances, refusals name the resource',
      async ({ pool, open }) => {
        const p = pool();
        const gpu = 'nvidia.com/gpu';
        const a = await open('a');
        const b = await open('b');
        for (const l of [a, b]) l.registerPool(p, { maxExtended: { [gpu]: 2 }, maxAgents: 3 });
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

// The instance id each ledger was made with.
const ids = new WeakMap<PoolLedger, string>();

function instanceOf(ledger: PoolLedger): string {
  return ids.get(ledger)!;
}

function count(name: string, value: number | undefined, fallback: number, min: number): number {
  if (value === undefined) return fallback;
  if (!Number.isInteger(value) || value < min) {
    throw new TypeError(
      `Expected \`${name}\` to be an integer >= ${min}, got \`${String(value)}\``,
    );
  }
  return value;
}
