/**
 * createTestFleet: a ScalerManager on a TestClock, a FakeBackend per scaler and
 * a MemoryPoolLedger, wired together, with the fleet's invariants as one call.
 */
import { sumRows } from '../ledger/document/fit.js';
import type { ReleaseOptions } from '../ledger/types.js';
import {
  parseScalerConfig,
  type ScalerConfigInput,
  type ScalerEvent,
  ScalerManager,
  type ScalerManagerOptions,
} from '../manager/index.js';
import { FakeBackend, type FakeBackendOptions } from './fake-backend/backend.js';
import { MemoryPoolLedger, MemoryPoolStore } from './memory-ledger/index.js';
import { TestClock } from './test-clock/clock.js';

/**
 * What a fleet's FakeBackends are made with (the fleet supplies `clock`, `name` and `manager`).
 */
export type FleetBackendOptions = Omit<FakeBackendOptions, 'clock' | 'name' | 'manager'>;

/**
 * Options of {@link createTestFleet}.
 */
export interface TestFleetOptions {
  /** Where the fleet's clock starts. @default '2026-01-05T09:00:00Z' (a Monday) */
  start?: Date | string | number;
  /** Options of the fleet's {@link TestClock} (`settleTurns`), as its constructor takes them. */
  clockOptions?: ConstructorParameters<typeof TestClock>[1];
  /** The ledger's instance id (this orchestrator replica). @default 'test-fleet' */
  instanceId?: string;
  /** The ledger store, to share a pool with other replicas. @default a new store */
  store?: MemoryPoolStore;
  /** Options for every scaler's backend. */
  backend?: FleetBackendOptions;
  /** Options per scaler name, over `backend`. */
  backends?: Record<string, FleetBackendOptions>;
  /**
   * More `ScalerManager` options (`registrationTimeoutMs`, `maintenanceIntervalMs`,
   * `onEvent`...). Agent ids default to `<scaler>-<n>` (deterministic).
   * `ledgers` gives some pools their own {@link MemoryPoolLedger} (a controller
   * with a ledger per pool); the pools it does not name use the fleet's
   * `ledger`, and `checkInvariants()` reads each pool's rows from its ledger.
   */
  manager?: Omit<ScalerManagerOptions, 'config' | 'backends' | 'clock' | 'ledgers'> & {
    ledgers?: Readonly<Record<string, MemoryPoolLedger>>;
  };
  /** Call `manager.start()` (maintenance on the clock, the ledger's reaper). @default true */
  startManager?: boolean;
  /**
   * Seed of the manager's `random` (backoff and timer jitter), so a run
   * repeats exactly: same seed, same firings. Ignored when `manager.random`
   * is given. An integer from 0 to 2^32-1.
   * @default 1
   */
  seed?: number;
}

/**
 * What {@link createTestFleet} returns.
 */
export interface TestFleet {
  /** The manager under test. */
  manager: ScalerManager;
  /** Its clock. */
  clock: TestClock;
  /** Its machine-pool ledger (of every pool `manager.ledgers` does not name). */
  ledger: MemoryPoolLedger;
  /**
   * The ledger of each pool of the config, by pool name (a release through
   * these, as through the manager, is watched by `checkInvariants()`).
   */
  ledgers: Record<string, MemoryPoolLedger>;
  /** One backend per scaler name in the config. */
  backends: Record<string, FakeBackend>;
  /** Every event the manager emitted, in order. */
  events: ScalerEvent[];
  /**
   * Throw a {@link FleetInvariantError} listing every broken invariant: a cap
   * exceeded (global, scaler, pool), a tracked agent without its pool row, a
   * row of this instance without a tracked agent, the manager's pool usage
   * differing from the rows, a job bound to two agents, and a pool row
   * released while its agent still ran on a backend (watched on every release
   * since the fleet was made, so a release between two checks is caught too).
   * Above a lowered `maxAgents` or `globalMaxAgents` (a reload), agents may
   * stay until drained but none may be added: the count may not grow from one
   * check to the next. Call it after every step.
   */
  checkInvariants(): void;
  /** The agents the manager tracks now, by scaler. */
  trackedAgents(): Record<string, string[]>;
  /** `manager.shutdownAll()`, then close the ledgers. */
  shutdown(): Promise<void>;
}

