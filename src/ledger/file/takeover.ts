/**
 * Taking over a stale pool lock, atomically.
 *
 * A lock directory whose mtime is older than the stale window is moved out of
 * the way with one `rename` to a name only this taker knows
 * (`<dir>/.<pool>.lock.stale.<token>`), and then removed with everything in it.
 * The rename is the decision: of two takers that both judged the same
 * directory stale, exactly one moves it; the other finds nothing to move (or a
 * fresh lock, see below) and goes back to `mkdir`.
 *
 * Why a holder that lost its lock cannot write afterwards: our holders write
 * their temp file inside their own token directory `<pool>.lock/<token>/` and
 * rename it from there over the pool file (see `lock.ts`). Once the lock
 * directory is moved, that path no longer resolves, so a holder that was
 * descheduled anywhere (after its ownership check, after its fsync, right
 * before its rename) gets `ENOENT` and writes nothing. Removing the moved tree
 * before the taker reads makes a rename already inside the kernel on the old
 * tree finish or fail before then.
 *
 * A taker descheduled between its `lstat` and its `rename` may move a lock
 * that was taken fresh in between. When that lock's holder is one of ours, the
 * holder is fenced as above (its call fails with `LedgerLockCompromisedError`,
 * nothing written). When it is a kici 0.9.1 process, which does not fence its
 * writes, both could write: the same race kici's own stale path (`stat`, then
 * `rm -rf`) has among kici processes. See docs/security.md, Locking.
 */
import { systemClock } from '../../clock.js';
import { hasErrorCode, type LedgerFs } from '../fs.js';

/** What {@link takeOverIfStale} found. */
export type TakeoverResult =
  /** The lock was stale and is gone now (moved and removed), or was already gone: try `mkdir` again. */
  | 'free'
  /** The lock is held and fresh. */
  | 'held'
  /** `<pool>.lock` is not a directory (a file, a symlink...): not ours to remove. */
  | 'not-a-directory';

/** The private name a taker moves a stale lock directory to. */
export function movedLockPath(lockPath: string, token: string): string {
  const slash = lockPath.lastIndexOf('/');
  return `${lockPath.slice(0, slash + 1)}.${lockPath.slice(slash + 1)}.stale.${token}`;
}

/** True for the name of a moved stale lock of `lockName` (`<pool>.lock`). */
export function isMovedLockName(name: string, lockName: string): boolean {
  return name.startsWith(`.${lockName}.stale.`);
}

/**
 * If the lock directory at `lockPath` has not been refreshed for `staleMs`,
 * move it away under a private name and remove it with its content.
 */
export function takeOverIfStale(
  fs: LedgerFs,
  lockPath: string,
  staleMs: number,
  token: string,
): TakeoverResult {
  let mtimeMs: number;
  try {
    const stat = fs.lstatSync(lockPath, { throwIfNoEntry: false });
    if (stat === undefined) return 'free';
    if (!stat.isDirectory()) return 'not-a-directory';
    mtimeMs = stat.mtimeMs;
  } catch (error) {
    if (hasErrorCode(error, 'ENOENT')) return 'free';
    throw error;
  }
  if (systemClock.now() - mtimeMs <= staleMs) return 'held';
  const moved = movedLockPath(lockPath, token);
  try {
    fs.renameSync(lockPath, moved);
  } catch (error) {
    // Released or taken over by someone else since the lstat.
    if (hasErrorCode(error, 'ENOENT')) return 'free';
    throw error;
  }
  removeTree(fs, moved);
  return 'free';
}

/**
 * Remove a moved lock directory and what is in it (token directories, temp
 * files). `rm` never follows a symlink inside the tree. Best effort: a tree
 * that cannot be removed now is harmless where it is (nothing resolves
 * `<pool>.lock/<token>` to it any more) and is swept by a later holder.
 */
export function removeTree(fs: LedgerFs, path: string): void {
  try {
    fs.rmSync(path, { recursive: true, force: true, maxRetries: 2, retryDelay: 1 });
  } catch {
    // Left for a later sweep.
  }
}
