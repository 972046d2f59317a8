/**
 * Key names in the bucket: one key per pool, one heartbeat key per lease.
 */
import { assertSubjectSafePool } from '../combining/wire.js';

/**
 * The prefix of every pool key: `pool.<name>`.
 *
 * @example
 * ```ts
 * import type { KV } from '@nats-io/kv';
 * import { POOL_KEY_PREFIX } from 'scaler-primitives/ledger/nats';
 * declare const kv: KV;
 * for await (const key of await kv.keys(`${POOL_KEY_PREFIX}>`)) console.log(key.slice(POOL_KEY_PREFIX.length));
 * ```
 */
export const POOL_KEY_PREFIX = 'pool.';
/**
 * The prefix of every heartbeat key: `lease.<leaseId>`.
 *
 * @example
 * ```ts
 * import type { KV } from '@nats-io/kv';
 * import { LEASE_KEY_PREFIX } from 'scaler-primitives/ledger/nats';
 * declare const kv: KV;
 * const leases = await kv.keys(`${LEASE_KEY_PREFIX}>`); // every instance's heartbeat key
 * ```
 */
export const LEASE_KEY_PREFIX = 'lease.';

/**
 * The KV key of a pool. Pool names follow the file ledger's rule; a name that
 * would make an empty subject token (leading or trailing `.`, or `..`) is refused.
 *
 * @throws InvalidInputError for a name the file ledger refuses or KV cannot hold.
 *
 * @example
 * ```ts
 * import type { KV } from '@nats-io/kv';
 * import { poolKey } from 'scaler-primitives/ledger/nats';
 * declare const kv: KV;
 * const entry = await kv.get(poolKey('build-host')); // the key 'pool.build-host'
 * ```
 */
export function poolKey(pool: string): string {
  assertSubjectSafePool(pool);
  return `${POOL_KEY_PREFIX}${pool}`;
}

/**
 * The KV key of a lease's heartbeat. Lease ids are UUIDs, always valid in a key.
 *
 * @example
 * ```ts
 * import type { KV } from '@nats-io/kv';
 * import { leaseKey } from 'scaler-primitives/ledger/nats';
 * declare const kv: KV;
 * const heartbeat = await kv.get(leaseKey('6f1c2a4e-8b1d-4f0a-9c3e-2d5b7a9e1f00'));
 * ```
 */
export function leaseKey(leaseId: string): string {
  return `${LEASE_KEY_PREFIX}${leaseId}`;
}
