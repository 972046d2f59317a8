/**
 * ProcessBackend: a ScalerBackend whose agents are local processes (or any
 * command that runs one: `docker run`, `ssh host ...`), each leading its own
 * process group, recorded on disk so a new instance finds them again.
 */
// node:child_process, not execa: the agent's stdout and stderr go straight to
// its log file's descriptor (nothing piped through the controller, so an agent
// outlives a controller restart), and the child is unreferenced at once.
import { type ChildProcess, spawn as spawnChild } from 'node:child_process';
import { closeSync } from 'node:fs';
import { type Clock, type ClockTimer, sleep, systemClock } from '../clock.js';
import { BackendError } from '../errors/index.js';
import type { ScalerBackend, SpawnRequest, SpawnResult } from '../manager/index.js';
import { agentEnv, checkArgv, type ProcessCommand, renderArgv } from './command.js';
import { checkProcessLimits, limitsPrefix, type ProcessLimits } from './limits.js';
import { groupMembers, judgeAgentProcess, readBootId, readProcStat } from './proc.js';
import {
  type AgentRecord,
  capLog,
  ensureStateDir,
  exitFilePath,
  findProgram,
  isSafeAgentId,
  listRecordIds,
  openLog,
  readRecord,
  removeRecord,
  takeExitCode,
  writeRecord,
} from './state.js';

// The agent runs under a small POSIX shell that leads its process group and,
// when the agent ends, writes its exit code (128 + n after signal n) to
// `<agentId>.exit`, so a backend instance that did not start it (after a
// controller restart) still learns its exit code. The command stays argv: it
// is passed as the shell's positional arguments, never parsed by the shell.
const EXIT_RECORDER =
  'f=$1; shift; "$@"; c=$?; printf \'%s\\n\' "$c" > "$f.tmp" && mv -f "$f.tmp" "$f"; exit "$c"';

/** An agent's exit the backend did not cause, as `onExit` reports it. */
export interface ProcessAgentExit {
  /** The agent id. */
  agentId: string;
  /** The scaler it was started for. */
  scaler: string;
  /**
   * Its exit code (128 + n when signal n ended it), whichever backend
   * instance started it; `null` when it cannot be known (the agent's wrapper
   * shell was itself killed, or its process was found reused).
   */
  exitCode: number | null;
  /** The signal that ended its wrapper shell, when one did; otherwise `null`. */
  signal: string | null;
  /** True when an earlier instance started it (found again through the state directory). */
  adopted: boolean;
}

/** Options of {@link ProcessBackend}. */
export interface ProcessBackendOptions {
  /**
   * The directory the backend owns: one `<agentId>.json` record and one
   * `<agentId>.log` per agent. Created 0700; refused when it is a symbolic
   * link or owned by another user. Give the same directory after a restart.
   */
  dir: string;
  /**
   * What to run for an agent, as argv (never a shell string): one command for
   * every scaler, a command per scaler name, or a function of the request.
   * Arguments may hold the placeholders `{agentId}`, `{scaler}`, `{jobId}`,
   * `{labels}` (comma-separated), `{cpus}`, `{memoryBytes}` (the limit, or the
   * request when no limit is set) and `{gpus}` (the granted `nvidia.com/gpu`
   * device ids, comma-separated).
   */
  command: ProcessCommand;
  /** Extra env variables, set last (they win), or a function of the request giving them. */
  env?: Readonly<Record<string, string>> | ((request: SpawnRequest) => Record<string, string>);
  /** Pass the controller's env on to agents (as execa's `extendEnv`). @default true */
  extendEnv?: boolean;
  /** Hand each agent `leaseEnv(request.leases)` (`SCALER_PRIMITIVES_LEASE`). @default true */
  passLeases?: boolean;
  /** The agents' working directory. @default the controller's */
  cwd?: string;
  /** How long `destroy` waits after SIGTERM before SIGKILL of the group, in ms. @default 10000 */
  graceMs?: number;
  /** Cap of an agent's log file in bytes; the older part moves to `<agentId>.log.1`. @default 10 MiB */
  maxLogBytes?: number;
  /** How often the backend checks log sizes and agents an earlier instance started, in ms. @default 1000 */
  watchIntervalMs?: number;
  /**
   * Run each agent's command under a wrapper that applies its resource limits:
   * `'systemd-run'` prefixes it with `systemd-run --scope --quiet -p
   * CPUQuota=<n>% -p MemoryMax=<size> --`, the values `agent-caps` renders for
   * the request's `resources.limits` (an unset limit sets no property). Needs
   * a running systemd and the right to create scopes (root for the system
   * manager). @default none
   */
  limits?: 'systemd-run';
  /** Called when an agent exits on its own (not through `destroy`/`shutdown`). A throw is ignored. */
  onExit?: (exit: ProcessAgentExit) => void;
  /** The clock for `startedAt` and the watch timer. @default systemClock */
  clock?: Clock;
}

