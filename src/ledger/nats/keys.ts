/**
 * Key names in the bucket: one key per pool, one heartbeat key per lease, and
 * one key per instance id naming the lease it holds.
 */
import { createHash } from 'node:crypto';
import { assertSubjectSafePool } from '../wire.js';

/**
 * The prefix of every pool key: `pool.<name>`.
 */
export const POOL_KEY_PREFIX = 'pool.';
/**
 * The prefix of every heartbeat key: `lease.<leaseId>`.
 */
export const LEASE_KEY_PREFIX = 'lease.';
/**
 * The prefix of every instance key: `instance.<hash of the instance id>`.
 */
export const INSTANCE_KEY_PREFIX = 'instance.';

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

/**
 * The KV key naming the lease an instance id holds: `instance.` and the first
 * 32 hex digits of the SHA-256 of the id (any id fits a key this way).
 */
export function instanceKey(instanceId: string): string {
  const hash = createHash('sha256').update(instanceId, 'utf8').digest('hex').slice(0, 32);
  return `${INSTANCE_KEY_PREFIX}${hash}`;
}
