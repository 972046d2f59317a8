/**
 * The agent side of a lease: watch the controller's lease and stop before its
 * deadline, so an agent whose controller is killed or stalled is gone before a
 * peer may reuse its capacity. Node builtins only.
 */
import { lstatSync, readFileSync } from 'node:fs';
import {
  type Clock,
  type ClockTimer,
  monotonicEpochNow,
  resolveClock,
  systemClock,
} from '../clock.js';
import { ErrorCode, ScalerError } from '../errors/index.js';
import { assertKnownKeys, showValue } from '../internal/strict-keys.js';
import { checkLease, type FenceLease } from './lease.js';

/**
 * Why a fence fired: `deadline` (no renewal seen in time), `gone` (the lease
 * file is missing), `not-a-file` (something other than a regular file is at
 * the lease path), `ended` (the NATS heartbeat key is gone).
 */
export type FenceStopReason = 'deadline' | 'gone' | 'not-a-file' | 'ended';

/**
 * What {@link WatchLeaseOptions.onExpire} is called with.
 */
export interface FenceExpiry {
  /** Why the fence fired. */
  reason: FenceStopReason;
  /** The deadline the fence judged by (see {@link LeaseFence.deadline}); `undefined` when none was known. */
  deadline: number | undefined;
  /** The lease that lapsed (of several watched together, the first to lapse). */
  lease: FenceLease;
}

/**
 * Options of {@link watchLease}: the lease (as {@link FenceLease}) and how to watch it.
 */
export interface WatchLeaseOptions extends FenceLease {
  /**
   * Fire this long before the deadline: the time the agent needs to stop.
   * At most `leaseMs / 2` (a controller renews every third of its lease).
   * @default Math.ceil(leaseMs / 4)
   */
  stopBeforeMs?: number;
  /**
   * How often the lease is read, in ms; at most `leaseMs / 4`. A lease file
   * removed (its controller closed its ledger) is noticed within this time.
   * @default Math.min(1000, Math.max(50, Math.floor(leaseMs / 20)))
   */
  pollMs?: number;
  /**
   * Called once, when the fence fires. If it throws or rejects, the fence
   * stops the process as {@link stopAgentProcess} does: a fence never leaves
   * the agent running because its handler failed.
   * @default stopAgentProcess
   */
  onExpire?: (expiry: FenceExpiry) => void | Promise<void>;
  /**
   * NATS lease only (required there): read the heartbeat key's current
   * revision, or `undefined` once the lease has ended (key gone, or an end
   * marker in it): {@link natsHeartbeatReader} over an `@nats-io/kv` bucket.
   * A read that throws (or answers anything but a revision) counts as no renewal.
   */
  read?: () => Promise<number | undefined>;
  /**
   * Time and timers. A file lease is judged on the wall clock (the file's
   * mtime is wall time); a NATS lease on this process's monotonic clock.
   * @default systemClock (file), systemClock with a monotonic `now` (NATS)
   */
  clock?: Clock;
}

/**
 * A running fence, from {@link watchLease}.
 */
export interface LeaseFence {
  /**
   * The deadline the fence judges by, in ms on its clock: for a file lease
   * the file's mtime + `leaseMs` (epoch ms); for a NATS lease the send time
   * of the last read that did not yet see the latest renewal + `leaseMs`
   * (on the monotonic clock). `undefined` when none is known.
   */
  deadline(): number | undefined;
  /**
   * The instant the fence fires unless a renewal is seen first:
   * `deadline() - stopBeforeMs` (for a NATS lease before its first renewal
   * is seen, `deadline()`).
   */
  firesAt(): number | undefined;
  /** True once the fence has fired. */
  fired(): boolean;
  /** Stop watching (the agent finished); `onExpire` is not called after this. */
  close(): void;
}

const OPTION_KEYS = [
  'location',
  'leaseMs',
  'marginMs',
  'stopBeforeMs',
  'pollMs',
  'onExpire',
  'read',
  'clock',
] as const;

/** The longest delay Node's timers take (a longer one fires after 1 ms). */
const MAX_TIMER_MS = 2 ** 31 - 1;

/** A clock whose `now` is the monotonic clock: NATS leases are judged by elapsed time only. */
const monotonicClock: Clock = Object.freeze({ ...systemClock, now: monotonicEpochNow });

