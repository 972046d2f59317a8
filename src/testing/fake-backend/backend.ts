/**
 * FakeBackend: a `ScalerBackend` that runs nothing outside the process. It
 * records every call with its clock time, answers as scripted, and can play
 * the agent and the dispatcher: register each agent with the manager after a
 * delay, run its job for a while, report it done.
 */
import type { Clock, ClockTimer } from '../../clock.js';
import type {
  AgentRegistration,
  ScalerBackend,
  SpawnRequest,
  SpawnResult,
} from '../../manager/index.js';
import { checkMs, type Hold, type Rule, readFakeBackendOptions, readScript } from './options.js';
import type {
  FakeBackendHost,
  FakeBackendOptions,
  FakeCall,
  FakeMethod,
  FakeScript,
} from './types.js';

export type { FakeBackendOptions, FakeCall, FakeScript } from './types.js';
/**
 * A {@link ScalerBackend} for tests: nothing leaves the process. Every call is
 * recorded in {@link FakeBackend.calls} with its clock time; answers can be
 * scripted (`failNext`, `hangNext`, latency, any predicate); and with
 * `registerAfterMs` / `jobDurationMs` it plays the agent and the dispatcher,
 * calling the manager's callbacks as a real backend would.
 *
 * @example
 * ```ts
 * import { type ScalerConfigInput, ScalerManager } from 'scaler-primitives/manager';
 * import { FakeBackend, TestClock } from 'scaler-primitives/testing';
 *
 * declare const config: ScalerConfigInput; // a scaler `linux` for label `linux`
 * const clock = new TestClock('2026-01-05T09:00:00Z');
 * const backend = new FakeBackend({ clock, registerAfterMs: 20_000, jobDurationMs: 600_000 });
 * const manager = new ScalerManager({ config, backends: [{ name: 'linux', backend }], clock });
 * backend.attach(manager);
 * backend.failNext(2, new Error('quota exceeded'));
 * await manager.requestScale({ jobId: 'job-1', labels: ['linux'] }); // spawn-failed
 * await manager.requestScale({ jobId: 'job-1', labels: ['linux'] }); // spawn-failed
 * await manager.requestScale({ jobId: 'job-1', labels: ['linux'] }); // spawned
 * await clock.advance(20_000); // registered, busy with job-1
 * console.log(backend.running(), backend.calls.map((c) => `${c.method}:${c.outcome}`));
 * ```
 */
export class FakeBackend implements ScalerBackend {
  /** Every call received, in order. */
  readonly calls: FakeCall[] = [];
  /** Jobs that ran to the end on this backend's agents, in completion order. */
  readonly jobsCompleted: {
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
  }[] = [];
  /** The backend's name, for messages. */
  readonly name: string;

  readonly #clock: Clock;
  readonly #latency: Partial<Record<FakeMethod, number>>;
  readonly #registerAfterMs: number | undefined;
  readonly #jobDurationMs: number | undefined;
  readonly #runIdOf: (jobId: string) => string;
  readonly #rules: Rule[] = [];
  readonly #agents = new Map<string, AgentSlot>();
  readonly #holds: Hold[] = [];
  readonly #destroyed: string[] = [];
  readonly #onCall: ((call: FakeCall) => void) | undefined;
  #manager: FakeBackendHost | undefined;

  /**
   * @param options - See `FakeBackendOptions`.
   * @throws TypeError for an unknown option or a value out of range.
   */
  constructor(options: FakeBackendOptions = {}) {
    const read = readFakeBackendOptions(options);
    this.#clock = read.clock;
    this.name = read.name;
    this.#latency = read.latency;
    this.#registerAfterMs = read.registerAfterMs;
    this.#jobDurationMs = read.jobDurationMs;
    this.#runIdOf = read.runIdOf;
    this.#manager = read.manager;
    this.#onCall = read.onCall;
    // Left out as a backend without them would be: the manager checks for the method.
    if (!read.list) Object.defineProperty(this, 'list', { value: undefined });
    if (!read.shutdown) Object.defineProperty(this, 'shutdown', { value: undefined });
  }

