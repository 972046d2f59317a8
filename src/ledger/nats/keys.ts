/**
 * Key names in the bucket: one key per pool, one heartbeat key per lease.
 */
import { assertSubjectSafePool } from '../combining/wire.js';

/**
 * The prefix of every pool key: `pool.<name>`.
 */
export const POOL_KEY_PREFIX = 'pool.';
/**
 * The prefix of every heartbeat key: `lease.<leaseId>`.
 */
export const LEASE_KEY_PREFIX = 'lease.';

/**
 * The KV key of a pool. Pool names follow the file ledger's rule; a name that
 * would make an empty subject token (leading or trailing `.`, or `..`) is refused.
 *
 * @throws InvalidInputError for a name the file ledger refuses or KV cannot hold.
 */
export function poolKey(pool: string): string {
  assertSubjectSafePool(pool);
  return `${POOL_KEY_PREFIX}${pool}`;
}

/**
 * The KV key of a lease's heartbeat. Lease ids are UUIDs, always valid in a key.
 */
export function leaseKey(leaseId: string): string {
  return `${LEASE_KEY_PREFIX}${leaseId}`;
}
