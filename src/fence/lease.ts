/**
 * The lease an agent watches, as its controller's ledger describes it, and its
 * one-variable form in an agent's environment. Validation only: no I/O.
 */
import { isAbsolute } from 'node:path';
import { InvalidInputError } from '../errors.js';
import { assertKnownKeys, showValue } from '../internal/strict-keys.js';
import type { LeaseLocation } from '../ledger/types.js';

/**
 * The environment variable that carries a {@link FenceLease} to an agent process.
 */
export const LEASE_ENV = 'SCALER_LEASE';

/**
 * The controller's lease as its ledger hands it to a backend (`SpawnRequest.lease`):
 * where it lives, its length and the margin peers add before they take its rows.
 */
export interface FenceLease {
  /** Where the lease lives (a lease file, or a NATS heartbeat key). */
  location: LeaseLocation;
  /** The lease length in ms: peers may take the rows `leaseMs` after the last renewal (plus the margin). */
  leaseMs: number;
  /** What peers add to the deadline before they take rows. */
  marginMs: number;
}

// A bucket and a key as NATS KV accepts them.
const BUCKET = /^[-\w]{1,255}$/;
const KEY = /^[-/=\w]+(?:\.[-/=\w]+)*$/;

/** How a check reports a bad value: the key path, the value, the sentence. */
type Fail = (what: string, value: unknown, message: string) => Error;

const typeError: Fail = (_what, _value, message) => new TypeError(message);

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function checkLocation(value: unknown, where: string, fail: Fail): LeaseLocation {
  if (!isObject(value)) {
    throw fail(where, value, `Expected \`${where}\` to be an object, got \`${showValue(value)}\``);
  }
  const kind = value.kind;
  if (kind === 'file') {
    assertKnownKeys(value, ['kind', 'path'], `\`${where}\``);
    const path = value.path;
    if (
      typeof path !== 'string' ||
      !isAbsolute(path) ||
      path.includes('\0') ||
      path.length > 4096
    ) {
      throw fail(
        `${where}.path`,
        path,
        `Expected \`${where}.path\` to be an absolute file path, got \`${showValue(path)}\``,
      );
    }
    return { kind, path };
  }
  if (kind === 'nats') {
    assertKnownKeys(value, ['kind', 'bucket', 'key'], `\`${where}\``);
    const { bucket, key } = value;
    if (typeof bucket !== 'string' || !BUCKET.test(bucket)) {
      throw fail(
        `${where}.bucket`,
        bucket,
        `Expected \`${where}.bucket\` to be a NATS KV bucket name (letters, digits, \`-\`, \`_\`), got \`${showValue(bucket)}\``,
      );
    }
    if (typeof key !== 'string' || key.length > 1024 || !KEY.test(key)) {
      throw fail(
        `${where}.key`,
        key,
        `Expected \`${where}.key\` to be a NATS KV key, got \`${showValue(key)}\``,
      );
    }
    return { kind, bucket, key };
  }
  if (kind === 'memory') {
    throw fail(
      `${where}.kind`,
      kind,
      `A \`memory\` lease (MemoryPoolLedger) lives in its controller's process: an agent process cannot watch it`,
    );
  }
  throw fail(
    `${where}.kind`,
    kind,
    `Expected \`${where}.kind\` to be \`file\` or \`nats\`, got \`${showValue(kind)}\``,
  );
}

/**
 * Check `value` as a lease (the three keys of {@link FenceLease}, read from an
 * object that may carry others, which the caller checks).
 */
export function checkLease(
  value: Record<string, unknown>,
  where: string,
  fail: Fail = typeError,
): FenceLease {
  const location = checkLocation(value.location, `${where}.location`, fail);
  const { leaseMs, marginMs } = value;
  if (typeof leaseMs !== 'number' || !Number.isFinite(leaseMs) || leaseMs <= 0) {
    throw fail(
      `${where}.leaseMs`,
      leaseMs,
      `Expected \`${where}.leaseMs\` to be a finite number > 0, got \`${showValue(leaseMs)}\``,
    );
  }
  if (typeof marginMs !== 'number' || !Number.isFinite(marginMs) || marginMs < 0) {
    throw fail(
      `${where}.marginMs`,
      marginMs,
      `Expected \`${where}.marginMs\` to be a finite number >= 0, got \`${showValue(marginMs)}\``,
    );
  }
  return { location, leaseMs, marginMs };
}

