/**
 * The advisory wait queue of a pool lock, `<dir>/.<pool>.queue`, and the small
 * file primitive it is read and written with: the file is opened with
 * `O_NOFOLLOW | O_NONBLOCK`, the open fd is fstat'ed, and anything but a
 * regular file owned by this process's uid is left alone (never read into
 * memory, never written, never truncated). A symlink planted there therefore
 * cannot turn a waiter into a writer of another file, and a FIFO cannot hang it.
 */
import { monotonicEpochNow, systemClock } from '../../clock.js';
import { type LedgerFs, writeAll } from '../fs.js';
import { ownRegularFile } from './safe-fs.js';

// The queue line is `<start> <touchedAt> <id>\n`: far below this.
const MAX_QUEUE_BYTES = 256;

/** The advisory wait-queue file of a lock: `<dir>/.<pool>.queue`, beside `<dir>/<pool>.lock`. */
export function queuePath(lockPath: string): string {
  const slash = lockPath.lastIndexOf('/');
  return `${lockPath.slice(0, slash + 1)}.${lockPath.slice(slash + 1, -'.lock'.length)}.queue`;
}

/**
 * Read a small file without following a symlink; `undefined` when it is missing,
 * not a regular file we own, or larger than `MAX_QUEUE_BYTES`.
 */
export function readOwnFile(fs: LedgerFs, path: string): string | undefined {
  const { O_RDONLY, O_NOFOLLOW, O_NONBLOCK } = fs.constants;
  let fd: number;
  try {
    // No queue (nobody waits) is the common case: looked up without an error thrown.
    if (fs.lstatSync(path, { throwIfNoEntry: false }) === undefined) return undefined;
    fd = fs.openSync(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK);
  } catch {
    return undefined;
  }
  try {
    if (!ownRegularFile(fs.fstatSync(fd))) return undefined;
    const buffer = Buffer.alloc(MAX_QUEUE_BYTES + 1);
    const length = fs.readSync(fd, buffer, 0, buffer.length, 0);
    return length > MAX_QUEUE_BYTES ? undefined : buffer.toString('utf8', 0, length);
  } catch {
    return undefined;
  } finally {
    fs.closeSync(fd);
  }
}

/**
 * Replace the content of a small file (created `0644` when missing) without
 * following a symlink; false, and nothing written, when the path is not a
 * regular file we own.
 */
export function writeOwnFile(fs: LedgerFs, path: string, text: string): boolean {
  const { O_WRONLY, O_CREAT, O_NOFOLLOW, O_NONBLOCK } = fs.constants;
  let fd: number;
  try {
    fd = fs.openSync(path, O_WRONLY | O_CREAT | O_NOFOLLOW | O_NONBLOCK, 0o644);
  } catch {
    return false;
  }
  try {
    // Truncate only once we know it is our regular file (O_TRUNC would act before the check).
    if (!ownRegularFile(fs.fstatSync(fd))) return false;
    fs.ftruncateSync(fd, 0);
    writeAll(fs, fd, text);
    return true;
  } catch {
    return false;
  } finally {
    fs.closeSync(fd);
  }
}

// A head-of-line claim older than this is ignored: its waiter died or stalled.
const CLAIM_TTL_MS = 10;

/**
 * An advisory first-come-first-served order among waiters of one lock, so a
 * process that keeps re-taking the lock cannot starve the others. The queue file
 * names the oldest waiter (its start time and id) and when it last said so; a
 * waiter only tries the lock when no older waiter has claimed the head within
 * `CLAIM_TTL_MS`. It is only a hint: the lock itself is still the `mkdir`, a
 * dead waiter's claim expires on its own, and writers that do not know the file
 * (the kici orchestrator) simply compete as before.
 */
export class WaitQueue {
  private readonly start = monotonicEpochNow();
  private readonly id = `${process.pid}.${Math.random().toString(36).slice(2, 10)}`;
  private claimed = false;

  constructor(
    private readonly fs: LedgerFs,
    private readonly path: string,
  ) {}

  /** True unless an older waiter holds a fresh claim on the head of the line. */
  myTurn(): boolean {
    const head = this.read();
    if (head === undefined || head.id === this.id) return true;
    if (systemClock.now() - head.touchedAt > CLAIM_TTL_MS) return true;
    return head.start > this.start || (head.start === this.start && head.id > this.id);
  }

  /** True while our claim is the head of the line. */
  leading(): boolean {
    return this.claimed;
  }

  /**
   * After a failed attempt: claim (or keep) the head of the line if no older
   * waiter has it. `turn` is what {@link myTurn} said just before the attempt
   * (read again when not given).
   */
  claim(turn = this.myTurn()): void {
    if (!turn) {
      this.claimed = false;
      return;
    }
    this.claimed = writeOwnFile(
      this.fs,
      this.path,
      `${this.start} ${systemClock.now()} ${this.id}\n`,
    );
  }

  /** Done waiting (the lock is ours, or we gave up): drop our claim if it is still there. */
  leave(): void {
    if (!this.claimed) return;
    this.claimed = false;
    if (this.read()?.id !== this.id) return;
    try {
      // unlink never follows a symlink: at worst it removes a link planted there.
      this.fs.unlinkSync(this.path);
    } catch {
      // Already gone.
    }
  }

  private read(): { start: number; touchedAt: number; id: string } | undefined {
    const text = readOwnFile(this.fs, this.path);
    if (text === undefined) return undefined;
    const [start, touchedAt, id] = text.trim().split(' ');
    const parsed = { start: Number(start), touchedAt: Number(touchedAt), id: id ?? '' };
    return Number.isFinite(parsed.start) && Number.isFinite(parsed.touchedAt) && parsed.id
      ? parsed
      : undefined;
  }
}
