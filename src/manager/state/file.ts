/**
 * The file state store: one JSON document in a directory this user owns,
 * replaced atomically on every commit (temp file made with O_EXCL|O_NOFOLLOW,
 * fsync, rename, directory fsync), read with the ledger's file hygiene (no
 * link followed, only a regular file we own and others cannot write, size
 * checked before reading). A corrupt document is refused, never reset.
 */
import { randomBytes } from 'node:crypto';
import { basename, join } from 'node:path';
import { StateStoreError } from '../../errors/index.js';
import {
  isLedgerDirError,
  isLedgerFileError,
  isLedgerIoError,
  LedgerFileProblem,
} from '../../errors/ledger-fs.js';
import { StateStoreProblem } from '../../errors/state-store.js';
import { ensureSafeDir } from '../../ledger/file/dir.js';
import { createExclusive, readLedgerFile } from '../../ledger/file/safe-fs.js';
import { syncDir } from '../../ledger/file/store.js';
import { defaultFs, type LedgerFs, writeAll } from '../../ledger/fs.js';
import { checkChanges } from './check.js';
import { parseStored, type StateDocument, stateDocumentSchema } from './schema.js';
import type { AgentStateRecord, StateChange, StateStore } from './types.js';

/** Options of {@link FileStateStore}. */
export interface FileStateStoreOptions {
  /** The directory (created 0700 when missing; refused when unsafe, e.g. writable by others or a link). */
  dir: string;
  /**
   * The document's name in `dir` (`<name>.json`): 1-64 characters of `[A-Za-z0-9_-]`.
   * One manager per name.
   * @default 'manager-state'
   */
  name?: string;
  /**
   * The largest document read or written, in bytes (an agent takes about 600
   * bytes, so the default holds about 25,000).
   * @default 16777216 (16 MiB)
   */
  maxFileBytes?: number;
  /**
   * fsync the temp file and the directory on every commit (turn off only for tests).
   * @default true
   */
  fsync?: boolean;
  /** The filesystem (tests inject failures). @default node:fs */
  fs?: LedgerFs;
}

const NAME = /^[A-Za-z0-9_-]{1,64}$/;
const KEYS = ['dir', 'name', 'maxFileBytes', 'fsync', 'fs'];

interface Fingerprint {
  ino: number;
  size: number;
  mtimeMs: number;
}

/**
 * A {@link StateStore} in one file, for a manager on one host: every commit
 * rewrites `<dir>/<name>.json` atomically and durably before it resolves. One
 * writer per file: a commit that finds the file changed by someone else
 * since its own last write refuses (`StateStoreError`, `conflict`).
 *
 * @example
 * ```ts
 * import type { MachineLedger } from 'scaler-primitives/ledger';
 * import { type BackendEntry, FileStateStore, type ScalerConfigInput, ScalerManager } from 'scaler-primitives/manager';
 * declare const config: ScalerConfigInput;
 * declare const backends: BackendEntry[];
 * declare const ledger: MachineLedger;
 * const stateStore = new FileStateStore({ dir: '/var/lib/ci/manager' });
 * const manager = new ScalerManager({ config, backends, ledgers: { host: ledger }, stateStore });
 * manager.start(); // recovers what the previous process left
 * ```
 */
export class FileStateStore implements StateStore {
  /** The document's path. */
  readonly path: string;
  readonly #dir: string;
  readonly #fs: LedgerFs;
  readonly #maxBytes: number;
  readonly #fsync: boolean;
  #records: Map<string, AgentStateRecord> | undefined;
  #revision = 0;
  #written: Fingerprint | undefined;
  #dirReady: Promise<string> | undefined;
  #queue: Promise<unknown> = Promise.resolve();
  #closed = false;