/**
 * Thrown by {@link TestFleet.checkInvariants}: every broken invariant, one a line.
 *
 * @example
 * ```ts
 * import { FleetInvariantError, type TestFleet } from 'scaler-primitives/testing';
 *
 * declare const fleet: TestFleet;
 * try {
 *   fleet.checkInvariants();
 * } catch (error) {
 *   if (error instanceof FleetInvariantError) console.log(error.violations);
 *   throw error;
 * }
 * ```
 */
export class FleetInvariantError extends Error {
  /** The broken invariants, one sentence each. */
  readonly violations: readonly string[];

  /**
   * @param at - The clock time, for the message.
   * @param violations - One sentence per broken invariant.
   */
  constructor(at: number, violations: readonly string[]) {
    super(
      `Fleet invariants broken at ${new Date(at).toISOString()} (${violations.length}):\n${violations.map((v) => `  - ${v}`).join('\n')}`,
    );
    this.name = 'FleetInvariantError';
    this.violations = violations;
  }
}

const EPSILON = 1e-9;

/**
 * A view of a fleet ledger that notes every row released while its agent
 * still runs on one of the fleet's backends; everything else goes to the ledger.
 */
function watchReleases(
  ledger: MemoryPoolLedger,
  runsOn: (agentId: string) => string | undefined,
  note: (sentence: string) => void,
): MemoryPoolLedger {
  const running = (pool: string, agentId: string, backend: string): void =>
    note(
      `pool ${pool}: the row of ${agentId} was released while the agent still ran on backend ${backend}`,
    );
  const release = async (
    pool: string,
    agentId: string,
    options?: ReleaseOptions,
  ): Promise<boolean> => {
    const backend = runsOn(agentId);
    const removed = await ledger.release(pool, agentId, options);
    if (removed && backend !== undefined) running(pool, agentId, backend);
    return removed;
  };
  const releaseAllForInstance = async (): Promise<void> => {
    const held: Array<[string, string, string]> = [];
    for (const pool of ledger.store.pools()) {
      for (const row of ledger.inspect(pool).live) {
        const backend = row.instanceId === ledger.instanceId ? runsOn(row.agentId) : undefined;
        if (backend !== undefined) held.push([pool, row.agentId, backend]);
      }
    }
    await ledger.releaseAllForInstance();
    for (const [pool, agentId, backend] of held) {
      if (!ledger.inspect(pool).live.some((row) => row.agentId === agentId)) {
        running(pool, agentId, backend);
      }
    }
  };
  // What a test sets on the view (`fleet.ledger.release = ...`) stays on the
  // view: set on the ledger, the view's own release would call it back.
  const own = new Map<PropertyKey, unknown>([
    ['release', release],
    ['releaseAllForInstance', releaseAllForInstance],
  ]);
  return new Proxy(ledger, {
    get(target, key) {
      if (own.has(key)) return own.get(key);
      const value: unknown = Reflect.get(target, key, target);
      // Methods run on the ledger itself (its private fields are not on the view).
      return typeof value === 'function' ? value.bind(target) : value;
    },
    set(_target, key, value) {
      own.set(key, value);
      return true;
    },
  });
}

/**
 * A whole fleet in a test: a `ScalerManager` on a {@link TestClock}, a
 * {@link FakeBackend} per scaler (attached to the manager) and a
 * {@link MemoryPoolLedger}, with `checkInvariants()` to call after every step.
 *
 * @param config - The scaler configuration, as for `ScalerManager`.
 * @param options - See {@link TestFleetOptions}.
 * @throws ConfigError when the config is invalid; TypeError for bad options.
 *
 * @example
 * ```ts
 * import { createTestFleet } from 'scaler-primitives/testing';
 * const fleet = createTestFleet(
 *   {
 *     globalMaxAgents: 4,
 *     machinePools: { host: { maxCpu: '8', maxMemory: '16Gi' } },
 *     scalers: [{ name: 'linux', type: 'container', maxAgents: 4, machinePool: 'host',
 *       labelSets: [{ labels: ['linux'], resources: { cpus: '2', memory: '4Gi' } }] }],
 *   },
 *   { backend: { registerAfterMs: 15_000, jobDurationMs: 10 * 60_000 } },
 * );
 * await fleet.manager.requestScale({ jobId: 'job-1', labels: ['linux'] });
 * await fleet.clock.advance(15_000); // registered, running job-1
 * fleet.checkInvariants();
 * await fleet.clock.advance(10 * 60_000); // job-1 done, agent idle
 * await fleet.shutdown();
 * ```
 */