/**
 * The default {@link WatchLeaseOptions.onExpire}: a hard stop. Writes one line
 * to stderr, then sends `SIGKILL` to the agent's process group when the agent
 * leads one (it was started `detached`, so its build's processes go too), and
 * to the agent itself. An agent that is PID 1 (a container's init, which
 * cannot signal itself) exits with code 137 instead, which ends its container. Call it from your own `onExpire` after a last, quick
 * clean-up.
 *
 * @example
 * ```ts
 * import { stopAgentProcess, watchLease } from 'scaler-primitives/fence';
 * declare function stopBuild(): void;
 * watchLease({
 *   location: { kind: 'file', path: '/run/ci/ledger/a.lease' }, leaseMs: 30_000, marginMs: 3_000,
 *   onExpire: (expiry) => { stopBuild(); stopAgentProcess(expiry); },
 * });
 * ```
 */
export function stopAgentProcess(expiry: FenceExpiry): void {
  const where =
    expiry.lease.location.kind === 'file'
      ? expiry.lease.location.path
      : expiry.lease.location.kind === 'nats'
        ? `${expiry.lease.location.bucket}/${expiry.lease.location.key}`
        : 'memory';
  try {
    process.stderr.write(
      `scaler-primitives/fence: the controller's lease (${where}) ${describeReason(expiry.reason)}: stopping agent process ${process.pid} with SIGKILL\n`,
    );
  } catch {
    // Nothing to report to: stop anyway.
  }
  // PID 1 (an agent that is a container's init) ignores signals it sends itself,
  // and kill(-1) would mean every process: exit instead; the kernel then kills
  // every other process of its PID namespace.
  if (process.pid === 1) process.exit(137);
  if (processGroup() === process.pid) {
    try {
      process.kill(-process.pid, 'SIGKILL');
    } catch {
      // Fall through to the process itself.
    }
  }
  process.kill(process.pid, 'SIGKILL');
  process.exit(137);
}

function describeReason(reason: FenceStopReason): string {
  switch (reason) {
    case 'deadline':
      return 'was not renewed in time';
    case 'gone':
      return 'file is gone';
    case 'not-a-file':
      return 'path is not a regular file';
    case 'ended':
      return 'key is gone';
  }
}

