/**
 * The NATS state store: one JetStream KV key per agent, every write a
 * compare-and-set against the revision this store last saw, so two managers
 * that share a name (a split brain, a stale leader) cannot overwrite each
 * other's books silently.
 */
import { jetstream } from '@nats-io/jetstream';
import { type KV, Kvm } from '@nats-io/kv';
import type { NatsConnection } from '@nats-io/transport-node';
import { StateStoreError } from '../../errors/index.js';
import { StateStoreProblem } from '../../errors/state-store.js';
import { isJetStreamRevisionConflict, isStreamNotFound } from '../../internal/nats-errors.js';
import { checkChanges } from '../state/check.js';
import { agentStateRecordSchema, parseStored } from '../state/schema.js';
import type { AgentStateRecord, StateChange, StateStore } from '../state/types.js';

/** The default bucket of {@link NatsStateStore}: `scaler-manager-state`. */
export const DEFAULT_STATE_BUCKET = 'scaler-manager-state';

/** Options of {@link NatsStateStore.open}. */
export interface NatsStateStoreOptions {
  /**
   * The KV bucket (created with history 1 and no direct get when missing and
   * the user may; otherwise an operator creates it).
   * @default 'scaler-manager-state'
   */
  bucket?: string;
  /**
   * This manager's name: its keys are `<name>.<agent id, base64url>`. Every
   * replica that takes over this manager's agents uses the same name.
   * 1-64 characters of `[A-Za-z0-9_-]`.
   * @default 'manager'
   */
  name?: string;
  /**
   * The largest record read or written, in bytes.
   * @default 65536
   */
  maxValueBytes?: number;
  /**
   * How long each JetStream request may take, in milliseconds.
   * @default 5000
   */
  timeoutMs?: number;
}

const NAME = /^[A-Za-z0-9_-]{1,64}$/;
const BUCKET = /^[A-Za-z0-9_-]{1,64}$/;
const KEYS = ['bucket', 'name', 'maxValueBytes', 'timeoutMs'];
// Proof that the constructor is called by `open()`: `private` binds TypeScript
// only, and a `new NatsStateStore(...)` from JavaScript would build a store
// without a bucket that fails on first use.
const OPENED = Symbol('NatsStateStore.open');

/**
 * A {@link StateStore} on NATS JetStream KV, for managers whose host may move
 * (many replicas, one leader at a time). Each agent's record is one key; a
 * commit writes its keys concurrently, each by compare-and-set on the revision
 * this store last read or wrote (a create for a new agent), and resolves once
 * the server acknowledged every write. A write that finds another revision
 * fails with `StateStoreError` (`conflict`): another manager with the same
 * name wrote it. Least-privilege subjects: docs/security.md.
 *
 * @example
 * ```ts
 * import { connect } from '@nats-io/transport-node';
 * import type { MachineLedger } from 'scaler-primitives/ledger';
 * import { type BackendEntry, type ScalerConfigInput, ScalerManager } from 'scaler-primitives/manager';
 * import { NatsStateStore } from 'scaler-primitives/manager/nats';
 * declare const config: ScalerConfigInput;
 * declare const backends: BackendEntry[];
 * declare const ledger: MachineLedger;
 *
 * const nc = await connect({ servers: 'nats://127.0.0.1:4222' });
 * const stateStore = await NatsStateStore.open(nc, { name: 'ci-eu-1' });
 * const manager = new ScalerManager({ config, backends, ledgers: { host: ledger }, stateStore });
 * manager.start();
 * ```
 */
export class NatsStateStore implements StateStore {
  /** The bucket. */
  readonly bucket: string;
  /** This manager's key prefix. */
  readonly name: string;
  readonly #kv: KV;
  readonly #maxBytes: number;
  /** The revision of each key this store last read or wrote (0 after a delete). */
  readonly #revisions = new Map<string, number>();
  #closed = false;

  private constructor(token: symbol, kv: KV, bucket: string, name: string, maxBytes: number) {
    if (token !== OPENED) {
      throw new TypeError(
        'NatsStateStore has no public constructor: open one with `await NatsStateStore.open(nc, options)`, which opens (or creates) its KV bucket.',
      );
    }
    this.#kv = kv;
    this.bucket = bucket;
    this.name = name;
    this.#maxBytes = maxBytes;
  }

