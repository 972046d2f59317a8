/**
 * A pool's combiner record, which names the instance that combines the pool's
 * calls and the subject it listens on. Its key is `leader.<pool>`: the key
 * keeps the spelling of the first release, which other hosts read. The calls
 * and replies a combiner exchanges are the shared combine wire format
 * (`../wire.ts`).
 */
import { COMBINE_WIRE_VERSION, isObject } from '../wire.js';
import { poolKey } from './keys.js';

/** The prefix of every combiner key: `leader.<pool>` (a wire name: never change it). */
export const COMBINER_KEY_PREFIX = 'leader.';
/** The subject prefix a combiner listens under, for a bucket: `_SCALER_LEDGER.<bucket>.`. */
export function combineSubjectPrefix(bucket: string): string {
  return `_SCALER_LEDGER.${bucket}.`;
}

/** The KV key naming a pool's combiner. */
export function combinerKey(pool: string): string {
  poolKey(pool);
  return `${COMBINER_KEY_PREFIX}${pool}`;
}

/** Who combines a pool: the lease it holds it under and the subject it listens on. */
export interface CombinerRecord {
  /** The combiner's lease id: the record is void once that lease has ended. */
  leaseId: string;
  /** The combiner's instance id (informational). */
  instanceId: string;
  /** The subject to send calls to. */
  subject: string;
}

/** Serialize a combiner record. */
export function encodeCombinerRecord(record: CombinerRecord): string {
  return JSON.stringify({ v: COMBINE_WIRE_VERSION, ...record });
}

/**
 * Parse a combiner record; undefined when the value is not one (an ended record,
 * or anything malformed: the key is only a hint, and a bad one is replaced by
 * compare-and-set like an absent one).
 */
export function decodeCombinerRecord(text: string, bucket: string): CombinerRecord | undefined {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return undefined;
  }
  if (!isObject(value) || value.v !== COMBINE_WIRE_VERSION) return undefined;
  const { leaseId, instanceId, subject } = value;
  if (typeof leaseId !== 'string' || !/^[\w-]{1,64}$/.test(leaseId)) return undefined;
  if (typeof instanceId !== 'string' || instanceId.length > 256) return undefined;
  const prefix = combineSubjectPrefix(bucket);
  if (typeof subject !== 'string' || !subject.startsWith(prefix)) return undefined;
  if (!/^[\w-]{1,64}$/.test(subject.slice(prefix.length))) return undefined;
  return { leaseId, instanceId, subject };
}
