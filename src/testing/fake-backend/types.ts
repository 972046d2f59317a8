/**
 * The public shapes of FakeBackend: what it records, how it is scripted, its
 * options and what it says about its agents.
 */
import type { Clock } from '../../clock.js';
import type { ScalerManager, SpawnRequest, SpawnResult } from '../../manager/index.js';

/**
 * The methods of a `ScalerBackend` a {@link FakeBackend} records and scripts.
 *
 * @example
 * ```ts
 * import type { FakeBackend, FakeMethod } from 'scaler-primitives/testing';
 *
 * declare const backend: FakeBackend;
 * const method: FakeMethod = 'destroy';
 * backend.failNext(1, new Error('busy'), method);
 * ```
 */
export type FakeMethod = 'spawn' | 'destroy' | 'list' | 'shutdown';

/**
 * What a {@link FakeBackend} calls on the manager, as a real backend and
 * dispatcher would: a `ScalerManager` fits.
 *
 * @example
 * ```ts
 * import type { ScalerManager } from 'scaler-primitives/manager';
 * import { FakeBackend, type FakeBackendHost, type TestClock } from 'scaler-primitives/testing';
 *
 * declare const manager: ScalerManager;
 * declare const clock: TestClock;
 * const host: FakeBackendHost = manager;
 * new FakeBackend({ clock, manager: host, registerAfterMs: 10_000 });
 * ```
 */
export type FakeBackendHost = Pick<
  ScalerManager,
  'onAgentRegistered' | 'correlateAgentToJob' | 'onJobComplete' | 'onAgentDisconnected'
>;

/**
 * One call a {@link FakeBackend} received.
 *
 * @example
 * ```ts
 * import type { FakeBackend, FakeCall } from 'scaler-primitives/testing';
 *
 * declare const backend: FakeBackend;
 * const spawns: FakeCall[] = backend.callsOf('spawn');
 * console.log(spawns.map((c) => `${new Date(c.at).toISOString()} ${c.agentId} ${c.outcome}`));
 * ```
 */
export interface FakeCall {
  /** Which method. */
  method: FakeMethod;
  /** When it was called, on the backend's clock (epoch milliseconds). */
  at: number;
  /** The arguments as given: `[request]` for spawn, `[agentId]` for destroy, `[]` otherwise. */
  args: readonly unknown[];
  /** The agent, for spawn and destroy. */
  agentId?: string;
  /** `pending` until it settles; `hung` for a scripted call that never settles. */
  outcome: 'pending' | 'ok' | 'failed' | 'hung';
  /** When it settled, on the backend's clock. */
  settledAt?: number;
  /** What it rejected with, when `failed`. */
  error?: unknown;
}

/**
 * A scripted answer. Rules are tried in the order they were added; the first
 * whose `method` and `when` match the call and that has `times` left applies.
 *
 * @example
 * ```ts
 * import type { SpawnRequest } from 'scaler-primitives/manager';
 * import type { FakeBackend, FakeScript } from 'scaler-primitives/testing';
 *
 * declare const backend: FakeBackend;
 * const slowWarm: FakeScript = {
 *   when: (call) => (call.args[0] as SpawnRequest).warm,
 *   latencyMs: 90_000,
 *   times: Infinity,
 * };
 * backend.script(slowWarm);
 * ```
 */
export interface FakeScript {
  /** The method it applies to. @default 'spawn' */
  method?: FakeMethod;
  /** How many calls it applies to. @default 1 (use `Infinity` for every call) */
  times?: number;
  /** Apply only to calls this predicate accepts (e.g. by `agentId` or `args[0].jobId`). */
  when?: (call: FakeCall) => boolean;
  /** Reject with this. */
  fail?: unknown;
  /** Never settle (a spawn stuck in a cloud API). */
  hang?: boolean;
  /** Answer after this many milliseconds of clock time (instead of the backend's latency). */
  latencyMs?: number;
  /** What `spawn` resolves to. */
  result?: SpawnResult;
}

/**
 * Options of {@link FakeBackend}.
 *
 * @example
 * ```ts
 * import { FakeBackend, type FakeBackendOptions, TestClock } from 'scaler-primitives/testing';
 *
 * declare const clock: TestClock;
 * const options: FakeBackendOptions = { clock, latencyMs: { spawn: 5000 }, registerAfterMs: 20_000 };
 * const backend = new FakeBackend(options);
 * ```
 */
export interface FakeBackendOptions {
  /** The clock calls are timed and delayed with (a `TestClock` in tests). @default systemClock */
  clock?: Clock;
  /** A name for messages and errors. @default 'fake' */
  name?: string;
  /** The manager to call back (also settable with {@link FakeBackend.attach}). */
  manager?: FakeBackendHost;
  /** Clock time every call takes, or per method. @default 0 */
  latencyMs?: number | Partial<Record<FakeMethod, number>>;
  /**
   * Register each spawned agent with the manager this long after its spawn
   * resolves (`onAgentRegistered` with the request's labels). Unset: agents
   * register only when the test calls {@link FakeBackend.register}.
   */
  registerAfterMs?: number;
  /**
   * Once an agent spawned for a job registers, run that job for this long
   * (`correlateAgentToJob`, then `onJobComplete`). Unset: the test runs jobs
   * with {@link FakeBackend.runJob}.
   */
  jobDurationMs?: number;
  /** The run id passed to `correlateAgentToJob` for a job. @default `run-<jobId>` */
  runIdOf?: (jobId: string) => string;
}

/**
 * An agent a {@link FakeBackend} runs, as {@link FakeBackend.agent} reports it.
 *
 * @example
 * ```ts
 * import type { FakeAgent, FakeBackend } from 'scaler-primitives/testing';
 *
 * declare const backend: FakeBackend;
 * const agent: FakeAgent | undefined = backend.agent('linux-1');
 * if (agent?.state === 'busy') console.log(`runs ${agent.jobId}`);
 * ```
 */
export interface FakeAgent {
  /** The agent id. */
  agentId: string;
  /** The spawn request it was started with. */
  request: SpawnRequest;
  /**
   * `starting` (spawn not settled), `started` (not registered), `idle`
   * (registered, no job), `busy` (running `jobId`).
   */
  state: 'starting' | 'started' | 'idle' | 'busy';
  /** The job it runs, when `busy`. */
  jobId?: string;
  /** When its spawn was called (clock time). */
  startedAt: number;
  /** When it registered (clock time). */
  registeredAt?: number;
}

/**
 * A job a {@link FakeBackend} agent ran to the end.
 *
 * @example
 * ```ts
 * import type { FakeBackend, FakeJobRun } from 'scaler-primitives/testing';
 *
 * declare const backend: FakeBackend;
 * const runs: FakeJobRun[] = backend.jobsCompleted;
 * console.log(runs.map((r) => `${r.jobId} on ${r.agentId}: ${(r.completedAt - r.startedAt) / 1000} s`));
 * ```
 */
export interface FakeJobRun {
  /** The agent. */
  agentId: string;
  /** The job. */
  jobId: string;
  /** The run id it was correlated with. */
  runId: string;
  /** When it started (clock time). */
  startedAt: number;
  /** When it completed (clock time). */
  completedAt: number;
}
