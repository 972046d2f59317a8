/**
 * Fencing every lease an agent depends on: one fence over several leases
 * that fires at the first lapse, and the agent's entry point that reads the
 * leases from its environment. Node builtins only.
 */
import { InvalidInputError } from '../errors/index.js';
import { assertKnownKeys, showValue } from '../internal/strict-keys.js';
import { type FenceLease, LEASE_ENV, readLeasesEnv } from './lease.js';
import {
  type FenceExpiry,
  type LeaseFence,
  stopAgentProcess,
  type WatchLeaseOptions,
  watchLease,
} from './watch.js';

/** How every lease of a set is watched: the options of `watchLease` but the lease and its reader. */
export type FenceSetOptions = Omit<WatchLeaseOptions, 'location' | 'leaseMs' | 'marginMs' | 'read'>;

/** The reader of a NATS lease (`undefined` for a file lease). */
export type ReaderOf = (lease: FenceLease) => (() => Promise<number | undefined>) | undefined;

/** One fence over several leases: fires once, at the first lease that lapses. */
class FenceSet implements LeaseFence {
  readonly #fences: LeaseFence[] = [];
  #fired = false;
  #closed = false;

  add(fence: LeaseFence): void {
    this.#fences.push(fence);
    // A lease that fired while the others were being set up (it cannot: a
    // fence fires on a later turn) would leave them running: close them too.
    if (this.#fired || this.#closed) fence.close();
  }

  /** Called by the fence of the lease that fired: the first one stops the others. */
  fire(expiry: FenceExpiry, onExpire: (expiry: FenceExpiry) => void | Promise<void>) {
    if (this.#fired || this.#closed) return;
    this.#fired = true;
    for (const fence of this.#fences) if (!fence.fired()) fence.close();
    return onExpire(expiry);
  }

  deadline(): number | undefined {
    return earliest(this.#fences.map((fence) => fence.deadline()));
  }

  firesAt(): number | undefined {
    return earliest(this.#fences.map((fence) => fence.firesAt()));
  }

  fired(): boolean {
    return this.#fired;
  }

  close(): void {
    this.#closed = true;
    for (const fence of this.#fences) fence.close();
  }
}

function earliest(values: ReadonlyArray<number | undefined>): number | undefined {
  let best: number | undefined;
  for (const value of values) {
    if (value !== undefined && (best === undefined || value < best)) best = value;
  }
  return best;
}

/**
 * Watch every lease in `leases` with one fence: `onExpire` is called once,
 * for the first lease that lapses, and the others stop being watched then.
 * Each lease is judged on its own clock and options, as `watchLease` does.
 *
 * @throws TypeError for a bad option; as `watchLease` for each lease (the
 *   fences already started are closed first).
 * @internal
 */
export function watchLeases(
  leases: readonly FenceLease[],
  options: FenceSetOptions,
  readerOf: ReaderOf,
): LeaseFence {
  if (leases.length === 0) throw new TypeError('Expected at least one lease to watch');
  const { onExpire, ...rest } = options;
  if (onExpire !== undefined && typeof onExpire !== 'function') {
    throw new TypeError(`Expected \`onExpire\` to be a function, got \`${showValue(onExpire)}\``);
  }
  const handler = onExpire ?? stopAgentProcess;
  const set = new FenceSet();
  try {
    for (const lease of leases) {
      const read = readerOf(lease);
      set.add(
        watchLease({
          ...rest,
          ...lease,
          ...(read === undefined ? {} : { read }),
          onExpire: (expiry) => set.fire(expiry, handler),
        }),
      );
    }
  } catch (error) {
    set.close();
    throw error;
  }
  return set;
}

/**
 * Options of {@link watchLeaseFromEnv}: those of {@link WatchLeaseOptions} but
 * the lease, plus where to read the leases and whether there must be one.
 */
export interface WatchLeaseFromEnvOptions
  extends Omit<WatchLeaseOptions, 'location' | 'leaseMs' | 'marginMs'> {
  /** The environment to read `SCALER_LEASE` from. @default process.env */
  env?: Record<string, string | undefined>;
  /** Throw when `SCALER_LEASE` is not set, instead of returning `undefined`. @default false */
  required?: boolean;
}

/** @internal */
export const FROM_ENV_KEYS = [
  'env',
  'required',
  'stopBeforeMs',
  'pollMs',
  'onExpire',
  'clock',
] as const;

/**
 * Check the options both entry points share and read the leases: `undefined`
 * when there are none (and none is required). @internal
 */
export function leasesFromEnv(
  options: Omit<WatchLeaseFromEnvOptions, 'read'>,
  backend: string,
): FenceLease[] | undefined {
  const { env, required } = options;
  if (required !== undefined && typeof required !== 'boolean') {
    throw new TypeError(`Expected \`required\` to be a boolean, got \`${showValue(required)}\``);
  }
  const leases = readLeasesEnv(env ?? process.env);
  if (leases.length > 0) return leases;
  if (required) {
    throw new InvalidInputError(
      LEASE_ENV,
      undefined,
      `${LEASE_ENV} is not set: start this agent from a backend that passes \`${backend}\``,
    );
  }
  return undefined;
}

/** `bucket/key` of a NATS lease, for messages. @internal */
export function where(lease: FenceLease): string {
  const { location } = lease;
  return location.kind === 'nats'
    ? `${location.bucket}/${location.key}`
    : location.kind === 'file'
      ? location.path
      : 'memory';
}

/**
 * In an agent process: read every lease its backend passed with `leaseEnv`
 * (`SCALER_LEASE`) and watch them all with one fence, which fires at the
 * first that lapses (see {@link watchLease}). Returns `undefined` when the
 * variable is not set (the controller has no lease an agent can watch)
 * unless `required` is set.
 *
 * File leases need nothing more. A NATS lease is read through a NATS
 * connection: use `watchLeasesFromEnv` of `scaler-primitives/fence/nats`,
 * which opens one, or pass `read` for the one NATS lease the variable may
 * carry.
 *
 * @throws InvalidInputError when `SCALER_LEASE` is malformed (unknown key, bad
 *   value: the message names it), or missing with `required`; TypeError when
 *   it carries a NATS lease and no `read` (or several and `read`); as
 *   {@link watchLease} otherwise.
 *
 * @example
 * ```ts
 * // agent.ts, started by a backend with { env: { ...process.env, ...leaseEnv(request.leases) } }
 * import { watchLeaseFromEnv } from 'scaler-primitives/fence';
 * const fence = watchLeaseFromEnv(); // stops this process before a lease of its controller runs out
 * ```
 */
export function watchLeaseFromEnv(options: WatchLeaseFromEnvOptions = {}): LeaseFence | undefined {
  if (typeof options !== 'object' || options === null || Array.isArray(options)) {
    throw new TypeError(`Expected \`options\` to be an object, got \`${showValue(options)}\``);
  }
  assertKnownKeys(options, [...FROM_ENV_KEYS, 'read'], 'watchLeaseFromEnv options');
  const { env: _env, required: _required, read, ...rest } = options;
  const leases = leasesFromEnv(options, 'leaseEnv(request.leases)');
  if (leases === undefined) return undefined;
  const nats = leases.filter((lease) => lease.location.kind === 'nats');
  if (read !== undefined) {
    if (typeof read !== 'function') {
      throw new TypeError(`Expected \`read\` to be a function, got \`${showValue(read)}\``);
    }
    if (nats.length === 0) {
      throw new TypeError(
        `\`read\` is for a NATS lease, and ${LEASE_ENV} carries none (a file lease is read from the file itself)`,
      );
    }
    if (nats.length > 1) {
      throw new TypeError(
        `${LEASE_ENV} carries ${nats.length} NATS leases (${nats.map(where).join(', ')}) and \`read\` reads one key: fence them with \`watchLeasesFromEnv\` of \`scaler-primitives/fence/nats\``,
      );
    }
  } else if (nats.length > 0) {
    throw new TypeError(
      `${LEASE_ENV} carries a NATS lease (${nats.map(where).join(', ')}): fence it with \`watchLeasesFromEnv\` of \`scaler-primitives/fence/nats\`, which reads the heartbeat key over a NATS connection (see docs/fence.md), or pass \`read\``,
    );
  }
  return watchLeases(leases, rest, (lease) => (lease.location.kind === 'nats' ? read : undefined));
}