  /** Call back this manager (registration, jobs, disconnects). @returns this backend. */
  attach(manager: NonNullable<FakeBackendOptions['manager']>): this {
    if (typeof manager?.onAgentRegistered !== 'function') {
      throw new TypeError('Expected `manager` to be a ScalerManager (with onAgentRegistered)');
    }
    this.#manager = manager;
    return this;
  }

  /**
   * Add a scripted answer (see `FakeScript`).
   *
   * @example
   * ```ts
   * import type { SpawnRequest } from 'scaler-primitives/manager';
   * import type { FakeBackend } from 'scaler-primitives/testing';
   *
   * declare const backend: FakeBackend;
   * backend.script({ when: (c) => (c.args[0] as SpawnRequest).warm, fail: new Error('no warm pool'), times: Infinity });
   * ```
   */
  script(rule: FakeScript): this {
    this.#rules.push(readScript(rule));
    return this;
  }

  /**
   * The next `n` calls of `method` reject with `error`.
   *
   * @example
   * ```ts
   * import type { FakeBackend } from 'scaler-primitives/testing';
   *
   * declare const backend: FakeBackend;
   * backend.failNext(2, new Error('quota exceeded')); // the third spawn works
   * ```
   */
  failNext(n: number, error?: unknown, method: FakeCall['method'] = 'spawn'): this {
    const fail =
      error ?? new Error(`FakeBackend ${this.name}: scripted ${method} failure (failNext)`);
    return this.script({ method, times: n, fail });
  }

  /** The next `n` calls of `method` never settle. */
  hangNext(n = 1, method: FakeCall['method'] = 'spawn'): this {
    return this.script({ method, times: n, hang: true });
  }

  /**
   * Hold the next `n` calls of `method`: each is recorded and waits, `pending`,
   * until the returned function is called; then it answers as it would have
   * (scripted rules and latency apply). Releasing drops the uses left, so
   * `holdNext(Infinity)` holds every call until the release.
   *
   * @returns The release function (calling it again does nothing).
   * @throws TypeError for a bad `n` or `method`.
   */
  holdNext(n = 1, method: FakeCall['method'] = 'spawn'): () => void {
    readScript({ method, times: n });
    let release!: () => void;
    const hold: Hold = {
      method,
      left: n,
      released: new Promise<void>((resolve) => {
        release = resolve;
      }),
    };
    this.#holds.push(hold);
    return () => {
      hold.left = 0;
      const at = this.#holds.indexOf(hold);
      if (at >= 0) this.#holds.splice(at, 1);
      release();
    };
  }

