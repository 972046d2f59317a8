/**
 * Compare-and-set writes to one KV key, safe on clustered nats-server 2.9.
 *
 * A KV `update` sends `Nats-Expected-Last-Subject-Sequence`. On a clustered
 * stream, nats-server before 2.9.21 checks that header before proposing the
 * write but not against writes already in flight, so concurrent writers that
 * read the same revision can all be accepted and all but the last change is
 * lost (nats-io/nats-server#4320; a 3-node 2.9.10 cluster accepts several in
 * every round of 12 concurrent writers). A cluster leader does record a
 * message id before proposing, so every write also carries the id
 * `<key>@<revision it was based on>`: of the writers that read one revision,
 * at most one is stored and the others get a duplicate acknowledgement, which
 * counts here as a lost race. On a single server, or on a fixed server, the
 * id changes nothing.
 */
import type { JetStreamClient } from '@nats-io/jetstream';
import { isJetStreamRevisionConflict } from '../../internal/nats-errors.js';

/**
 * True when a compare-and-set write lost: the revision moved (JetStream codes
 * 10071, 10164), or another writer from the same revision won ({@link DuplicateWriteError}).
 */
export function isRevisionConflict(error: unknown): boolean {
  for (let e = error, depth = 0; e && depth < 8; e = (e as { cause?: unknown }).cause, depth++) {
    if ((e as { name?: unknown }).name === 'DuplicateWriteError') return true;
  }
  return isJetStreamRevisionConflict(error);
}

/** Thrown when the write was refused as a duplicate of another writer's write from the same revision. */
export class DuplicateWriteError extends Error {
  /** @param key - The KV key. @param revision - The revision the write was based on. */
  constructor(key: string, revision: number) {
    super(`another write based on revision ${revision} of ${key} won`);
    this.name = 'DuplicateWriteError';
  }
}

/** A compare-and-set writer for one bucket. */
export class CasWriter {
  constructor(
    private readonly js: JetStreamClient,
    private readonly bucket: string,
  ) {}

  /**
   * Write `data` to `key` when the key's last revision is `revision` (0: the key
   * has never been written).
   *
   * @returns The new revision.
   * @throws a conflict (see `isRevisionConflict`) when the revision moved or another writer from it won.
   */
  async write(
    key: string,
    data: string | Uint8Array,
    revision: number,
    options: { timeoutMs?: number } = {},
  ): Promise<number> {
    const ack = await this.js.publish(`$KV.${this.bucket}.${key}`, data, {
      msgID: `${key}@${revision}`,
      expect: { lastSubjectSequence: revision },
      ...(options.timeoutMs !== undefined ? { timeout: options.timeoutMs } : {}),
    });
    if (ack.duplicate) throw new DuplicateWriteError(key, revision);
    return ack.seq;
  }
}
