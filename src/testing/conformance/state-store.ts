/**
 * stateStoreConformance: the promises every manager StateStore keeps, as
 * named checks any test runner can run against any implementation.
 */
import type { AgentStateRecord, StateStore } from '../../manager/index.js';
import { type ConformanceCheck, expectEqual, expectReject, expectTrue, sample } from './check.js';

/**
 * Makes a store. `fresh: true` asks for an empty one; `fresh: false` for a
 * second handle on the store the previous call of the same check made (what a
 * restarted process opens).
 */
export type MakeStateStore = (args: {
  /** A name unique to the check run (use it for a directory, file or key prefix). */
  key: string;
  /** True for a new empty store; false to reopen the last one made with this key. */
  fresh: boolean;
}) => StateStore | Promise<StateStore>;

/** A valid record for `agentId`, with fields a check may override. */
function record(agentId: string, patch: Partial<AgentStateRecord> = {}): AgentStateRecord {
  return {
    v: 1,
    agentId,
    scaler: 'vm',
    state: 'busy',
    warm: false,
    jobId: `job-${agentId}`,
    runId: `run-${agentId}`,
    labels: ['linux', 'kici:scaler:vm'],
    resources: {
      requests: { cpus: 1.5, memBytes: 2 ** 30, extended: { 'nvidia.com/gpu': 1 } },
      limits: { cpus: 2, memBytes: 2 ** 31 },
    },
    pool: 'host',
    poolHeld: true,
    spawnSettled: true,
    spawnedAt: 1_700_000_000_000,
    registeredAt: 1_700_000_001_000,
    idleSince: 0,
    jobsCompleted: 2,
    context: { address: '10.0.0.2', nested: { ok: true } },
    ...patch,
  };
}

const byId = (records: AgentStateRecord[]) =>
  [...records].sort((a, b) => (a.agentId < b.agentId ? -1 : 1));

/**
 * The {@link StateStore} contract as named checks: what is committed is
 * loaded back exactly (by a second handle, as a restarted process would);
 * later puts replace, deletes remove and are idempotent; a batch is applied
 * whole; every state of the machine round-trips (draining included); an
 * invalid record or a malformed change is refused and writes nothing.
 *
 * @example
 * ```ts
 * import { join } from 'node:path';
 * import { describe, it } from 'vitest';
 * import { FileStateStore } from 'scaler-primitives/manager';
 * import { stateStoreConformance } from 'scaler-primitives/testing';
 *
 * declare const root: string; // a fresh temp directory
 * describe('FileStateStore', () => {
 *   for (const check of stateStoreConformance(({ key }) => new FileStateStore({ dir: join(root, key) }))) {
 *     it(check.name, check.run);
 *   }
 * });
 * ```
 */