const KNOWN = [
  'dir',
  'command',
  'env',
  'extendEnv',
  'passLeases',
  'cwd',
  'graceMs',
  'maxLogBytes',
  'watchIntervalMs',
  'limits',
  'onExit',
  'clock',
];

// The longest delay a Node timer keeps: a longer one fires after 1 ms.
const MAX_TIMER_MS = 2 ** 31 - 1;

function checkRange(value: unknown, name: string, min: number, max: number): number {
  if (typeof value !== 'number' || !Number.isFinite(value) || value < min || value > max) {
    throw new TypeError(
      `Expected \`${name}\` to be a number from ${min} to ${max}, got \`${String(value)}\``,
    );
  }
  return value;
}

/**
 * A {@link ScalerBackend} that runs each agent as a local process (or a
 * command that starts it: `docker run`, `ssh host ...`) leading its own
 * process group. It records each agent (pid, start time, boot id, command) in
 * a state directory, so a new instance over the same directory after a
 * controller restart lists the agents still running, and never takes a
 * reused pid for one. `destroy` sends SIGTERM to the group, waits
 * `graceMs`, then SIGKILL.
 *
 * @example
 * ```ts
 * import { ProcessBackend } from 'scaler-primitives/process';
 * const backend = new ProcessBackend({
 *   dir: '/var/lib/my-ci/agents',
 *   command: ['/usr/local/bin/agent', '--id', '{agentId}', '--cpus', '{cpus}'],
 *   onExit: ({ agentId, exitCode }) => console.log(`${agentId} exited with ${exitCode}`),
 * });
 * ```
 */
export class ProcessBackend implements ScalerBackend {
  readonly #dir: string;
  readonly #command: ProcessCommand;
  readonly #options: ProcessBackendOptions;
  readonly #clock: Clock;
  readonly #bootId = readBootId();
  readonly #graceMs: number;
  readonly #maxLogBytes: number;
  readonly #limits: ProcessLimits | undefined;
  /** Agents this instance started and has not seen exit: pid by agent id. */
  readonly #children = new Map<string, number>();
  /** Agents being destroyed: their exit is not reported. */
  readonly #destroying = new Map<string, Promise<void>>();
  #timer: ClockTimer | undefined;
  /** Set by `close()`: this instance hands the directory over to the next. */
  #closed = false;