  /**
   * Open (or, when missing and permitted, create) the bucket.
   *
   * @param nc - A NATS connection (nats.js v3); the caller keeps owning it.
   * @param options - See {@link NatsStateStoreOptions}.
   * @throws TypeError for an unknown option or a bad value.
   * @throws StateStoreError (`unavailable`) when the bucket cannot be opened or created.
   */
  static async open(
    nc: NatsConnection,
    options: NatsStateStoreOptions = {},
  ): Promise<NatsStateStore> {
    if (typeof nc?.request !== 'function') {
      throw new TypeError('Expected `nc` to be a NatsConnection (nats.js v3)');
    }
    if (typeof options !== 'object' || options === null) {
      throw new TypeError(`Expected \`options\` to be an object, got \`${String(options)}\``);
    }
    for (const key of Object.keys(options)) {
      if (!KEYS.includes(key)) {
        throw new TypeError(
          `Unknown NatsStateStore option \`${key.slice(0, 64)}\`; expected ${KEYS.join(', ')}`,
        );
      }
    }
    const bucket = options.bucket ?? DEFAULT_STATE_BUCKET;
    const name = options.name ?? 'manager';
    for (const [what, value, rule] of [
      ['bucket', bucket, BUCKET],
      ['name', name, NAME],
    ] as const) {
      if (typeof value !== 'string' || !rule.test(value)) {
        throw new TypeError(
          `Expected \`${what}\` to be 1-64 characters of [A-Za-z0-9_-], got \`${String(value).slice(0, 80)}\``,
        );
      }
    }
    const maxBytes = options.maxValueBytes ?? 65_536;
    if (!Number.isSafeInteger(maxBytes) || maxBytes < 1024) {
      throw new TypeError(
        `Expected \`maxValueBytes\` to be an integer >= 1024, got \`${String(maxBytes)}\``,
      );
    }
    const timeout = options.timeoutMs ?? 5000;
    if (!Number.isSafeInteger(timeout) || timeout < 1) {
      throw new TypeError(
        `Expected \`timeoutMs\` to be a positive integer, got \`${String(timeout)}\``,
      );
    }
    const kvm = new Kvm(jetstream(nc, { timeout }));
    let kv: KV;
    try {
      // Bound, not direct get: a read never trails this store's own writes.
      kv = await kvm.open(bucket, { timeout });
      await kv.status();
    } catch (error) {
      if (!isStreamNotFound(error)) throw unavailable(bucket, 'open', error);
      try {
        kv = await kvm.create(bucket, { history: 1, allow_direct: false, timeout });
      } catch (created) {
        throw unavailable(bucket, 'create', created);
      }
    }
    return new NatsStateStore(OPENED, kv, bucket, name, maxBytes);
  }

