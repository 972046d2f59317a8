/**
 * The types of FakeBackend's options, calls and scripts (public: `scaler-primitives/testing`),
 * apart from the class so that its option reader (./options.ts) needs nothing of it.
 */
import type { Clock } from '../../clock.js';
import type { ScalerManager, SpawnResult } from '../../manager/index.js';

/**
 * One call a {@link FakeBackend} received.
 */
export interface FakeCall {
  /** Which method of the `ScalerBackend`. */
  method: 'spawn' | 'destroy' | 'list' | 'shutdown';
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
 */
export interface FakeScript {
  /** The method it applies to. @default 'spawn' */
  method?: FakeCall['method'];
  /** How many calls it applies to. @default 1 (use `Infinity` for every call) */
  times?: number;
  /** Apply only to calls this predicate accepts (e.g. by `agentId` or `args[0].jobId`). */
  when?: (call: FakeCall) => boolean;
  /** Reject with this. */
  fail?: unknown;
  /**
   * Never settle (a spawn stuck in a cloud API), unless the spawn request's
   * `signal` aborts: the call then rejects with the signal's reason, as a
   * backend that cancels its API call does. (`holdNext` holds a call that
   * ignores the abort.)
   */
  hang?: boolean;
  /** Answer after this many milliseconds of clock time (instead of the backend's latency). */
  latencyMs?: number;
  /** What `spawn` resolves to. */
  result?: SpawnResult;
}

/**
 * Options of {@link FakeBackend}.
 */
export interface FakeBackendOptions {
  /** The clock calls are timed and delayed with (a `TestClock` in tests). @default systemClock */
  clock?: Clock;
  /** A name for messages and errors. @default 'fake' */
  name?: string;
  /** The manager to call back (also settable with {@link FakeBackend.attach}). */
  manager?: Pick<
    ScalerManager,
    'onAgentRegistered' | 'correlateAgentToJob' | 'onJobComplete' | 'onAgentDisconnected'
  >;
  /** Clock time every call takes, or per method. @default 0 */
  latencyMs?: number | Partial<Record<FakeCall['method'], number>>;
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
  /**
   * Called with each call as it is recorded, before it answers (its
   * `outcome` is `pending`): to look at the world at that instant, or to act
   * during a spawn as a real backend would (`request.emit(...)`). What it
   * throws is thrown to the caller.
   */
  onCall?: (call: FakeCall) => void;
  /**
   * Whether the backend has `list()`. `false` leaves the method out, as a
   * backend that cannot list its agents does (the manager's reconcile then
   * skips it). @default true
   */
  list?: boolean;
  /**
   * Whether the backend has `shutdown()`. `false` leaves the method out: the
   * manager's `shutdownAll` then destroys its agents one by one. @default true
   */
  shutdown?: boolean;
}

/** The methods of a `ScalerBackend` a FakeBackend records and scripts. */
export type FakeMethod = FakeCall['method'];

/**
 * What a FakeBackend calls on the manager, as a real backend and dispatcher would: a
 * `ScalerManager` fits.
 */
export type FakeBackendHost = NonNullable<FakeBackendOptions['manager']>;