  /**
   * @param options - `dir` is required; see {@link FileStateStoreOptions}.
   * @throws TypeError for an unknown option or a bad value.
   */
  constructor(options: FileStateStoreOptions) {
    if (typeof options !== 'object' || options === null) {
      throw new TypeError(
        `Expected \`options\` to be an object like { dir }, got \`${String(options)}\``,
      );
    }
    for (const key of Object.keys(options)) {
      if (!KEYS.includes(key)) {
        throw new TypeError(
          `Unknown FileStateStore option \`${key.slice(0, 64)}\`; expected ${KEYS.join(', ')}`,
        );
      }
    }
    if (typeof options.dir !== 'string' || options.dir === '' || options.dir.length > 4096) {
      throw new TypeError(
        `Expected \`dir\` to be a non-empty path, got \`${String(options.dir).slice(0, 80)}\``,
      );
    }
    const name = options.name ?? 'manager-state';
    if (typeof name !== 'string' || !NAME.test(name)) {
      throw new TypeError(
        `Expected \`name\` to be 1-64 characters of [A-Za-z0-9_-], got \`${String(name).slice(0, 80)}\``,
      );
    }
    const max = options.maxFileBytes ?? 16 * 1024 * 1024;
    if (!Number.isSafeInteger(max) || max < 1024) {
      throw new TypeError(
        `Expected \`maxFileBytes\` to be an integer >= 1024, got \`${String(max)}\``,
      );
    }
    if (options.fsync !== undefined && typeof options.fsync !== 'boolean') {
      throw new TypeError(`Expected \`fsync\` to be a boolean, got \`${String(options.fsync)}\``);
    }
    this.#dir = options.dir;
    this.path = join(options.dir, `${name}.json`);
    this.#fs = options.fs ?? defaultFs;
    this.#maxBytes = max;
    this.#fsync = options.fsync ?? true;
  }

