/**
 * scalerBackendConformance: what the manager relies on from every
 * ScalerBackend, as named checks any test runner can run.
 */
import type { ScalerBackend, SpawnRequest, SpawnResult } from '../../manager/index.js';
import type { ResourceAmount } from '../../resources/index.js';
import { type ConformanceCheck, expectEqual, expectTrue, sample, show } from './check.js';

type BackendEventInput = Parameters<SpawnRequest['emit']>[0];

/**
 * Makes a fresh backend for one check.
 */
export type MakeBackend = (args: {
  /** The check being run, for logs. */
  check: string;
}) => ScalerBackend | Promise<ScalerBackend>;

/**
 * What the manager relies on from a {@link ScalerBackend}, as named checks:
 * `spawn` resolves to nothing or an object with an optional `context` object
 * and the agent then runs (`list()` names it); several spawns at once all run;
 * `destroy` stops an agent and is idempotent (twice, or an agent that does not
 * run, resolves); `list()` answers distinct strings; `shutdown()` (or, for a
 * backend without one, `destroy` per agent, as the manager does) leaves
 * nothing running. For a backend without `list()`, pass `{ list: false }`.
 *
 * @example
 * ```ts
 * import { describe, it } from 'vitest';
 * import type { ScalerBackend } from 'scaler-primitives/manager';
 * import { scalerBackendConformance } from 'scaler-primitives/testing';
 *
 * declare const ContainerBackend: new (options: { image: string }) => ScalerBackend; // yours
 * describe('my container backend keeps the ScalerBackend contract', () => {
 *   for (const check of scalerBackendConformance(() => new ContainerBackend({ image: 'agent:latest' }))) {
 *     it(check.name, check.run);
 *   }
 * });
 * ```
 */
