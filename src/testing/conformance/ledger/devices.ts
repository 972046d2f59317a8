/**
 * The device checks of poolLedgerConformance: a pool whose cap lists the ids of
 * an extended resource's devices assigns them with each grant. The rule every
 * ledger keeps: the lowest free ids in the cap's order, answered and stored in
 * the row in the write that adds it; never one id in two live rows, even under
 * contention; release and the reap of a closed instance's rows free them;
 * adoption keeps them; a cap that lists other ids is a cap mismatch.
 */
import { ErrorCode, isScalerError } from '../../../errors/index.js';
import type { PoolLedger, ReserveResult } from '../../../ledger/types.js';
import {
  type ConformanceCheck,
  eventually,
  expectEqual,
  expectReject,
  expectTrue,
  show,
} from '../check.js';
import type { LedgerSuite } from './harness.js';

const GPU = 'nvidia.com/gpu';
const IDS = ['0', '1', '2', '3'];
const CAP = { maxCpu: 64, devices: { [GPU]: IDS } };
const gpus = (n: number) => ({ extended: { [GPU]: n } });
const granted = (...ids: string[]) => ({ ok: true, devices: { [GPU]: ids } });

// The device ids of each live row of a pool, by agent.
async function heldIds(ledger: PoolLedger, pool: string): Promise<Record<string, string[]>> {
  const out: Record<string, string[]> = {};
  for (const row of await ledger.list(pool)) {
    const ids = row.devices?.[GPU];
    if (ids !== undefined) out[row.agentId] = [...ids];
  }
  return out;
}

