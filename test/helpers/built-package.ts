import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, rmSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';

/** The repository root. */
export const root = join(import.meta.dirname, '..', '..');

function newestMtime(dir: string): number {
  let newest = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true, recursive: true })) {
    if (!entry.isFile()) continue;
    newest = Math.max(newest, statSync(join(entry.parentPath, entry.name)).mtimeMs);
  }
  return newest;
}

/** Whether dist/ holds a build at least as new as every file under src/. */
export function builtIsFresh(): boolean {
  const marker = join(root, 'dist', 'index.d.ts');
  if (!existsSync(marker)) return false;
  const config = statSync(join(root, 'tsup.config.ts')).mtimeMs;
  return statSync(marker).mtimeMs >= Math.max(newestMtime(join(root, 'src')), config);
}

/**
 * Make sure dist/ is built from the current src/ (CI builds before the tests;
 * a fresh clone has none: `npm ci` builds nothing). Builds at most once at a
 * time across test files:
 * the first caller builds under a lock directory, the others wait for it.
 */
export async function ensureBuilt(): Promise<void> {
  const lock = join(root, 'node_modules', '.cache', 'scaler-primitives-build.lock');
  mkdirSync(join(lock, '..'), { recursive: true });
  for (;;) {
    if (builtIsFresh()) return;
    try {
      mkdirSync(lock);
    } catch {
      // Another test file builds (or a build died: a lock older than 5 minutes is stale).
      const since = statSync(lock, { throwIfNoEntry: false })?.mtimeMs ?? Date.now();
      if (Date.now() - since > 300_000) {
        rmSync(lock, { recursive: true, force: true });
      }
      await sleep(200);
      continue;
    }
    try {
      if (!builtIsFresh()) {
        execFileSync(
          process.execPath,
          [join(root, 'node_modules', 'tsup', 'dist', 'cli-default.js'), '--silent'],
          {
            cwd: root,
            stdio: ['ignore', 'ignore', 'inherit'],
          },
        );
      }
    } finally {
      rmSync(lock, { recursive: true, force: true });
    }
    return;
  }
}
