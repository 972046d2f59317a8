/**
 * The nats-server versions the NATS ledger is safe on, and the check made on
 * connect (see docs/ledger.md, "Server version").
 */
import { NatsServerVersionError } from '../../errors/index.js';

/**
 * The oldest nats-server the NATS ledger is safe on: 2.11.0. Older servers
 * can lose an acknowledged write when a stream leader is isolated or changes
 * (the Raft fixes of nats-server#6485 and #6512, in 2.11), keep the message id
 * of a dropped proposal so that every retry with it is answered `duplicate`
 * until the duplicate window ends (#6415, #6486, in 2.11), and before 2.9.21
 * accept two compare-and-set writes from one revision (#4320).
 */
export const MIN_SAFE_NATS_SERVER_VERSION = '2.11.0';

/** The process warning code emitted for an older server. */
export const SERVER_VERSION_WARNING_CODE = 'SCALER_NATS_SERVER_VERSION';

const warned = new Set<string>();

/** `major.minor.patch` of a version string (`2.9.10`, `v2.11.0-RC.1`), or undefined. */
export function parseServerVersion(version: unknown): [number, number, number] | undefined {
  if (typeof version !== 'string') return undefined;
  const match = /^v?(\d+)\.(\d+)\.(\d+)/.exec(version.trim());
  if (!match) return undefined;
  return [Number(match[1]), Number(match[2]), Number(match[3])];
}

/** True when `version` is at least {@link MIN_SAFE_NATS_SERVER_VERSION}; false when older or unreadable. */
export function isSafeServerVersion(version: unknown): boolean {
  const have = parseServerVersion(version);
  const min = parseServerVersion(MIN_SAFE_NATS_SERVER_VERSION)!;
  if (!have) return false;
  for (let i = 0; i < 3; i++) {
    if (have[i]! !== min[i]!) return have[i]! > min[i]!;
  }
  return true;
}

/** The accepted values of `serverVersionPolicy`. */
export const SERVER_VERSION_POLICIES = ['warn', 'refuse', 'ignore'] as const;

/**
 * Check the version a server reported on connect. Only a clustered server
 * older than {@link MIN_SAFE_NATS_SERVER_VERSION} is at risk (its faults are
 * in leader changes): a single server, or a safe one, passes. Otherwise a
 * process warning (once per version and process) under `'warn'`, a
 * `NatsServerVersionError` under `'refuse'`, nothing under `'ignore'`.
 *
 * @param clustered - Whether the server is part of a cluster (its INFO names one).
 * @throws TypeError for a policy other than 'warn', 'refuse' or 'ignore'.
 * @throws NatsServerVersionError for an older clustered server under 'refuse'.
 */
export function checkServerVersion(
  version: unknown,
  policy: 'warn' | 'refuse' | 'ignore',
  clustered: boolean,
): void {
  if (!(SERVER_VERSION_POLICIES as readonly unknown[]).includes(policy)) {
    throw new TypeError(
      `Expected \`serverVersionPolicy\` to be 'warn', 'refuse' or 'ignore', got \`${String(policy)}\``,
    );
  }
  if (policy === 'ignore' || !clustered || isSafeServerVersion(version)) return;
  const shown = typeof version === 'string' ? version.slice(0, 64) : 'unknown';
  const message = `nats-server ${shown} is older than ${MIN_SAFE_NATS_SERVER_VERSION}, the oldest version the NATS pool ledger is safe on in a cluster: older clustered servers can lose acknowledged writes when a stream leader is isolated or changes (a lost grant or lease fence) and can block a key for their duplicate window. Upgrade the servers to ${MIN_SAFE_NATS_SERVER_VERSION} or later, or silence this with \`serverVersionPolicy: 'ignore'\` (see docs/ledger.md, "Server version").`;
  if (policy === 'refuse')
    throw new NatsServerVersionError(shown, MIN_SAFE_NATS_SERVER_VERSION, message);
  if (warned.has(shown)) return;
  warned.add(shown);
  process.emitWarning(message, {
    code: SERVER_VERSION_WARNING_CODE,
    type: 'ScalerPrimitivesWarning',
  });
}