  /**
   * Every stored record (read from the file each time).
   *
   * @throws StateStoreError when the file is corrupt (`corrupt`), unsafe
   *   (`unsafe-file`) or too large (`too-large`); it is left as it is.
   */
  load(): Promise<AgentStateRecord[]> {
    return this.#serial(async () => {
      const dir = await this.#ensureDir();
      this.#sweep(dir);
      const doc = this.#read();
      this.#records = new Map((doc?.agents ?? []).map((record) => [record.agentId, record]));
      this.#revision = doc?.revision ?? 0;
      this.#written = this.#fingerprint();
      return [...this.#records.values()].map((record) => structuredClone(record));
    });
  }

  /**
   * Apply `changes` and replace the file, durably, before resolving.
   *
   * @throws TypeError or InvalidInputError for malformed changes (nothing written).
   * @throws StateStoreError for a corrupt or unsafe file, a document over
   *   `maxFileBytes` (`too-large`; nothing written), or a file another writer
   *   changed (`conflict`).
   */
  commit(changes: readonly StateChange[]): Promise<void> {
    checkChanges(changes);
    return this.#serial(async () => {
      if (this.#closed) throw new TypeError('This FileStateStore is closed; create a new one');
      const dir = await this.#ensureDir();
      if (this.#records === undefined) {
        const doc = this.#read();
        this.#records = new Map((doc?.agents ?? []).map((record) => [record.agentId, record]));
        this.#revision = doc?.revision ?? 0;
        this.#written = this.#fingerprint();
      } else {
        const now = this.#fingerprint();
        if (!sameFingerprint(now, this.#written)) {
          // Re-read on the next commit: the caller decides whether to go on.
          this.#records = undefined;
          throw new StateStoreError(
            this.path,
            StateStoreProblem.CONFLICT,
            `Refusing to write ${this.path}: another writer changed it since this store last wrote it (two managers on one state file?). Nothing was written; give each manager its own \`name\` or \`dir\`.`,
          );
        }
      }
      const next = new Map(this.#records);
      for (const change of changes) {
        if (change.op === 'put') next.set(change.record.agentId, change.record);
        else next.delete(change.agentId);
      }
      const doc: StateDocument = {
        version: 1,
        revision: this.#revision + 1,
        agents: [...next.values()],
      };
      const text = `${JSON.stringify(doc)}\n`;
      const bytes = Buffer.byteLength(text, 'utf8');
      if (bytes > this.#maxBytes) {
        throw new StateStoreError(
          this.path,
          StateStoreProblem.TOO_LARGE,
          `Refusing to write ${this.path}: the state document would be ${bytes} bytes, more than \`maxFileBytes\` (${this.#maxBytes}). Nothing was written; raise \`maxFileBytes\` or run fewer agents per manager.`,
        );
      }
      await this.#replace(dir, text);
      this.#records = new Map([...next].map(([id, record]) => [id, structuredClone(record)]));
      this.#revision = doc.revision;
      this.#written = this.#fingerprint();
    });
  }

  /** No commit is accepted afterwards. Idempotent. */
  async close(): Promise<void> {
    this.#closed = true;
    await this.#queue.catch(() => undefined);
  }

  #serial<T>(task: () => Promise<T>): Promise<T> {
    const run = this.#queue.then(task, task);
    this.#queue = run.catch(() => undefined);
    return run;
  }

  #ensureDir(): Promise<string> {
    this.#dirReady ??= ensureSafeDir(this.#fs, this.#dir).catch((error: unknown) => {
      this.#dirReady = undefined;
      if (isLedgerIoError(error)) {
        throw new StateStoreError(
          this.#dir,
          StateStoreProblem.UNAVAILABLE,
          `Cannot use the state directory ${this.#dir}: ${error.errno} (${(error.cause as Error | undefined)?.message ?? error.message}). Nothing was written; the previous state is intact.`,
          { cause: error },
        );
      }
      throw new StateStoreError(
        this.#dir,
        StateStoreProblem.UNSAFE_FILE,
        `Refusing the state directory ${this.#dir}: ${(error as Error).message}`,
        { cause: error },
      );
    });
    return this.#dirReady;
  }

  #read(): StateDocument | undefined {
    let text: string | undefined;
    try {
      text = readLedgerFile(this.#fs, this.path, { pool: '', maxBytes: this.#maxBytes });
    } catch (error) {
      if (isLedgerFileError(error) || isLedgerDirError(error)) {
        const tooLarge = isLedgerFileError(error) && error.problem === LedgerFileProblem.TOO_LARGE;
        throw new StateStoreError(
          this.path,
          tooLarge ? StateStoreProblem.TOO_LARGE : StateStoreProblem.UNSAFE_FILE,
          `Refusing the manager state file ${this.path}: ${error.message.replace(/^Refusing [^:]*: /, '')}`,
          { cause: error },
        );
      }
      throw new StateStoreError(
        this.path,
        StateStoreProblem.UNAVAILABLE,
        `Cannot read the manager state file ${this.path}: ${(error as Error).message}`,
        { cause: error },
      );
    }
    return text === undefined ? undefined : parseStored(stateDocumentSchema, text, this.path);
  }

  // Temp files a killed writer left (only this store writes them, one commit at a time).
  #sweep(dir: string): void {
    const prefix = `.${basename(this.path)}.`;
    let names: string[];
    try {
      names = this.#fs.readdirSync(dir);
    } catch {
      return;
    }
    for (const name of names) {
      if (!name.startsWith(prefix) || !name.endsWith('.tmp')) continue;
      try {
        this.#fs.unlinkSync(join(dir, name));
      } catch {
        // Gone already.
      }
    }
  }

  #fingerprint(): Fingerprint | undefined {
    try {
      const stat = this.#fs.lstatSync(this.path);
      return { ino: stat.ino, size: stat.size, mtimeMs: stat.mtimeMs };
    } catch {
      return undefined;
    }
  }

  async #replace(dir: string, text: string): Promise<void> {
    const fs = this.#fs;
    const temp = join(dir, `.${basename(this.path)}.${randomBytes(6).toString('hex')}.tmp`);
    let fd: number | undefined;
    try {
      fd = createExclusive(fs, temp, 0o600);
      writeAll(fs, fd, text);
      if (this.#fsync) {
        const handle = fd;
        await new Promise<void>((resolve, reject) => {
          fs.fsync(handle, (error) => (error ? reject(error) : resolve()));
        });
      }
      fs.closeSync(fd);
      fd = undefined;
      fs.renameSync(temp, this.path);
    } catch (error) {
      if (fd !== undefined) fs.closeSync(fd);
      try {
        fs.unlinkSync(temp);
      } catch {
        // Never made, or already renamed.
      }
      throw new StateStoreError(
        this.path,
        StateStoreProblem.UNAVAILABLE,
        `Writing the manager state file ${this.path} failed: ${(error as Error).message}. The previous state is intact.`,
        { cause: error },
      );
    }
    if (!this.#fsync) return;
    try {
      await syncDir(fs, dir);
    } catch (error) {
      // The new document is in place but its rename may not survive a crash.
      throw new StateStoreError(
        this.path,
        StateStoreProblem.UNAVAILABLE,
        `Writing the manager state file ${this.path} failed after the new document was renamed into place: syncing ${dir} failed: ${(error as Error).message}. The file holds the new state but may not survive a crash; commit again.`,
        { cause: error },
      );
    }
  }
}

function sameFingerprint(a: Fingerprint | undefined, b: Fingerprint | undefined): boolean {
  if (a === undefined || b === undefined) return a === b;
  return a.ino === b.ino && a.size === b.size && a.mtimeMs === b.mtimeMs;
}
