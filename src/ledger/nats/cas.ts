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
import { monotonicNow } from '../../clock.js';
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

/**
 * How long a write guard whose write is still being proposed (a duplicate
 * answer with sequence 0) may keep the key at its base revision before the
 * guard is judged orphaned: its proposal was dropped by a leader change.
 */
export const ORPHANED_GUARD_MS = 2000;

/** A compare-and-set writer for one bucket. */
export class CasWriter {
  /**
   * Per `<key>@<revision>`: the suffix of the guard id to use from that
   * revision (after an orphaned guard), and when a pending guard was first seen.
   */
  readonly #guards = new Map<string, { suffix: string; pendingSince?: number }>();

  constructor(
    private readonly js: JetStreamClient,
    private readonly bucket: string,
    private readonly lastRevision: (key: string) => Promise<number>,
    private readonly monotonic: () => number = monotonicNow,
  ) {}

  /**
   * Write `data` to `key` when the key's last revision is `revision` (0: the key
   * has never been written).
   *
   * A `duplicate` answer normally means another writer from `revision` won.
   * When the key has not moved past `revision`, though, the guard id names a
   * write the server does not hold (lost with an isolated leader, or dropped
   * in a leader change while it was proposed): the next write from `revision`
   * uses a new guard id, derived from the duplicate's sequence so that every
   * writer that met the same orphan picks the same new id (at most one of them wins).
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
    if (typeof key !== 'string' || key === '') {
      throw new TypeError(`Expected \`key\` to be a non-empty string, got \`${String(key)}\``);
    }
    if (!Number.isSafeInteger(revision) || revision < 0) {
      throw new TypeError(
        `Expected \`revision\` to be an integer >= 0, got \`${String(revision)}\``,
      );
    }
    const base = `${key}@${revision}`;
    const guard = this.#guards.get(base);
    const ack = await this.js.publish(`$KV.${this.bucket}.${key}`, data, {
      msgID: `${base}${guard?.suffix ?? ''}`,
      expect: { lastSubjectSequence: revision },
      ...(options.timeoutMs !== undefined ? { timeout: options.timeoutMs } : {}),
    });
    if (!ack.duplicate) {
      this.#forget(key);
      return ack.seq;
    }
    // Another writer from `revision` won, unless the key is still at `revision`.
    const last = await this.lastRevision(key);
    if (last !== revision) {
      this.#forget(key);
      throw new DuplicateWriteError(key, revision);
    }
    const now = this.monotonic();
    const entry = guard ?? { suffix: '' };
    if (ack.seq > 0) {
      // A stored sequence the key does not hold: that write is gone.
      entry.suffix = `${entry.suffix}~${ack.seq}`;
      delete entry.pendingSince;
    } else if (entry.pendingSince === undefined) {
      // Still being proposed: normally applied within milliseconds.
      entry.pendingSince = now;
    } else if (now - entry.pendingSince > ORPHANED_GUARD_MS) {
      entry.suffix = `${entry.suffix}~0`;
      delete entry.pendingSince;
    }
    this.#guards.set(base, entry);
    if (this.#guards.size > 1000) this.#guards.delete(this.#guards.keys().next().value!);
    throw new DuplicateWriteError(key, revision);
  }

  // The key moved on: guards of its older revisions are of no use any more.
  #forget(key: string): void {
    if (this.#guards.size === 0) return;
    for (const base of this.#guards.keys()) {
      if (base.slice(0, base.lastIndexOf('@')) === key) this.#guards.delete(base);
    }
  }
}
