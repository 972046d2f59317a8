/**
 * Reading a NatsPoolLedger heartbeat key for the fence, through any object
 * shaped like `@nats-io/kv`'s `KV` (no dependency on it).
 */

/**
 * What {@link natsHeartbeatReader} needs of a KV bucket: `@nats-io/kv`'s `KV` has it.
 */
export interface HeartbeatBucket {
  /**
   * The key's current entry, or `null` when it has none (`@nats-io/kv`'s `KvEntry` has
   * what is needed of it).
   */
  get(key: string): Promise<{
    /** The entry's revision (its stream sequence). */
    revision: number;
    /** `PUT`, or `DEL`/`PURGE` for a deleted key. */
    operation: string;
    /** The value as text. */
    string(): string;
  } | null>;
}

/** What {@link natsHeartbeatReader} needs of a KV entry. */
export type HeartbeatEntry = NonNullable<Awaited<ReturnType<HeartbeatBucket['get']>>>;

/**
 * The `read` option of `watchLease` for a NATS lease: the heartbeat key's
 * revision while its lease lives, `undefined` once it has ended (the key is
 * missing or deleted, or holds the end marker `{"ended": ...}` its owner writes
 * on close and a peer writes when it fences the lease). A failed `get` rejects,
 * which the fence counts as no renewal.
 *
 * @example
 * ```ts
 * import { Kvm } from '@nats-io/kv';
 * import { connect } from '@nats-io/transport-node';
 * import { natsHeartbeatReader, readLeaseEnv, watchLease } from 'scaler-primitives/fence';
 * const lease = readLeaseEnv();
 * if (lease?.location.kind === 'nats') {
 *   const kv = await new Kvm(await connect({ servers: process.env.NATS_URL })).open(lease.location.bucket);
 *   watchLease({ ...lease, read: natsHeartbeatReader(kv, lease.location.key) });
 * }
 * ```
 */
export function natsHeartbeatReader(
  kv: HeartbeatBucket,
  key: string,
): () => Promise<number | undefined> {
  if (typeof kv !== 'object' || kv === null || typeof kv.get !== 'function') {
    throw new TypeError('Expected `kv` to be a KV bucket (an object with `get(key)`)');
  }
  if (typeof key !== 'string' || key.length === 0) {
    throw new TypeError(`Expected \`key\` to be a non-empty string, got \`${typeof key}\``);
  }
  return async () => {
    const entry = await kv.get(key);
    if (entry === null || entry === undefined || entry.operation !== 'PUT') return undefined;
    return ended(entry) ? undefined : entry.revision;
  };
}

function ended(entry: HeartbeatEntry): boolean {
  try {
    const value = JSON.parse(entry.string()) as { ended?: unknown } | null;
    return typeof value === 'object' && value !== null && value.ended !== undefined;
  } catch {
    // Not JSON: not an end marker (the fence judges by revisions alone).
    return false;
  }
}
