/**
 * `watchLeasesFromEnv`: the fence over every lease in the environment, with
 * the NATS connection and KV buckets it needs opened (and closed) by itself.
 */
import { type KV, Kvm } from '@nats-io/kv';
import type { NatsConnection } from '@nats-io/transport-node';
import { ErrorCode, ScalerError } from '../../errors/index.js';
import { assertKnownKeys, showValue } from '../../internal/strict-keys.js';
import {
  FROM_ENV_KEYS,
  leasesFromEnv,
  type WatchLeaseFromEnvOptions,
  watchLeases,
  where,
} from '../from-env.js';
import { natsHeartbeatReader } from '../heartbeat.js';
import type { LeaseFence } from '../watch.js';

/**
 * Options of {@link watchLeasesFromEnv}: those of `watchLeaseFromEnv` (but
 * `read`), plus how to reach NATS: `servers` (the fence opens a connection
 * and closes it on `close()`) or `nc` (your connection, for credentials,
 * TLS or another transport; the fence never closes it). Neither is needed
 * when the environment carries no NATS lease.
 */
export interface WatchLeasesFromEnvOptions extends Omit<WatchLeaseFromEnvOptions, 'read'> {
  /** NATS server URLs (`nats://host:4222`) the fence connects to, with no credentials. */
  servers?: string | readonly string[];
  /** A connection of your own, left open on `close()`. */
  nc?: NatsConnection;
}

/**
 * The fence from {@link watchLeasesFromEnv}: a `LeaseFence` whose `close()`
 * also closes the NATS connection the fence opened.
 */
export interface NatsLeaseFence extends LeaseFence {
  /**
   * Stop watching (the agent finished; `onExpire` is not called after this)
   * and close the connection the fence opened (not one passed as `nc`).
   * Resolves once it is closed.
   */
  close(): Promise<void>;
}

const OPTION_KEYS = [...FROM_ENV_KEYS, 'servers', 'nc'] as const;

function checkServers(servers: unknown): string[] {
  const list = typeof servers === 'string' ? [servers] : servers;
  if (
    !Array.isArray(list) ||
    list.length === 0 ||
    !list.every((url) => typeof url === 'string' && url.length > 0 && url.length <= 2048)
  ) {
    throw new TypeError(
      `Expected \`servers\` to be a NATS server URL or a non-empty list of them, got \`${showValue(servers)}\``,
    );
  }
  return list;
}

function checkConnection(nc: unknown): NatsConnection {
  if (
    typeof nc !== 'object' ||
    nc === null ||
    typeof (nc as NatsConnection).request !== 'function' ||
    typeof (nc as NatsConnection).close !== 'function'
  ) {
    throw new TypeError(
      `Expected \`nc\` to be a NatsConnection (from \`connect()\` of @nats-io/transport-node), got \`${showValue(nc)}\``,
    );
  }
  return nc as NatsConnection;
}

function describe(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/**
 * In an agent process: read every lease its backend passed with `leaseEnv`
 * (`SCALER_LEASE`: file leases, NATS leases or both) and fence the agent at
 * the first that lapses, with one fence and one `close()`. For the NATS
 * leases it opens a connection to `servers` (or uses `nc`) and binds the KV
 * buckets, then reads each heartbeat key as `natsHeartbeatReader` does. The
 * connection it opens reconnects forever: a read that fails is no renewal,
 * and the fence fires at the deadline while the agent cannot reach NATS.
 * Resolves to `undefined` when the variable is not set, unless `required`.
 *
 * @throws InvalidInputError when `SCALER_LEASE` is malformed or missing with
 *   `required`; TypeError for a bad option, or when the variable carries a
 *   NATS lease and neither `servers` nor `nc` is given; `ScalerError` with
 *   code `ERR_LEDGER_UNAVAILABLE` when NATS cannot be reached or a bucket
 *   cannot be opened at start (the agent never runs unfenced by accident; a
 *   connection the fence opened is closed first); as `watchLease` otherwise.
 *
 * @example
 * ```ts
 * // agent.ts, started by a backend with { env: { ...process.env, ...leaseEnv(request.leases) } }
 * import { watchLeasesFromEnv } from 'scaler-primitives/fence/nats';
 * const fence = await watchLeasesFromEnv({ servers: 'nats://127.0.0.1:4222', required: true });
 * // ... run the job; on success:
 * await fence?.close();
 * ```
 */
export async function watchLeasesFromEnv(
  options: WatchLeasesFromEnvOptions = {},
): Promise<NatsLeaseFence | undefined> {
  if (typeof options !== 'object' || options === null || Array.isArray(options)) {
    throw new TypeError(`Expected \`options\` to be an object, got \`${showValue(options)}\``);
  }
  assertKnownKeys(options, OPTION_KEYS, 'watchLeasesFromEnv options');
  const { env: _env, required: _required, servers, nc, ...rest } = options;
  if (servers !== undefined && nc !== undefined) {
    throw new TypeError('Expected one of `servers` (URLs) and `nc` (a NatsConnection), not both');
  }
  const urls = servers === undefined ? undefined : checkServers(servers);
  const given = nc === undefined ? undefined : checkConnection(nc);
  const leases = leasesFromEnv(options, 'leaseEnv(request.leases)');
  if (leases === undefined) return undefined;
  const nats = leases.filter((lease) => lease.location.kind === 'nats');
  let connection = given;
  let owned: NatsConnection | undefined;
  const buckets = new Map<string, KV>();
  if (nats.length > 0) {
    if (urls === undefined && given === undefined) {
      throw new TypeError(
        `SCALER_LEASE carries a NATS lease (${nats.map(where).join(', ')}): pass \`servers\` or \`nc\` to read it`,
      );
    }
    try {
      if (connection === undefined) {
        const { connect } = await import('@nats-io/transport-node');
        owned = await connect({
          servers: urls!,
          name: `scaler-primitives fence ${process.pid}`,
          maxReconnectAttempts: -1,
          reconnectTimeWait: 250,
        });
        connection = owned;
      }
      const kvm = new Kvm(connection);
      for (const lease of nats) {
        if (lease.location.kind !== 'nats' || buckets.has(lease.location.bucket)) continue;
        buckets.set(lease.location.bucket, await kvm.open(lease.location.bucket));
      }
    } catch (error) {
      await owned?.close().catch(() => {});
      throw new ScalerError(
        ErrorCode.LEDGER_UNAVAILABLE,
        `Cannot read the NATS lease ${nats.map(where).join(', ')} ${urls === undefined ? 'over the given connection' : `at ${urls.join(', ')}`}: ${describe(error)}. The agent needs a NATS connection with read access to the lease's bucket (docs/fence.md).`,
        { cause: error },
      );
    }
  }
  let fence: LeaseFence;
  try {
    fence = watchLeases(leases, rest, (lease) =>
      lease.location.kind === 'nats'
        ? natsHeartbeatReader(buckets.get(lease.location.bucket)!, lease.location.key)
        : undefined,
    );
  } catch (error) {
    await owned?.close().catch(() => {});
    throw error;
  }
  let closing: Promise<void> | undefined;
  return {
    deadline: () => fence.deadline(),
    firesAt: () => fence.firesAt(),
    fired: () => fence.fired(),
    close() {
      fence.close();
      closing ??= owned === undefined ? Promise.resolve() : owned.close().catch(() => {});
      return closing;
    },
  };
}