  /**
   * Every record under this manager's name (read from the server).
   *
   * @throws StateStoreError (`corrupt`) for a value that is not a valid record,
   *   or one stored under another agent's key (left as it is); (`too-large`)
   *   for one over `maxValueBytes`; (`unavailable`) when the server does not answer.
   */
  async load(): Promise<AgentStateRecord[]> {
    const out: AgentStateRecord[] = [];
    try {
      const keys: string[] = [];
      for await (const key of await this.#kv.keys(`${this.name}.>`)) keys.push(key);
      for (const key of keys) {
        const entry = await this.#kv.get(key);
        if (entry === null) continue;
        if (entry.operation !== 'PUT') {
          this.#revisions.set(key, entry.revision);
          continue;
        }
        const location = `${this.bucket}/${key}`;
        if (entry.length > this.#maxBytes) {
          throw new StateStoreError(
            location,
            StateStoreProblem.TOO_LARGE,
            `Refusing the manager state in ${location}: it is ${entry.length} bytes, more than \`maxValueBytes\` (${this.#maxBytes}). It was not read.`,
          );
        }
        const record = parseStored(agentStateRecordSchema, entry.string(), location);
        if (keyOf(this.name, record.agentId) !== key) {
          throw new StateStoreError(
            location,
            StateStoreProblem.CORRUPT,
            `Refusing the manager state in ${location}: it holds agent ${JSON.stringify(record.agentId)}, whose key is another. It was left as it is.`,
          );
        }
        this.#revisions.set(key, entry.revision);
        out.push(record);
      }
    } catch (error) {
      if (error instanceof StateStoreError) throw error;
      throw unavailable(this.bucket, 'read', error);
    }
    return out;
  }

  /**
   * Write every change by compare-and-set, concurrently; resolves once the
   * server acknowledged all of them.
   *
   * @throws TypeError or InvalidInputError for malformed changes (nothing written).
   * @throws StateStoreError: `too-large` (nothing written), `conflict` (another
   *   writer moved a key; the others may have been written), `unavailable`.
   */
  async commit(changes: readonly StateChange[]): Promise<void> {
    checkChanges(changes);
    if (this.#closed) throw new TypeError('This NatsStateStore is closed; create a new one');
    const encoded = changes.map((change) => {
      if (change.op === 'delete') return { change, data: undefined };
      const data = JSON.stringify(change.record);
      const bytes = Buffer.byteLength(data, 'utf8');
      if (bytes > this.#maxBytes) {
        throw new StateStoreError(
          `${this.bucket}/${keyOf(this.name, change.record.agentId)}`,
          StateStoreProblem.TOO_LARGE,
          `Refusing to write the record of ${change.record.agentId}: ${bytes} bytes, more than \`maxValueBytes\` (${this.#maxBytes}). Nothing was written.`,
        );
      }
      return { change, data };
    });
    const results = await Promise.allSettled(
      encoded.map(({ change, data }) => this.#write(change, data)),
    );
    const failed = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
    if (failed) throw failed.reason;
  }

  /** No commit is accepted afterwards. The connection stays the caller's. Idempotent. */
  async close(): Promise<void> {
    this.#closed = true;
  }

  async #write(change: StateChange, data: string | undefined): Promise<void> {
    const agentId = change.op === 'put' ? change.record.agentId : change.agentId;
    const key = keyOf(this.name, agentId);
    const known = this.#revisions.get(key);
    try {
      if (data === undefined) {
        if (known === undefined || known === 0) {
          // Never seen by this store: delete only what is there, by its revision.
          const entry = await this.#kv.get(key);
          if (entry === null || entry.operation !== 'PUT') return;
          await this.#kv.delete(key, { previousSeq: entry.revision });
        } else {
          await this.#kv.delete(key, { previousSeq: known });
        }
        this.#revisions.set(key, 0);
        return;
      }
      const revision =
        known === undefined || known === 0
          ? await this.#kv.create(key, data)
          : await this.#kv.update(key, data, known);
      this.#revisions.set(key, revision);
    } catch (error) {
      if (
        isJetStreamRevisionConflict(error) ||
        /wrong last sequence/i.test(String((error as Error)?.message))
      ) {
        this.#revisions.delete(key);
        throw new StateStoreError(
          `${this.bucket}/${key}`,
          StateStoreProblem.CONFLICT,
          `Refusing to overwrite the record of ${agentId} in ${this.bucket}/${key}: another writer changed it since this store last read or wrote it (two managers named ${JSON.stringify(this.name)}?). Nothing was written for it.`,
          { cause: error },
        );
      }
      throw unavailable(this.bucket, 'write', error);
    }
  }
}

/** The KV key of an agent's record: `<name>.<agent id in base64url>` (any id fits a key). @internal */
export function keyOf(name: string, agentId: string): string {
  return `${name}.${Buffer.from(agentId, 'utf8').toString('base64url')}`;
}

function unavailable(bucket: string, what: string, error: unknown): StateStoreError {
  return new StateStoreError(
    bucket,
    StateStoreProblem.UNAVAILABLE,
    `Cannot ${what} the manager state bucket ${JSON.stringify(bucket)}: ${(error as Error)?.message ?? String(error)}. Check that JetStream is enabled and that this user has the subjects docs/security.md lists.`,
    { cause: error },
  );
}