export function stateStoreConformance(makeStore: MakeStateStore): ConformanceCheck[] {
  if (typeof makeStore !== 'function') {
    throw new TypeError(`Expected \`makeStore\` to be a function, got \`${typeof makeStore}\``);
  }
  const check = (
    name: string,
    body: (open: (fresh: boolean) => Promise<StateStore>) => Promise<void>,
  ): ConformanceCheck => ({
    name,
    run: async () => {
      const key = `state-${sample()}${sample()}`;
      const opened: StateStore[] = [];
      try {
        await body(async (fresh) => {
          const store = await makeStore({ key, fresh });
          opened.push(store);
          return store;
        });
      } finally {
        for (const store of opened) await store.close?.().catch(() => {});
      }
    },
  });

  return [
    check('an empty store loads no records', async (open) => {
      expectEqual(await (await open(true)).load(), [], 'load() of a new store');
    }),

    check('committed records load back exactly, from a second handle (a restart)', async (open) => {
      const store = await open(true);
      const records = [
        record('a-1'),
        record('a-2', { state: 'spawning', spawnSettled: false, registeredAt: 0, poolHeld: false }),
        record('a-3', { state: 'draining', destroyReason: 'drain' }),
        record('a-4', { state: 'idle', warm: true, jobId: undefined, runId: undefined }),
        record('a-5', {
          state: 'destroying',
          destroyReason: 'idle',
          pool: undefined,
          context: undefined,
        }),
      ].map(clean);
      await store.commit(records.map((r) => ({ op: 'put', record: r })));
      const again = await open(false);
      expectEqual(byId(await again.load()), byId(records), 'records loaded by a second handle');
    }),

    check(
      'a later put replaces, a delete removes, and deleting twice is harmless',
      async (open) => {
        const store = await open(true);
        await store.commit([
          { op: 'put', record: record('b-1') },
          { op: 'put', record: record('b-2') },
        ]);
        const moved = record('b-1', {
          state: 'draining',
          destroyReason: 'drain',
          jobsCompleted: 3,
        });
        await store.commit([
          { op: 'put', record: moved },
          { op: 'delete', agentId: 'b-2' },
        ]);
        await store.commit([{ op: 'delete', agentId: 'b-2' }]);
        await store.commit([{ op: 'delete', agentId: 'never-stored' }]);
        expectEqual(await (await open(false)).load(), [moved], 'records after the changes');
      },
    ),

    check('many commits in flight at once all land', async (open) => {
      const store = await open(true);
      const ids = Array.from({ length: 24 }, (_, i) => `c-${i}`);
      await Promise.all(ids.map((id) => store.commit([{ op: 'put', record: record(id) }])));
      expectEqual(
        (await (await open(false)).load()).map((r) => r.agentId).sort(),
        [...ids].sort(),
        'agent ids after 24 concurrent commits',
      );
    }),

    check('an invalid record or malformed change is refused and writes nothing', async (open) => {
      const store = await open(true);
      await store.commit([{ op: 'put', record: record('d-1') }]);
      const bad: Array<[string, unknown]> = [
        ['an unknown key', { ...record('d-2'), extra: 1 }],
        ['an unknown state', { ...record('d-2'), state: 'gone' }],
        ['an unknown version', { ...record('d-2'), v: 2 }],
        [
          'negative cpus',
          record('d-2', {
            resources: { requests: { cpus: -1, memBytes: 0 }, limits: { cpus: 0, memBytes: 0 } },
          }),
        ],
        ['an agent id of 300 characters', record('x'.repeat(300))],
      ];
      for (const [what, value] of bad) {
        await expectReject(
          () =>
            store.commit([
              { op: 'put', record: record('d-3') },
              { op: 'put', record: value as AgentStateRecord },
            ]),
          (e) => e instanceof Error,
          `commit of a record with ${what}`,
        );
      }
      await expectReject(
        () => store.commit([{ op: 'rename', agentId: 'd-1' } as never]),
        (e) => e instanceof Error,
        'commit of an unknown op',
      );
      await expectReject(
        () =>
          store.commit([
            { op: 'delete', agentId: 'd-1' },
            { op: 'put', record: record('d-1') },
          ]),
        (e) => e instanceof Error,
        'commit with two changes for one agent',
      );
      expectEqual(
        (await (await open(false)).load()).map((r) => r.agentId),
        ['d-1'],
        'records after the refused commits',
      );
    }),

    check('what load() returns is a copy: changing it changes nothing stored', async (open) => {
      const store = await open(true);
      await store.commit([{ op: 'put', record: record('e-1') }]);
      const [loaded] = await store.load();
      expectTrue(loaded !== undefined, 'load() returned the record');
      loaded!.state = 'idle';
      loaded!.labels.push('mutated');
      expectEqual((await (await open(false)).load())[0], record('e-1'), 'the stored record');
    }),
  ];
}

// `undefined` fields are absent in a stored record.
function clean(value: AgentStateRecord): AgentStateRecord {
  return JSON.parse(JSON.stringify(value)) as AgentStateRecord;
}
