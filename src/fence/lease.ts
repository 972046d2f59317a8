/**
 * The lease an agent watches, as its controller's ledger describes it, and its
 * one-variable form in an agent's environment. Validation only: no I/O.
 */
import { isAbsolute } from 'node:path';
import { InvalidInputError } from '../errors/index.js';
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

/** `SCALER_LEASE` with one lease: `{ version: 1, location, leaseMs, marginMs }`. */
const ENV_VERSION = 1;
const ENV_KEYS = ['version', 'location', 'leaseMs', 'marginMs'] as const;
/** `SCALER_LEASE` with several leases: `{ version: 2, leases: [{ location, leaseMs, marginMs }, ...] }`. */
const ENV_LIST_VERSION = 2;
const ENV_LIST_KEYS = ['version', 'leases'] as const;
const LEASE_KEYS = ['location', 'leaseMs', 'marginMs'] as const;

/**
 * The most leases one variable carries: one per ledger an agent's pools are
 * served by (a manager has a few), bounded so that a hostile or broken
 * document is refused before it is read.
 */
export const MAX_LEASES = 16;

/**
 * The environment a backend adds to an agent process so that the agent can
 * fence itself with {@link watchLeaseFromEnv}: `{ SCALER_LEASE: '<json>' }`.
 * Pass every lease the agent depends on (`SpawnRequest.leases`): the agent
 * stops at the first that lapses. One lease is written as the document every
 * release reads (`version` 1); several as a list (`version` 2), which an agent
 * built against a release before 0.2 refuses at start rather than fencing
 * only one of them. Returns `{}` when there is no lease to hand over
 * (`undefined`, an empty list, or only `memory` leases, which no other process
 * can watch; a `memory` lease in a list is left out).
 *
 * @param leases - `SpawnRequest.leases` (or the one lease of `SpawnRequest.lease`).
 * @throws TypeError when a lease is not a valid lease, or there are more than 16.
 *
 * @example
 * ```ts
 * import { spawn } from 'node:child_process';
 * import { type FenceLease, leaseEnv } from 'scaler-primitives/fence';
 * declare const leases: readonly FenceLease[] | undefined; // SpawnRequest.leases, in a backend's spawn()
 * spawn('/usr/local/bin/agent', [], { detached: true, env: { ...process.env, ...leaseEnv(leases) } });
 * ```
 */
export function leaseEnv(
  leases: FenceLease | readonly FenceLease[] | undefined,
): Record<string, string> {
  if (leases === undefined) return {};
  const list: readonly unknown[] = Array.isArray(leases) ? leases : [leases];
  const name = Array.isArray(leases) ? 'leases' : 'lease';
  if (list.length > MAX_LEASES) {
    throw new TypeError(
      `Expected \`leases\` to hold at most ${MAX_LEASES} leases, got ${list.length}`,
    );
  }
  const checked: FenceLease[] = [];
  const seen = new Set<string>();
  list.forEach((lease, index) => {
    const where = Array.isArray(leases) ? `${name}[${index}]` : name;
    if (!isObject(lease)) {
      throw new TypeError(`Expected \`${where}\` to be an object, got \`${showValue(lease)}\``);
    }
    if (isObject(lease.location) && lease.location.kind === 'memory') return;
    const one = checkLease(lease, where);
    const text = JSON.stringify(one);
    if (seen.has(text)) return;
    seen.add(text);
    checked.push(one);
  });
  if (checked.length === 0) return {};
  const document =
    checked.length === 1
      ? { version: ENV_VERSION, ...checked[0] }
      : { version: ENV_LIST_VERSION, leases: checked };
  return { [LEASE_ENV]: JSON.stringify(document) };
}

/**
 * Read every lease a backend handed to this process with {@link leaseEnv}
 * (`SCALER_LEASE`, one lease or a list), or `[]` when the variable is not
 * set. Strict: anything but a document `leaseEnv` writes (an unknown key, a
 * bad value, an unknown `version`) is an error.
 *
 * @param env - The environment to read. @default process.env
 * @throws InvalidInputError naming the variable, the key and the refused value.
 *
 * @example
 * ```ts
 * import { readLeasesEnv } from 'scaler-primitives/fence';
 * for (const lease of readLeasesEnv()) console.log(`fenced by a ${lease.location.kind} lease of ${lease.leaseMs} ms`);
 * ```
 */
export function readLeasesEnv(env: Record<string, string | undefined> = process.env): FenceLease[] {
  if (!isObject(env)) {
    throw new TypeError(`Expected \`env\` to be an object, got \`${showValue(env)}\``);
  }
  const raw = env[LEASE_ENV];
  if (raw === undefined) return [];
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
  const version = parsed.version;
  if (version !== ENV_VERSION && version !== ENV_LIST_VERSION) {
    throw fail(
      'version',
      version,
      `expected \`version\` ${ENV_VERSION} (one lease) or ${ENV_LIST_VERSION} (a list), got \`${showValue(version)}\` (the agent's scaler-primitives is older than its controller's?)`,
    );
  }
  const keys = (value: Record<string, unknown>, accepted: readonly string[], where: string) => {
    try {
      assertKnownKeys(value, accepted, `\`${where}\``);
    } catch (error) {
      throw fail('key', value, (error as Error).message);
    }
  };
  const lease = (value: Record<string, unknown>, where: string) => {
    try {
      return checkLease(value, where, fail);
    } catch (error) {
      // An unknown key inside the location, reported by assertKnownKeys.
      if (error instanceof InvalidInputError && !error.message.startsWith(`Invalid ${LEASE_ENV}`)) {
        throw fail('key', value, error.message);
      }
      throw error;
    }
  };
  if (version === ENV_VERSION) {
    keys(parsed, ENV_KEYS, LEASE_ENV);
    return [lease(parsed, LEASE_ENV)];
  }
  keys(parsed, ENV_LIST_KEYS, LEASE_ENV);
  const list = parsed.leases;
  if (!Array.isArray(list) || list.length === 0 || list.length > MAX_LEASES) {
    throw fail(
      'leases',
      list,
      `expected \`${LEASE_ENV}.leases\` to be a list of 1 to ${MAX_LEASES} leases, got \`${showValue(list)}\``,
    );
  }
  return list.map((item: unknown, index) => {
    const where = `${LEASE_ENV}.leases[${index}]`;
    if (!isObject(item)) {
      throw fail(where, item, `expected \`${where}\` to be an object, got \`${showValue(item)}\``);
    }
    keys(item, LEASE_KEYS, where);
    return lease(item, where);
  });
}

/**
 * Read the lease a backend handed to this process with {@link leaseEnv}, or
 * `undefined` when `SCALER_LEASE` is not set.
 *
 * @deprecated An agent whose pools are served by several ledgers is handed
 * several leases: read them all with {@link readLeasesEnv}, or fence them
 * all with `watchLeaseFromEnv`. This throws when the variable carries more
 * than one lease (it never picks one silently).
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
  const leases = readLeasesEnv(env);
  if (leases.length > 1) {
    throw new InvalidInputError(
      `${LEASE_ENV} leases`,
      leases.length,
      `${LEASE_ENV} carries ${leases.length} leases and readLeaseEnv reads one: read them all with readLeasesEnv, or fence them all with watchLeaseFromEnv (scaler-primitives/fence/nats for NATS leases)`,
    );
  }
  return leases[0];
}