/** Device ids: assignment, contention, freeing, adoption and the cap. */
export function deviceChecks({
  check,
  instances,
  perInstance,
  staleWait,
}: LedgerSuite): ConformanceCheck[] {
  return [
    check(
      'devices',
      'a cap that lists device ids: each grant answers and stores the lowest free ids; release and the reap of a closed instance free them',
      async ({ pool, pair }) => {
        const p = pool();
        const [a, b] = await pair(p, CAP);
        expectEqual(
          await a.reserve(p, 'x', 1, 0, gpus(2)),
          granted('0', '1'),
          'reserve x (2 GPUs)',
        );
        expectEqual(await b.reserve(p, 'y', 1, 0, gpus(1)), granted('2'), 'reserve y (1 GPU)');
        expectEqual(
          await a.reserve(p, 'cpu', 1, 0),
          { ok: true },
          'a reserve without GPUs (no ids, no `devices` in the answer)',
        );
        expectEqual(
          await b.reserve(p, 'z', 1, 0, gpus(2)),
          { ok: false, pool: p, dimension: GPU, requested: 2, used: 3, max: 4, neverFits: false },
          'reserve z (2 GPUs, 1 free)',
        );
        expectEqual(
          (await b.reserve(p, 'huge', 1, 0, gpus(5))).ok,
          false,
          'reserve of 5 GPUs of 4',
        );
        for (const [who, l] of [
          ['a', a],
          ['b', b],
        ] as const) {
          expectEqual(
            await heldIds(l, p),
            { x: ['0', '1'], y: ['2'] },
            `device ids of the rows as seen by instance ${who}`,
          );
        }
        expectEqual(await a.release(p, 'x'), true, 'release x');
        expectEqual(
          await b.reserve(p, 'z', 1, 0, gpus(2)),
          granted('0', '1'),
          'reserve z after x was released',
        );
        expectEqual(
          await b.reserve(p, 'w', 1, 0, gpus(1)),
          granted('3'),
          'reserve w (the last GPU)',
        );
        // b closes without releasing: once a peer reaps its rows, their ids are free.
        const staleMs = staleWait(b);
        await b.close();
        let reaped = 0;
        await eventually(
          async () => {
            reaped += await a.reapStale(p);
            return reaped > 0;
          },
          staleMs,
          `a peer reaped nothing within ${staleMs} ms of the owner's close()`,
        );
        expectEqual(await heldIds(a, p), {}, 'device ids held after the reap');
        expectEqual(
          await a.reserve(p, 'all', 1, 0, gpus(4)),
          granted(...IDS),
          'reserve all four GPUs',
        );
      },
    ),

    check(
      'devices-contend',
      `concurrent reserves from ${instances} instances never give one device id to two rows`,
      async ({ pool, open }) => {
        const p = pool();
        const ledgers = await Promise.all(
          Array.from({ length: instances }, (_, i) => open(`i${i}`)),
        );
        for (const l of ledgers) l.registerPool(p, CAP);
        const results = await Promise.allSettled(
          ledgers.flatMap((l, i) =>
            Array.from({ length: perInstance }, (_, j) =>
              l.reserve(p, `d${i}-${j}`, 1, 0, gpus(1 + ((i + j) % 2))),
            ),
          ),
        );
        const errors = results.flatMap((r) => (r.status === 'rejected' ? [r.reason] : []));
        expectEqual(
          errors.map((e) => (e instanceof Error ? `${e.name}: ${e.message}` : String(e))),
          [],
          'errors under contention',
        );
        const answers = new Map<string, string[]>();
        results.forEach((r, k) => {
          if (r.status !== 'fulfilled' || !r.value.ok) return;
          const i = Math.floor(k / perInstance);
          const j = k % perInstance;
          const ids = (r.value as ReserveResult & { ok: true }).devices?.[GPU];
          const want = 1 + ((i + j) % 2);
          expectTrue(
            Array.isArray(ids) && ids.length === want,
            `a grant of ${want} GPUs answered the ids ${show(ids)}`,
          );
          answers.set(`d${i}-${j}`, [...ids!]);
        });
        const given = [...answers.values()].flat();
        expectTrue(
          new Set(given).size === given.length && given.every((id) => IDS.includes(id)),
          `the grants answered the ids ${show(Object.fromEntries(answers))}: one id twice, or one the cap does not list`,
        );
        expectEqual(
          await heldIds(ledgers[0]!, p),
          Object.fromEntries(answers),
          'the device ids of the rows (as answered)',
        );
        for (const [agentId, ids] of answers) {
          const owner = ledgers[Number(agentId.slice(1, agentId.indexOf('-')))]!;
          expectEqual(
            await owner.release(p, agentId),
            true,
            `release ${agentId} (${ids.join(',')})`,
          );
        }
        expectEqual(
          await ledgers[0]!.reserve(p, 'all', 1, 0, gpus(4)),
          granted(...IDS),
          'reserve all four GPUs once every grant was released (no id lost)',
        );
      },
    ),

    check(
      'devices-adopt',
      'adopt keeps device ids: a taken-over row keeps its ids, a row reserved again claims the ids the agent uses, ids another row holds are refused',
      async ({ pool, open }) => {
        const p = pool();
        const before = await open('a');
        const other = await open('b');
        for (const l of [before, other]) l.registerPool(p, CAP);
        expectEqual(await before.reserve(p, 'x', 1, 0, gpus(2)), granted('0', '1'), 'reserve x');
        expectEqual(await other.reserve(p, 'y', 1, 0, gpus(1)), granted('2'), 'reserve y');
        // The same instance id again: the host after a restart.
        const after = await open('a');
        after.registerPool(p, CAP);
        expectTrue(
          typeof after.adopt === 'function',
          'adopt is not implemented: a restarted host cannot take its rows over',
        );
        expectEqual(
          await after.adopt!(p, [
            { agentId: 'x', cpus: 1, memBytes: 0, ...gpus(2) },
            { agentId: 'v', cpus: 1, memBytes: 0, ...gpus(1), devices: { [GPU]: ['3'] } },
          ]),
          [
            { ok: true, adopted: true, devices: { [GPU]: ['0', '1'] } },
            { ok: true, adopted: false, devices: { [GPU]: ['3'] } },
          ],
          'adopt x (its row exists) and v (no row; it uses GPU 3)',
        );
        expectEqual(await after.release(p, 'v'), true, 'release v');
        const refused = await after.adopt!(p, [
          { agentId: 'u', cpus: 1, memBytes: 0, ...gpus(1), devices: { [GPU]: ['2'] } },
        ]);
        expectEqual(
          refused[0]?.ok === false && 'dimension' in refused[0] ? refused[0].dimension : refused[0],
          GPU,
          'adopt u, which says it uses GPU 2 (held by y): refused, naming the resource',
        );
        expectEqual(
          await heldIds(other, p),
          { x: ['0', '1'], y: ['2'] },
          'device ids of the rows after the adoptions',
        );
      },
    ),

    check(
      'devices-cap',
      'a cap that lists other device ids (other ids, or the same in another order) is a cap mismatch',
      async ({ pool, open }) => {
        const a = await open('a');
        const b = await open('b');
        for (const [n, ids] of [
          ['other', ['0', '1', '2', '5']],
          ['order', ['1', '0', '2', '3']],
        ] as const) {
          const p = pool(n);
          a.registerPool(p, CAP);
          b.registerPool(p, { maxCpu: 64, devices: { [GPU]: ids } });
          expectEqual(await a.reserve(p, 'x', 1, 0, gpus(1)), granted('0'), `reserve x in ${n}`);
          await expectReject(
            () => b.reserve(p, 'y', 1, 0, gpus(1)),
            (e) => isScalerError(e, ErrorCode.LEDGER_CAP_MISMATCH),
            `a reserve under a cap listing the ids ${show(ids)} (expected ERR_LEDGER_CAP_MISMATCH)`,
          );
          expectEqual(await heldIds(a, p), { x: ['0'] }, `device ids of the rows of ${n}`);
        }
      },
    ),
  ];
}