/** This process's group id (`/proc/self/stat` field 5), or undefined when unknown. */
function processGroup(): number | undefined {
  try {
    const stat = readFileSync('/proc/self/stat', 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const group = Number(fields[2]);
    return Number.isInteger(group) ? group : undefined;
  } catch {
    return undefined;
  }
}

function checkPositive(name: string, value: unknown, max: number, maxText: string): number {
  if (typeof value !== 'number' || !Number.isFinite(value) || value < 0 || value > max) {
    throw new TypeError(
      `Expected \`${name}\` to be a finite number from 0 to ${maxText} (${max}), got \`${showValue(value)}\``,
    );
  }
  return value;
}

interface Resolved {
  lease: FenceLease;
  stopBeforeMs: number;
  pollMs: number;
  onExpire: (expiry: FenceExpiry) => void | Promise<void>;
  read: (() => Promise<number | undefined>) | undefined;
  clock: Clock;
}

function resolveOptions(options: WatchLeaseOptions): Resolved {
  if (typeof options !== 'object' || options === null || Array.isArray(options)) {
    throw new TypeError(`Expected \`options\` to be an object, got \`${showValue(options)}\``);
  }
  assertKnownKeys(options, OPTION_KEYS, 'watchLease options');
  const lease = checkLease(options as unknown as Record<string, unknown>, 'options');
  const { leaseMs } = lease;
  const stopBeforeMs =
    options.stopBeforeMs === undefined
      ? Math.ceil(leaseMs / 4)
      : checkPositive('stopBeforeMs', options.stopBeforeMs, leaseMs / 2, 'leaseMs / 2');
  const pollMs =
    options.pollMs === undefined
      ? Math.min(1000, Math.max(50, Math.floor(leaseMs / 20)), leaseMs / 4)
      : checkPositive('pollMs', options.pollMs, leaseMs / 4, 'leaseMs / 4');
  if (pollMs <= 0) {
    throw new TypeError(`Expected \`pollMs\` to be > 0, got \`${showValue(pollMs)}\``);
  }
  if (options.onExpire !== undefined && typeof options.onExpire !== 'function') {
    throw new TypeError(
      `Expected \`onExpire\` to be a function, got \`${showValue(options.onExpire)}\``,
    );
  }
  const { read } = options;
  if (lease.location.kind === 'nats') {
    if (typeof read !== 'function') {
      throw new TypeError(
        `Expected \`read\` to be a function for a NATS lease (it returns the heartbeat key's revision; see docs/fence.md), got \`${showValue(read)}\``,
      );
    }
  } else if (read !== undefined) {
    throw new TypeError('`read` is for a NATS lease; a file lease is read from the file itself');
  }
  const clock =
    options.clock !== undefined
      ? resolveClock(options.clock, undefined)
      : lease.location.kind === 'nats'
        ? monotonicClock
        : systemClock;
  return {
    lease,
    stopBeforeMs,
    pollMs,
    onExpire: options.onExpire ?? stopAgentProcess,
    read,
    clock,
  };
}

type FileSeen =
  | { kind: 'deadline'; deadline: number }
  | { kind: 'stop'; reason: FenceStopReason }
  | { kind: 'error'; error: unknown };

function errorCode(error: unknown): unknown {
  return typeof error === 'object' && error !== null
    ? (error as { code?: unknown }).code
    : undefined;
}

class Fence implements LeaseFence {
  readonly #o: Resolved;
  #deadline: number | undefined;
  #fired = false;
  #closed = false;
  #fireTimer: ClockTimer | undefined;
  #pollInterval: ClockTimer | undefined;
  #pollTimeout: ClockTimer | undefined;
  /** NATS: the last revision read and when that read was sent. */
  #last: { revision: number; sentAt: number } | undefined;
  /** NATS: a renewal has been seen, so the deadline is dated from a read. */
  #dated = false;

  constructor(options: Resolved) {
    this.#o = options;
  }

  start(): this {
    const { lease, clock, pollMs } = this.#o;
    if (lease.location.kind === 'file') {
      const seen = this.#readFile(lease.location.path);
      if (seen.kind === 'error') {
        const code = errorCode(seen.error);
        throw new ScalerError(
          ErrorCode.LEDGER_UNAVAILABLE,
          `The lease file ${lease.location.path} cannot be read by this process (${typeof code === 'string' ? code : String(seen.error)}): the agent needs search permission on its directory and every parent (docs/fence.md)`,
          { cause: seen.error },
        );
      }
      this.#pollInterval = clock.setInterval(() => this.#pollFile(), pollMs).unref();
      // A missing lease fires on the next turn, once the caller holds the fence.
      if (seen.kind === 'stop') {
        this.#fireTimer = clock.setTimeout(() => this.#fire(seen.reason), 0).unref();
      } else {
        this.#deadline = seen.deadline;
        this.#arm();
      }
    } else {
      // Until a read answers, count the lease as renewed one renewal period
      // (a third of the lease) before now: a controller renews that often.
      this.#deadline = clock.now() + lease.leaseMs - lease.leaseMs / 3;
      this.#arm();
      void this.#readLoop();
    }
    return this;
  }

  deadline(): number | undefined {
    return this.#deadline;
  }

  firesAt(): number | undefined {
    return this.#deadline === undefined ? undefined : this.#deadline - this.#stopBefore();
  }

  /**
   * How long before the deadline the fence fires. A NATS lease with no renewal
   * seen yet fires at its assumed deadline: that assumption (the key written a
   * third of the lease before the first read) is the latest it can have been
   * written while its controller renewed, so peers wait at least their margin
   * past it; firing `stopBeforeMs` earlier would stop healthy agents whose
   * controller renews a little late.
   */
  #stopBefore(): number {
    return this.#o.lease.location.kind === 'nats' && !this.#dated ? 0 : this.#o.stopBeforeMs;
  }

  fired(): boolean {
    return this.#fired;
  }

  close(): void {
    this.#closed = true;
    this.#clearTimers();
  }

  #clearTimers(): void {
    this.#o.clock.clearTimeout(this.#fireTimer);
    this.#o.clock.clearInterval(this.#pollInterval);
    this.#o.clock.clearTimeout(this.#pollTimeout);
    this.#fireTimer = undefined;
    this.#pollInterval = undefined;
    this.#pollTimeout = undefined;
  }

  #readFile(path: string): FileSeen {
    try {
      // lstat: a link at the lease path is not followed, it is "not a file".
      const stat = lstatSync(path);
      if (!stat.isFile()) return { kind: 'stop', reason: 'not-a-file' };
      return { kind: 'deadline', deadline: stat.mtimeMs + this.#o.lease.leaseMs };
    } catch (error) {
      const code = errorCode(error);
      if (code === 'ENOENT' || code === 'ENOTDIR') return { kind: 'stop', reason: 'gone' };
      return { kind: 'error', error };
    }
  }

  #pollFile(): void {
    if (this.#fired || this.#closed) return;
    const { location } = this.#o.lease;
    if (location.kind !== 'file') return;
    const seen = this.#readFile(location.path);
    if (seen.kind === 'stop') {
      this.#fire(seen.reason);
      return;
    }
    // A read error is no renewal: the deadline stays.
    if (seen.kind === 'deadline') this.#deadline = seen.deadline;
    this.#arm();
  }

  /** Fire now if the deadline is near, else set the timer for when it will be. */
  #arm(): void {
    if (this.#fired || this.#closed) return;
    const { clock, lease } = this.#o;
    clock.clearTimeout(this.#fireTimer);
    this.#fireTimer = undefined;
    if (this.#deadline === undefined) return;
    const wait = this.#deadline - this.#stopBefore() - clock.now();
    if (wait <= 0) {
      this.#fire('deadline');
      return;
    }
    // A file lease is read once more when its timer fires (a renewal may have
    // come since the last poll); a NATS lease fires on what was read so far.
    // A timer longer than Node's maximum would fire at once: wake up then, and judge again.
    this.#fireTimer = clock
      .setTimeout(
        () => (lease.location.kind === 'file' ? this.#pollFile() : this.#arm()),
        Math.min(wait, MAX_TIMER_MS),
      )
      .unref();
  }

  async #readLoop(): Promise<void> {
    const { clock, read, pollMs, lease } = this.#o;
    while (!this.#fired && !this.#closed) {
      const sentAt = clock.now();
      let ok = false;
      let revision: number | undefined;
      try {
        const answer = await read!();
        if (answer === undefined || (Number.isSafeInteger(answer) && answer >= 0)) {
          ok = true;
          revision = answer;
        }
      } catch {
        // A failed read is no renewal.
      }
      if (this.#fired || this.#closed) return;
      if (ok) {
        if (revision === undefined) {
          this.#fire('ended');
          return;
        }
        const last = this.#last;
        let deadline: number;
        if (last === undefined) {
          deadline = sentAt + lease.leaseMs - lease.leaseMs / 3;
        } else if (revision > last.revision) {
          // Not seen by the read sent at last.sentAt: written after it was sent.
          deadline = last.sentAt + lease.leaseMs;
          this.#dated = true;
        } else {
          // The same revision (no renewal), or an older one (the server lost
          // writes: not a renewal either, but the new base to compare with).
          deadline = Number.NEGATIVE_INFINITY;
        }
        this.#last = { revision, sentAt };
        if (this.#deadline === undefined || deadline > this.#deadline) this.#deadline = deadline;
        this.#arm();
      }
      if (this.#fired || this.#closed) return;
      await new Promise<void>((resolve) => {
        this.#pollTimeout = clock
          .setTimeout(resolve, Math.max(0, sentAt + pollMs - clock.now()))
          .unref();
      });
    }
  }

  #fire(reason: FenceStopReason): void {
    if (this.#fired || this.#closed) return;
    this.#fired = true;
    this.#clearTimers();
    const expiry: FenceExpiry = { reason, deadline: this.#deadline, lease: this.#o.lease };
    const onExpire = this.#o.onExpire;
    try {
      const result = onExpire(expiry);
      if (result !== undefined && typeof (result as Promise<void>).then === 'function') {
        (result as Promise<void>).then(undefined, () => stopAgentProcess(expiry));
      }
    } catch {
      stopAgentProcess(expiry);
    }
  }
}

/**
 * Watch the controller's lease from an agent process and stop the agent before
 * the lease's deadline passes, so that an agent whose controller was killed,
 * stopped or cut off is gone before a peer may reuse its capacity (peers wait
 * for the deadline plus `marginMs`).
 *
 * - File lease (`MachineLedger`): the lease file is read with `lstat` every
 *   `pollMs` (a link is never followed); deadline = mtime + `leaseMs`. A missing
 *   file or anything but a regular file stops the agent at once.
 * - NATS lease (`NatsPoolLedger`): `read()` returns the heartbeat key's
 *   revision; a revision first seen by read k was written after read k-1 was
 *   sent, so deadline = that send time + `leaseMs` on this process's monotonic
 *   clock. Until a renewal is seen the key counts as renewed a third of the
 *   lease before the first read, and the fence fires at that deadline (the
 *   peers' margin is the stop time then). A failed read is no renewal; a key
 *   that is gone or ended stops the agent.
 *
 * `onExpire` is called once at `deadline - stopBeforeMs`; the default stops
 * the agent hard ({@link stopAgentProcess}). The fence's timers are unref'd.
 *
 * @throws TypeError for a bad option; `ScalerError` with code
 *   `ERR_LEDGER_UNAVAILABLE` when the lease file cannot be read at all (for
 *   example no search permission on its directory): the agent never runs
 *   unfenced by accident.
 *
 * @example
 * ```ts
 * import { watchLease } from 'scaler-primitives/fence';
 * const fence = watchLease({
 *   location: { kind: 'file', path: '/var/lib/ci/ledger/4f0c9e1a.lease' },
 *   leaseMs: 30_000,
 *   marginMs: 3_000,
 *   stopBeforeMs: 10_000,
 * });
 * // ... run the job; on success:
 * fence.close();
 * ```
 */
export function watchLease(options: WatchLeaseOptions): LeaseFence {
  return new Fence(resolveOptions(options)).start();
}