  /** Start an agent (recorded; answers as scripted). */
  async spawn(request: SpawnRequest): Promise<SpawnResult | undefined> {
    const agentId = request?.agentId;
    const call = this.#record('spawn', [request], agentId);
    const rule = this.#take(call);
    const slot: AgentSlot = {
      agentId,
      request,
      state: 'starting',
      startedAt: call.at,
      timers: new Set(),
    };
    if (request?.jobId !== undefined) slot.jobId = request.jobId;
    this.#agents.set(agentId, slot);
    await this.#answer(call, rule, request?.signal);
    if (this.#agents.get(agentId) === slot) {
      slot.state = 'started';
      const after = this.#registerAfterMs;
      if (after !== undefined && this.#manager !== undefined) {
        this.#later(slot, after, () => {
          this.register(agentId);
        });
      }
    }
    return rule?.result ?? { context: { backend: this.name, fake: true } };
  }

  /** Stop an agent (recorded; answers as scripted). Destroying an unknown agent succeeds. */
  async destroy(agentId: string): Promise<void> {
    const call = this.#record('destroy', [agentId], agentId);
    const rule = this.#take(call);
    await this.#answer(call, rule);
    this.#destroyed.push(agentId);
    this.#remove(agentId);
  }

  /** The agents this backend runs (recorded; answers as scripted). */
  async list(): Promise<string[]> {
    const call = this.#record('list', []);
    const rule = this.#take(call);
    await this.#answer(call, rule);
    return this.running();
  }

  /** Stop every agent (recorded; answers as scripted). */
  async shutdown(): Promise<void> {
    const call = this.#record('shutdown', []);
    const rule = this.#take(call);
    await this.#answer(call, rule);
    for (const id of [...this.#agents.keys()]) this.#remove(id);
  }

  /** The request of every spawn call, in call order (failed ones included). */
  spawned(): SpawnRequest[] {
    return this.callsOf('spawn').map((call) => call.args[0] as SpawnRequest);
  }

  /** The agents whose destroy call succeeded, in the order the calls answered. */
  destroyed(): string[] {
    return [...this.#destroyed];
  }

  /** The ids of the agents that run now (starting ones included), in spawn order. */
  running(): string[] {
    return [...this.#agents.keys()];
  }

  /** What this backend knows about a running agent, or `undefined`. */
  agent(agentId: string):
    | {
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
    | undefined {
    const slot = this.#agents.get(agentId);
    if (slot === undefined) return undefined;
    // Built field by field: a rest pattern is several times slower, and a
    // simulated day asks this for every agent every minute.
    const agent: FakeAgent = {
      agentId: slot.agentId,
      request: slot.request,
      state: slot.state,
      startedAt: slot.startedAt,
    };
    if ('jobId' in slot) agent.jobId = slot.jobId;
    if ('registeredAt' in slot) agent.registeredAt = slot.registeredAt;
    return agent;
  }

  /** The calls of one method, in order. */
  callsOf(method: FakeCall['method']): FakeCall[] {
    return this.calls.filter((call) => call.method === method);
  }

  /**
   * The agent registers with the manager (`onAgentRegistered` with its spawn
   * labels). An agent spawned for a job then runs it when `jobDurationMs` is set.
   *
   * @returns The manager's answer (`null` for an agent it does not track).
   * @throws TypeError when no manager is attached or the agent does not run here.
   */
  register(agentId: string): AgentRegistration | null {
    const slot = this.#slot(agentId);
    const manager = this.#host();
    const answer = manager.onAgentRegistered(agentId, slot.request.labels);
    if (slot.state === 'starting' || slot.state === 'started') {
      slot.state = 'idle';
      slot.registeredAt = this.#clock.now();
      delete slot.jobId;
    }
    const job = answer?.boundJobId;
    if (job !== undefined && this.#jobDurationMs !== undefined && slot.state === 'idle') {
      this.runJob(agentId, job, this.#jobDurationMs);
    }
    return answer;
  }

  /**
   * The dispatcher gives `jobId` to the agent: `correlateAgentToJob`, then,
   * after `durationMs` of clock time (never for `Infinity`), `onJobComplete`.
   *
   * @throws TypeError when no manager is attached, the agent does not run here or is busy.
   */
  runJob(agentId: string, jobId: string, durationMs: number, runId?: string): void {
    const slot = this.#slot(agentId);
    const manager = this.#host();
    if (slot.state === 'busy') {
      throw new TypeError(
        `Agent ${JSON.stringify(agentId)} of FakeBackend ${this.name} is busy with job ${JSON.stringify(slot.jobId)}`,
      );
    }
    checkMs('durationMs', durationMs, true);
    const run = runId ?? this.#runIdOf(jobId);
    manager.correlateAgentToJob(agentId, run, jobId);
    slot.state = 'busy';
    slot.jobId = jobId;
    slot.jobRunId = run;
    slot.jobStartedAt = this.#clock.now();
    if (durationMs === Number.POSITIVE_INFINITY) return;
    this.#later(slot, durationMs, () => this.completeJob(agentId));
  }

  /**
   * The agent's job ends now (`onJobComplete`); it is idle again.
   *
   * @returns False when the agent was not busy.
   */
  completeJob(agentId: string): boolean {
    const slot = this.#agents.get(agentId);
    if (slot === undefined || slot.state !== 'busy') return false;
    this.jobsCompleted.push({
      agentId,
      jobId: slot.jobId!,
      runId: slot.jobRunId!,
      startedAt: slot.jobStartedAt!,
      completedAt: this.#clock.now(),
    });
    slot.state = 'idle';
    delete slot.jobId;
    this.#host().onJobComplete(agentId);
    return true;
  }

  /**
   * The agent dies on its own (a crash, a preempted VM): it stops running and
   * the manager hears `onAgentDisconnected`, unless `disconnect` is false (no
   * one noticed: `list()` no longer names it, which the manager's reconcile finds).
   *
   * @param options - `disconnect`: call the manager's `onAgentDisconnected`. @default true
   * @returns Resolves once the manager released what the agent held.
   * @throws TypeError when the agent does not run here.
   */
  async crash(agentId: string, options: { disconnect?: boolean } = {}): Promise<void> {
    this.#slot(agentId);
    this.#remove(agentId);
    if (options?.disconnect !== false) await this.#manager?.onAgentDisconnected(agentId);
  }

  #record(method: FakeMethod, args: unknown[], agentId?: string): FakeCall {
    const call: FakeCall = { method, at: this.#clock.now(), args, outcome: 'pending' };
    if (agentId !== undefined) call.agentId = agentId;
    this.calls.push(call);
    this.#onCall?.(call);
    return call;
  }

  #take(call: FakeCall): Rule | undefined {
    for (const rule of this.#rules) {
      if (rule.method !== call.method || rule.left <= 0) continue;
      if (rule.when !== undefined && !rule.when(call)) continue;
      rule.left--;
      return rule;
    }
    return undefined;
  }

  async #answer(call: FakeCall, rule: Rule | undefined, signal?: AbortSignal): Promise<void> {
    const hold = this.#holds.find((h) => h.method === call.method && h.left > 0);
    if (hold !== undefined) {
      hold.left--;
      if (hold.left === 0) this.#holds.splice(this.#holds.indexOf(hold), 1);
      await hold.released;
    }
    if (rule?.hang) {
      call.outcome = 'hung';
      await abortedOnly(signal);
      call.settledAt = this.#clock.now();
      call.outcome = 'failed';
      call.error = signal!.reason;
      if (call.agentId !== undefined && this.#agents.get(call.agentId)?.state === 'starting') {
        this.#remove(call.agentId);
      }
      throw signal!.reason;
    }
    const ms = rule?.latencyMs ?? this.#latency[call.method] ?? 0;
    if (ms > 0) await new Promise<void>((resolve) => this.#clock.setTimeout(resolve, ms));
    call.settledAt = this.#clock.now();
    if (rule !== undefined && 'fail' in rule && rule.fail !== undefined) {
      call.outcome = 'failed';
      call.error = rule.fail;
      if (call.method === 'spawn' && call.agentId !== undefined) {
        const slot = this.#agents.get(call.agentId);
        if (slot?.state === 'starting') this.#remove(call.agentId);
      }
      throw rule.fail;
    }
    call.outcome = 'ok';
  }

  #later(slot: AgentSlot, ms: number, fn: () => void): void {
    const timer = this.#clock.setTimeout(() => {
      slot.timers.delete(timer);
      if (this.#agents.get(slot.agentId) === slot) fn();
    }, ms);
    slot.timers.add(timer);
  }

  #remove(agentId: string): void {
    const slot = this.#agents.get(agentId);
    if (slot === undefined) return;
    for (const timer of slot.timers) this.#clock.clearTimeout(timer);
    this.#agents.delete(agentId);
  }

  #slot(agentId: string): AgentSlot {
    const slot = this.#agents.get(agentId);
    if (slot === undefined) {
      throw new TypeError(
        `Agent ${JSON.stringify(agentId)} does not run on FakeBackend ${this.name} (running: ${this.running().join(', ') || 'none'})`,
      );
    }
    return slot;
  }

  #host(): FakeBackendHost {
    if (this.#manager === undefined) {
      throw new TypeError(
        `FakeBackend ${this.name} has no manager: pass \`manager\` or call attach(manager)`,
      );
    }
    return this.#manager;
  }
}

// Settles only when `signal` aborts (never without one).
function abortedOnly(signal: AbortSignal | undefined): Promise<void> {
  return new Promise<void>((resolve) => {
    if (signal === undefined) return;
    if (signal.aborted) resolve();
    else signal.addEventListener('abort', () => resolve(), { once: true });
  });
}

/** An agent a FakeBackend runs, as {@link FakeBackend.agent} reports it. */
type FakeAgent = NonNullable<ReturnType<FakeBackend['agent']>>;

/** An agent as the backend keeps it: its timers and the job it runs. */
interface AgentSlot extends FakeAgent {
  timers: Set<ClockTimer>;
  jobRunId?: string;
  jobStartedAt?: number;
}