export function createTestFleet(
  config: ScalerConfigInput,
  options: TestFleetOptions = {},
): TestFleet {
  const known = [
    'start',
    'clockOptions',
    'instanceId',
    'store',
    'backend',
    'backends',
    'manager',
    'startManager',
    'seed',
  ];
  for (const key of Object.keys(options ?? {})) {
    if (!known.includes(key)) {
      throw new TypeError(
        `Unknown createTestFleet option \`${key}\`: the accepted options are ${known.join(', ')}`,
      );
    }
  }
  const seed = options.seed ?? 1;
  if (!Number.isInteger(seed) || seed < 0 || seed > 0xffff_ffff) {
    throw new TypeError(
      `Expected \`seed\` to be an integer from 0 to 4294967295, got \`${String(seed)}\``,
    );
  }
  const parsed = parseScalerConfig(config);
  const clock = new TestClock(options.start ?? '2026-01-05T09:00:00Z', options.clockOptions);
  const instanceId = options.instanceId ?? 'test-fleet';
  const backends: Record<string, FakeBackend> = {};
  // Rows released while their agent ran, as they happened (reported by every check).
  const releasedRunning: string[] = [];
  const runsOn = (agentId: string): string | undefined => {
    for (const [name, backend] of Object.entries(backends)) {
      if (backend.agent(agentId) !== undefined) return name;
    }
    return undefined;
  };
  const note = (sentence: string): void => {
    releasedRunning.push(`${sentence} (at ${new Date(clock.now()).toISOString()})`);
  };
  const ledger = new MemoryPoolLedger({
    instanceId,
    store: options.store ?? new MemoryPoolStore(),
    clock,
  });
  const { ledgers: given, ...extra } = options.manager ?? {};
  if (
    given !== undefined &&
    (typeof given !== 'object' || given === null || Array.isArray(given))
  ) {
    throw new TypeError(
      `Expected \`manager.ledgers\` to be an object of pool name to MemoryPoolLedger, got \`${Array.isArray(given) ? 'array' : String(given)}\``,
    );
  }
  // The ledger of each pool: the given ones, the fleet's for the rest.
  const ledgers: Record<string, MemoryPoolLedger> = {};
  for (const [pool, each] of Object.entries(given ?? {})) {
    if (!(each instanceof MemoryPoolLedger)) {
      throw new TypeError(
        `Expected \`manager.ledgers.${pool}\` to be a MemoryPoolLedger (checkInvariants reads its rows), got \`${each === null ? 'null' : typeof each}\``,
      );
    }
    ledgers[pool] = each;
  }
  for (const pool of Object.keys(parsed.machinePools)) ledgers[pool] ??= ledger;
  const views = new Map<MemoryPoolLedger, MemoryPoolLedger>();
  const viewOf = (each: MemoryPoolLedger): MemoryPoolLedger => {
    let view = views.get(each);
    if (view === undefined) {
      view = watchReleases(each, runsOn, note);
      views.set(each, view);
    }
    return view;
  };
  for (const name of Object.keys(options.backends ?? {})) {
    if (!parsed.scalers.some((s) => s.name === name)) {
      throw new TypeError(
        `\`backends\` names scaler \`${name}\`, which is not in the config (scalers: ${parsed.scalers.map((s) => s.name).join(', ')})`,
      );
    }
  }
  for (const scaler of parsed.scalers) {
    backends[scaler.name] = new FakeBackend({
      ...options.backend,
      ...options.backends?.[scaler.name],
      clock,
      name: scaler.name,
    });
  }
  const events: ScalerEvent[] = [];
  // Which job each agent is bound to, from the manager's own events.
  const bound = new Map<string, string>();
  const counters = new Map<string, number>();
  const manager = new ScalerManager({
    generateAgentId: (scaler) => {
      const n = (counters.get(scaler) ?? 0) + 1;
      counters.set(scaler, n);
      return `${scaler}-${n}`;
    },
    random: seededRandom(seed),
    ...extra,
    config,
    backends: Object.entries(backends).map(([name, backend]) => ({ name, backend })),
    clock,
    ledgers: Object.fromEntries(
      Object.entries(ledgers).map(([pool, each]) => [pool, viewOf(each)]),
    ),
    onEvent: (event) => {
      events.push(event);
      if (event.kind === 'busy' && typeof event.data?.jobId === 'string') {
        bound.set(event.agentId, event.data.jobId);
      } else if (['idle', 'disconnected', 'destroyed', 'pruned', 'gone'].includes(event.kind)) {
        bound.delete(event.agentId);
      }
      extra.onEvent?.(event);
    },
  });
  for (const backend of Object.values(backends)) backend.attach(manager);
  if (options.startManager !== false) manager.start();

  // Agents spawned and not yet forgotten by the manager, per scaler, kept up
  // to date from each backend's new spawn calls (an id the manager forgot
  // never comes back).
  const candidates = new Map<string, { seen: number; ids: Set<string> }>(
    Object.keys(backends).map((name) => [name, { seen: 0, ids: new Set<string>() }]),
  );
  const trackedAgents = (): Record<string, string[]> => {
    const out: Record<string, string[]> = {};
    for (const [name, backend] of Object.entries(backends)) {
      const entry = candidates.get(name)!;
      const calls = backend.calls;
      for (; entry.seen < calls.length; entry.seen++) {
        const call = calls[entry.seen]!;
        if (call.method === 'spawn' && call.agentId !== undefined) entry.ids.add(call.agentId);
      }
      const ids: string[] = [];
      for (const id of entry.ids) {
        if (manager.getAgent(id)?.scaler === name) ids.push(id);
        else entry.ids.delete(id);
      }
      if (ids.length > 0) out[name] = ids;
    }
    return out;
  };

  // Agents tracked at the last check, per scope (GLOBAL or `scaler <name>`).
  const lastCount = new Map<string, number>();
  const checkInvariants = (): void => {
    const problems: string[] = [];
    const status = manager.getStatus();
    const over = (what: string, used: number, max: number | undefined, unit: string) => {
      if (max !== undefined && used > max + EPSILON) {
        problems.push(`${what}: ${fmt(used)} ${unit} held, cap ${fmt(max)}`);
      }
    };
    const tooMany = (scope: string, count: number, max: number, what: string) => {
      // Above a lowered limit agents stay until drained, but the count may not grow.
      const before = lastCount.get(scope) ?? 0;
      lastCount.set(scope, count);
      if (count <= Math.max(max, before)) return;
      const grown =
        before > max
          ? ` (above the lowered limit it may only shrink: ${before} at the last check)`
          : '';
      problems.push(
        `${what}: ${count} agents tracked, ${scope === GLOBAL ? 'max' : 'maxAgents'} ${max}${grown}`,
      );
    };
    tooMany(GLOBAL, status.globalActiveCount, status.globalMaxAgents, 'globalMaxAgents');
    over('global CPU', status.globalUsage.cpus, status.globalResourceCap?.maxCpu, 'cores');
    over(
      'global memory',
      status.globalUsage.memBytes,
      status.globalResourceCap?.maxMemoryBytes,
      'bytes',
    );
    for (const b of status.scalers) {
      tooMany(`scaler ${b.name}`, b.activeCount, b.maxAgents, `scaler ${b.name}`);
      over(`scaler ${b.name} CPU`, b.usage.cpus, b.resourceCap?.maxCpu, 'cores');
      over(`scaler ${b.name} memory`, b.usage.memBytes, b.resourceCap?.maxMemoryBytes, 'bytes');
    }
    const tracked = trackedAgents();
    const poolOf = new Map(status.scalers.map((b) => [b.name, b.machinePool]));
    // Each agent's pools (several when its scaler or label set names several).
    const agentPools = new Map<string, readonly string[]>();
    for (const [scaler, ids] of Object.entries(tracked)) {
      for (const id of ids) {
        const own = manager.getAgent(id)?.pools;
        const pool = poolOf.get(scaler);
        agentPools.set(id, own ?? (pool === undefined ? [] : [pool]));
      }
    }
    // Each pool's ledger: the one serving it, else the (first) one whose store has it.
    const ledgerOf = new Map(Object.entries(ledgers));
    for (const each of new Set([ledger, ...Object.values(ledgers)])) {
      for (const pool of each.store.pools()) if (!ledgerOf.has(pool)) ledgerOf.set(pool, each);
    }
    const pools = new Set([...status.pools.map((p) => p.name), ...ledgerOf.keys()]);
    for (const pool of [...pools].sort()) {
      const poolLedger = ledgerOf.get(pool) ?? ledger;
      const live = poolLedger.inspect(pool).live;
      const cap = status.pools.find((p) => p.name === pool)?.cap;
      const total = sumRows(live);
      over(`pool ${pool} CPU (all instances)`, total.cpus, cap?.maxCpu, 'cores');
      over(`pool ${pool} memory (all instances)`, total.memBytes, cap?.maxMemoryBytes, 'bytes');
      const ours = live.filter((row) => row.instanceId === poolLedger.instanceId);
      const rowAgents = new Set(ours.map((row) => row.agentId));
      for (const row of ours) {
        if (!agentPools.get(row.agentId)?.includes(pool)) {
          problems.push(
            `pool ${pool}: row for ${row.agentId} (${fmt(row.cpus)} cores, ${fmt(row.memBytes)} bytes) but the manager tracks no such agent in this pool`,
          );
        }
      }
      for (const [id, p] of agentPools) {
        if (p.includes(pool) && !rowAgents.has(id)) {
          problems.push(`agent ${id} (pool ${pool}): tracked by the manager, but it has no row`);
        }
      }
      const held = status.pools.find((p) => p.name === pool)?.usage;
      const mine = sumRows(ours);
      if (
        held !== undefined &&
        (Math.abs(held.cpus - mine.cpus) > EPSILON || held.memBytes !== mine.memBytes)
      ) {
        problems.push(
          `pool ${pool}: the manager says it holds ${fmt(held.cpus)} cores / ${fmt(held.memBytes)} bytes, its rows sum to ${fmt(mine.cpus)} cores / ${fmt(mine.memBytes)} bytes`,
        );
      }
    }
    problems.push(...releasedRunning);
    const byJob = new Map<string, string[]>();
    for (const [agentId, jobId] of bound) {
      if (manager.getAgent(agentId) === undefined) continue;
      byJob.set(jobId, [...(byJob.get(jobId) ?? []), agentId]);
    }
    for (const [jobId, agents] of byJob) {
      if (agents.length > 1) problems.push(`job ${jobId} is bound to ${agents.join(' and ')}`);
    }
    if (problems.length > 0) throw new FleetInvariantError(clock.now(), problems);
  };

  return {
    manager,
    clock,
    ledger: viewOf(ledger),
    ledgers: Object.fromEntries(
      Object.entries(ledgers).map(([pool, each]) => [pool, viewOf(each)]),
    ),
    backends,
    events,
    checkInvariants,
    trackedAgents,
    async shutdown() {
      await manager.shutdownAll();
      for (const each of new Set([ledger, ...Object.values(ledgers)])) await each.close();
    },
  };
}

const GLOBAL = 'global';

function fmt(n: number): string {
  return Number.isInteger(n) ? String(n) : n.toFixed(3);
}

/**
 * Numbers in [0, 1) from a seed (mulberry32): small, fast, and the same
 * sequence on every platform; for jitter in tests, not for anything secret.
 */
function seededRandom(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