  /**
   * @throws TypeError naming a bad option; BackendError when `dir` is unsafe.
   */
  constructor(options: ProcessBackendOptions) {
    if (typeof options !== 'object' || options === null) {
      throw new TypeError(
        `Expected ProcessBackend options to be an object, got \`${String(options)}\``,
      );
    }
    for (const key of Object.keys(options)) {
      if (!KNOWN.includes(key)) {
        throw new TypeError(
          `Unknown ProcessBackend option \`${key}\`: the accepted options are ${KNOWN.join(', ')}`,
        );
      }
    }
    if (typeof options.dir !== 'string' || options.dir === '') {
      throw new TypeError(
        `Expected \`dir\` to be a directory path, got \`${String(options.dir)}\``,
      );
    }
    const command = options.command;
    if (Array.isArray(command)) checkArgv(command, 'command');
    else if (typeof command === 'object' && command !== null) {
      for (const [scaler, argv] of Object.entries(command)) checkArgv(argv, `command.${scaler}`);
    } else if (typeof command !== 'function') {
      throw new TypeError(
        `Expected \`command\` to be an argv array, a record of argv arrays by scaler, or a function of the request, got \`${String(command)}\``,
      );
    }
    if (options.env !== undefined && typeof options.env !== 'function') {
      if (typeof options.env !== 'object' || options.env === null) {
        throw new TypeError(
          `Expected \`env\` to be a record of strings or a function, got \`${String(options.env)}\``,
        );
      }
      for (const [k, v] of Object.entries(options.env)) {
        if (typeof v !== 'string')
          throw new TypeError(`Expected \`env.${k}\` to be a string, got \`${String(v)}\``);
      }
    }
    if (options.onExit !== undefined && typeof options.onExit !== 'function') {
      throw new TypeError(`Expected \`onExit\` to be a function, got \`${typeof options.onExit}\``);
    }
    this.#limits = checkProcessLimits(options.limits);
    this.#graceMs = checkRange(options.graceMs ?? 10_000, 'graceMs', 0, MAX_TIMER_MS);
    this.#maxLogBytes = checkRange(
      options.maxLogBytes ?? 10 * 2 ** 20,
      'maxLogBytes',
      1024,
      Number.MAX_SAFE_INTEGER,
    );
    const watchMs = checkRange(
      options.watchIntervalMs ?? 1000,
      'watchIntervalMs',
      10,
      MAX_TIMER_MS,
    );
    this.#options = options;
    this.#command = command;
    this.#clock = options.clock ?? systemClock;
    this.#dir = ensureStateDir(options.dir);
    this.#timer = this.#clock.setInterval(() => this.#watch(), watchMs).unref();
  }

  /** Start the agent; resolves once its process runs and is recorded. */
  async spawn(request: SpawnRequest): Promise<SpawnResult> {
    const agentId = request?.agentId;
    if (!isSafeAgentId(agentId)) {
      throw new TypeError(
        `Expected \`agentId\` to be 1-128 of A-Z, a-z, 0-9, '.', '_' and '-' (not starting with '.' or '-'), got \`${String(agentId)}\``,
      );
    }
    if (this.#closed) {
      throw new BackendError(
        request.scaler,
        `This ProcessBackend over ${this.#dir} is closed; create a new one over the same directory`,
      );
    }
    if (request.signal?.aborted) {
      throw new BackendError(
        request.scaler,
        `The spawn of ${agentId} was aborted before it started.`,
      );
    }
    const existing = readRecord(this.#dir, agentId);
    if (existing && this.#judge(existing) === 'running') {
      throw new BackendError(
        request.scaler,
        `Agent ${agentId} already runs (pid ${existing.pid}).`,
      );
    }
    const command = renderArgv(this.#command, request);
    const argv =
      this.#limits === undefined
        ? command
        : [...limitsPrefix(this.#limits, request.resources.limits), ...command];
    const extra =
      typeof this.#options.env === 'function'
        ? this.#options.env(request)
        : (this.#options.env ?? {});
    const env = { ...agentEnv(request, this.#options.passLeases !== false), ...extra };
    const baseEnv = this.#options.extendEnv === false ? {} : process.env;
    const fullEnv: Record<string, string | undefined> = { ...baseEnv, ...env };
    if (!findProgram(argv[0]!, fullEnv.PATH, this.#options.cwd)) {
      throw new BackendError(
        request.scaler,
        `Could not start agent ${agentId}: \`${argv[0]}\` is not an executable file${argv[0]!.includes('/') ? '' : ' in PATH'}.`,
      );
    }
    const exitFile = exitFilePath(this.#dir, agentId);
    takeExitCode(this.#dir, agentId); // a previous agent's, under the same id
    const log = openLog(this.#dir, agentId);
    let child: ChildProcess;
    try {
      child = spawnChild('/bin/sh', ['-c', EXIT_RECORDER, 'scaler-agent', exitFile, ...argv], {
        detached: true,
        stdio: ['ignore', log, log],
        env: fullEnv,
        ...(this.#options.cwd !== undefined ? { cwd: this.#options.cwd } : {}),
      });
    } finally {
      closeSync(log);
    }
    const exited = new Promise<{ code: number | null; signal: string | null; error?: Error }>(
      (settle) => {
        child.once('error', (error) => settle({ code: null, signal: null, error }));
        child.once('exit', (code, signal) => settle({ code, signal }));
      },
    );
    const pid = child.pid;
    const stat = pid === undefined ? undefined : readProcStat(pid);
    if (pid === undefined || stat === undefined) {
      const result = await exited;
      throw new BackendError(
        request.scaler,
        `Could not start agent ${agentId} with \`${argv.join(' ')}\`: ${result.error?.message ?? `it exited at once (code ${result.code}, signal ${result.signal})`}`,
        { cause: result.error },
      );
    }
    const record: AgentRecord = {
      version: 1,
      agentId,
      scaler: request.scaler,
      pid,
      startTime: stat.startTime,
      bootId: this.#bootId,
      command: argv,
      startedAt: this.#clock.now(),
    };
    try {
      writeRecord(this.#dir, record);
    } catch (error) {
      killGroup(pid, 'SIGKILL');
      throw new BackendError(
        request.scaler,
        `Started agent ${agentId} but could not record it in ${this.#dir}, so it was killed: ${(error as Error).message}`,
        { cause: error },
      );
    }
    this.#children.set(agentId, pid);
    child.unref();
    void exited.then((result) => {
      if (this.#children.get(agentId) === pid) this.#children.delete(agentId);
      // Destroyed by us, or left for the next instance to report (closed).
      if (this.#destroying.has(agentId) || this.#closed) return;
      const current = readRecord(this.#dir, agentId);
      if (current?.pid !== pid || current.startTime !== record.startTime) return;
      takeExitCode(this.#dir, agentId);
      removeRecord(this.#dir, agentId);
      this.#report({
        agentId,
        scaler: record.scaler,
        exitCode: result.code,
        signal: result.signal,
        adopted: false,
      });
    });
    return { context: { pid, log: `${this.#dir}/${agentId}.log` } };
  }

  /** Stop the agent's process group (SIGTERM, `graceMs`, SIGKILL) and forget it. Idempotent. */
  destroy(agentId: string): Promise<void> {
    if (typeof agentId !== 'string') {
      return Promise.reject(
        new TypeError(`Expected \`agentId\` to be a string, got \`${String(agentId)}\``),
      );
    }
    if (!isSafeAgentId(agentId)) return Promise.resolve();
    const running = this.#destroying.get(agentId);
    if (running) return running;
    const work = this.#destroy(agentId).finally(() => this.#destroying.delete(agentId));
    this.#destroying.set(agentId, work);
    return work;
  }

  async #destroy(agentId: string): Promise<void> {
    const record = readRecord(this.#dir, agentId);
    if (record === undefined) return;
    const state = this.#judge(record);
    // A reused pid is a stranger's, and a pid of another boot names nothing of ours: never
    // signal them. A gone leader may have left processes in its group (the group id stays
    // reserved while any member lives, so they are the agent's).
    if (state !== 'reused' && record.bootId === this.#bootId) {
      const pgid = record.pid;
      killGroup(pgid, 'SIGTERM');
      if (!(await waitGroupGone(pgid, this.#graceMs))) {
        killGroup(pgid, 'SIGKILL');
        if (!(await waitGroupGone(pgid, 10_000))) {
          throw new BackendError(
            record.scaler,
            `Agent ${agentId}'s process group ${pgid} still has processes 10 s after SIGKILL (${groupMembers(pgid).join(', ')}); its record is kept.`,
          );
        }
      }
    }
    takeExitCode(this.#dir, agentId);
    removeRecord(this.#dir, agentId);
  }

  /** The ids of the agents running, whichever instance started them; exited ones are forgotten (and reported). */
  async list(): Promise<string[]> {
    return this.#sweep();
  }

  /**
   * Hand the directory over: stop watching, and leave every agent running and
   * recorded. A new instance over the same directory lists those agents and
   * reports the exits this one no longer reports (with `adopted: true`).
   * Afterwards `spawn` is refused, `list()` names the running agents without
   * reporting or forgetting exited ones, and `destroy` and `shutdown` still
   * work. Idempotent.
   */
  close(): void {
    this.#closed = true;
    this.#clock.clearInterval(this.#timer);
    this.#timer = undefined;
  }

  /** Destroy every agent recorded in the directory, and stop the watch timer. */
  async shutdown(): Promise<void> {
    this.#clock.clearInterval(this.#timer);
    this.#timer = undefined;
    const ids = listRecordIds(this.#dir);
    const results = await Promise.allSettled(ids.map((id) => this.destroy(id)));
    const failed = results.filter((r): r is PromiseRejectedResult => r.status === 'rejected');
    if (failed.length > 0) throw failed[0]!.reason;
  }

  #judge(record: AgentRecord): 'running' | 'gone' | 'reused' {
    if (record.bootId !== this.#bootId) return 'gone';
    return judgeAgentProcess(record.pid, record.startTime);
  }

  #sweep(): string[] {
    const running: string[] = [];
    for (const id of listRecordIds(this.#dir)) {
      const record = readRecord(this.#dir, id);
      if (record === undefined) continue;
      const state = this.#judge(record);
      if (state === 'running') {
        running.push(id);
        continue;
      }
      // Our own child's exit is reported with its code by its exit handler; once closed,
      // exits are left for the next instance.
      if (this.#children.get(id) === record.pid || this.#destroying.has(id) || this.#closed) {
        continue;
      }
      // The wrapper shell wrote the exit code before it ended (absent when it was killed).
      const exitCode = state === 'gone' ? takeExitCode(this.#dir, id) : null;
      removeRecord(this.#dir, id);
      this.#report({
        agentId: id,
        scaler: record.scaler,
        exitCode,
        signal: null,
        adopted: true,
      });
    }
    return running;
  }

  #watch(): void {
    try {
      for (const id of this.#sweep()) capLog(this.#dir, id, this.#maxLogBytes);
    } catch {
      // A background check never crashes the host; the next one tries again.
    }
  }

  #report(exit: ProcessAgentExit): void {
    try {
      this.#options.onExit?.(exit);
    } catch {
      // The host's callback failing is the host's concern.
    }
  }
}

function killGroup(pgid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(-pgid, signal);
  } catch {
    // ESRCH: nothing left in the group.
  }
}

async function waitGroupGone(pgid: number, ms: number): Promise<boolean> {
  const step = 25;
  for (let waited = 0; ; waited += step) {
    if (groupMembers(pgid).length === 0) return true;
    if (waited >= ms) return false;
    await sleep(step);
  }
}