export function scalerBackendConformance(
  makeBackend: MakeBackend,
  options: {
    /** The scaler name put in spawn requests. @default 'conformance' */
    scaler?: string;
    /** Labels put in spawn requests. @default ['conformance'] */
    labels?: string[];
    /** Requested CPU cores and memory bytes. @default 0.1 core, 64 MiB */
    resources?: ResourceAmount;
    /** Prefix of the agent ids (1-40 of `[a-z0-9-]`). @default `conf-<random>` */
    prefix?: string;
    /**
     * The backend implements `list()`: include the checks that need it. Set false
     * for a backend without one (the manager's `reconcile` then skips it).
     * @default true
     */
    list?: boolean;
  } = {},
): ConformanceCheck[] {
  if (typeof makeBackend !== 'function') {
    throw new TypeError(`Expected \`makeBackend\` to be a function, got \`${typeof makeBackend}\``);
  }
  const known = ['scaler', 'labels', 'resources', 'prefix', 'list'];
  for (const key of Object.keys(options ?? {})) {
    if (!known.includes(key)) {
      throw new TypeError(
        `Unknown conformance option \`${key}\`: the accepted options are ${known.join(', ')}`,
      );
    }
  }
  const prefix = options.prefix ?? `conf-${sample()}`;
  if (!/^[a-z0-9-]{1,40}$/.test(prefix)) {
    throw new TypeError(`Expected \`prefix\` to be 1-40 of a-z, 0-9 and '-', got \`${prefix}\``);
  }
  const scaler = options.scaler ?? 'conformance';
  const labels = options.labels ?? ['conformance'];
  const amount = options.resources ?? { cpus: 0.1, memBytes: 64 * 2 ** 20 };

  const request = (agentId: string, events: BackendEventInput[]): SpawnRequest => ({
    agentId,
    scaler,
    jobId: `job-${agentId}`,
    warm: false,
    labels,
    labelSetIndex: 0,
    mandatoryLabels: [],
    resources: { requests: { ...amount }, limits: { ...amount } },
    emit: (event) => {
      events.push(event);
    },
  });

  const check = (
    key: string,
    name: string,
    body: (h: {
      backend: ScalerBackend;
      id: (n: string) => string;
      spawn: (agentId: string) => Promise<unknown>;
      listed: () => Promise<string[]>;
    }) => Promise<void>,
    needsList = false,
  ): ConformanceCheck => ({
    name,
    run: async () => {
      const run = sample();
      const backend = await makeBackend({ check: name });
      if (needsList && typeof backend.list !== 'function') {
        throw new TypeError(
          `The backend has no list(): pass { list: false } to leave out "${name}"`,
        );
      }
      const started = new Set<string>();
      const events: BackendEventInput[] = [];
      try {
        await body({
          backend,
          id: (n) => `${prefix}-${key}-${n}-${run}`,
          spawn: (agentId) => {
            started.add(agentId);
            return backend.spawn(request(agentId, events));
          },
          listed: async () => {
            const ids = await backend.list!();
            return ids;
          },
        });
      } finally {
        if (typeof backend.shutdown === 'function') await backend.shutdown().catch(() => {});
        else for (const id of started) await backend.destroy(id).catch(() => {});
      }
    },
  });

  const checks: ConformanceCheck[] = [
    check(
      'spawn-result',
      'spawn resolves to nothing, or an object whose context is an object',
      async ({ spawn, id }) => {
        const result = await spawn(id('a'));
        if (result === undefined || result === null) return;
        expectTrue(
          typeof result === 'object' && !Array.isArray(result),
          `spawn resolved to ${show(result)}`,
        );
        const context = (result as SpawnResult).context;
        expectTrue(
          context === undefined ||
            (typeof context === 'object' && context !== null && !Array.isArray(context)),
          `spawn resolved to a context that is not an object: ${show(context)}`,
        );
      },
    ),

    check(
      'destroy-idempotent',
      'destroy is idempotent: twice, or for an agent that never ran, it resolves',
      async ({ backend, spawn, id }) => {
        await spawn(id('a'));
        await backend.destroy(id('a'));
        await backend.destroy(id('a'));
        await backend.destroy(id('never-spawned'));
      },
    ),
  ];

  const withList: ConformanceCheck[] = [
    check(
      'listed',
      'a spawned agent is listed until it is destroyed',
      async ({ backend, spawn, id, listed }) => {
        await spawn(id('a'));
        expectTrue(
          (await listed()).includes(id('a')),
          `list() after spawn does not name ${id('a')}: ${show(await listed())}`,
        );
        await backend.destroy(id('a'));
        expectTrue(
          !(await listed()).includes(id('a')),
          `list() after destroy still names ${id('a')}`,
        );
      },
      true,
    ),

    check(
      'many',
      'several spawns at once all run, and list() names each once',
      async ({ spawn, id, listed }) => {
        const ids = ['a', 'b', 'c', 'd'].map(id);
        await Promise.all(ids.map((agentId) => spawn(agentId)));
        const names = await listed();
        expectTrue(
          names.every((n) => typeof n === 'string'),
          `list() answered a non-string: ${show(names)}`,
        );
        expectEqual(names.length, new Set(names).size, 'list() names without duplicates (count)');
        for (const agentId of ids)
          expectTrue(names.includes(agentId), `list() does not name ${agentId}: ${show(names)}`);
      },
      true,
    ),

    check(
      'shutdown',
      'shutdown() (or destroy per agent, for a backend without it) leaves nothing running',
      async ({ backend, spawn, id, listed }) => {
        const ids = ['a', 'b'].map(id);
        for (const agentId of ids) await spawn(agentId);
        if (typeof backend.shutdown === 'function') await backend.shutdown();
        else for (const agentId of ids) await backend.destroy(agentId);
        const left = (await listed()).filter((n) => ids.includes(n));
        expectEqual(left, [], 'agents of this check listed after shutdown');
      },
      true,
    ),
  ];

  return options.list === false ? checks : [...checks, ...withList];
}