const ENV_VERSION = 1;
const ENV_KEYS = ['version', 'location', 'leaseMs', 'marginMs'] as const;

/**
 * The environment a backend adds to an agent process so that the agent can
 * fence itself with {@link watchLeaseFromEnv}: `{ SCALER_LEASE: '<json>' }`.
 * Returns `{}` when there is no lease to hand over (`undefined`, or a
 * `memory` lease, which no other process can watch).
 *
 * @param lease - `SpawnRequest.lease`, as the manager passes it to the backend.
 * @throws TypeError when `lease` is not a valid lease.
 *
 * @example
 * ```ts
 * import { spawn } from 'node:child_process';
 * import { type FenceLease, leaseEnv } from 'scaler-primitives/fence';
 * declare const lease: FenceLease | undefined; // SpawnRequest.lease, in a backend's spawn()
 * spawn('/usr/local/bin/agent', [], { detached: true, env: { ...process.env, ...leaseEnv(lease) } });
 * ```
 */
export function leaseEnv(lease: FenceLease | undefined): Record<string, string> {
  if (lease === undefined) return {};
  if (!isObject(lease)) {
    throw new TypeError(`Expected \`lease\` to be an object, got \`${showValue(lease)}\``);
  }
  if (isObject(lease.location) && lease.location.kind === 'memory') return {};
  const checked = checkLease(lease, 'lease');
  return {
    [LEASE_ENV]: JSON.stringify({
      version: ENV_VERSION,
      location: checked.location,
      leaseMs: checked.leaseMs,
      marginMs: checked.marginMs,
    }),
  };
}

/**
 * Read the lease a backend handed to this process with {@link leaseEnv}, or
 * `undefined` when `SCALER_LEASE` is not set. Strict: anything but the exact
 * document `leaseEnv` writes (an unknown key, a bad value) is an error.
 *
 * @param env - The environment to read. @default process.env
 * @throws InvalidInputError naming the variable, the key and the refused value.
 *
 * @example
 * ```ts
 * import { readLeaseEnv } from 'scaler-primitives/fence';
 * const lease = readLeaseEnv();
 * console.log(lease ? `fenced by ${lease.location.kind} lease, ${lease.leaseMs} ms` : 'no lease');
 * ```
 */
export function readLeaseEnv(
  env: Record<string, string | undefined> = process.env,
): FenceLease | undefined {
  if (!isObject(env)) {
    throw new TypeError(`Expected \`env\` to be an object, got \`${showValue(env)}\``);
  }
  const raw = env[LEASE_ENV];
  if (raw === undefined) return undefined;
  const fail: Fail = (what, value, message) =>
    new InvalidInputError(`${LEASE_ENV} ${what}`, value, `Invalid ${LEASE_ENV}: ${message}`);
  if (typeof raw !== 'string') {
    throw fail('value', raw, `expected a JSON string, got \`${showValue(raw)}\``);
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw);
  } catch {
    throw fail('value', raw, `not JSON: \`${showValue(raw)}\``);
  }
  if (!isObject(parsed)) {
    throw fail('value', parsed, `expected a JSON object, got \`${showValue(parsed)}\``);
  }
  try {
    assertKnownKeys(parsed, ENV_KEYS, `\`${LEASE_ENV}\``);
  } catch (error) {
    throw fail('key', parsed, (error as Error).message);
  }
  if (parsed.version !== ENV_VERSION) {
    throw fail(
      'version',
      parsed.version,
      `expected \`version\` ${ENV_VERSION}, got \`${showValue(parsed.version)}\` (the agent's scaler-primitives is older than its controller's?)`,
    );
  }
  try {
    return checkLease(parsed, LEASE_ENV, fail);
  } catch (error) {
    if (error instanceof InvalidInputError && !error.message.startsWith(`Invalid ${LEASE_ENV}`)) {
      throw fail('key', parsed, error.message);
    }
    throw error;
  }
}
