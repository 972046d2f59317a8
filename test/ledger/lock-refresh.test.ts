import * as nodeFs from 'node:fs';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { PoolLocker } from '../../src/ledger/lock.js';

const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});
function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'sp-lock-'));
  dirs.push(dir);
  return dir;
}

type Utimes = (path: string, a: Date, m: Date, cb: (error: unknown) => void) => void;

describe('PoolLocker ownership across lock refreshes', () => {
  it('records the mtime the filesystem stored, which utimes may round below the millisecond', async () => {
    const dir = tempDir();
    const locker = new PoolLocker(nodeFs);
    const lockFs = (locker as unknown as { lockFs: { utimes: Utimes } }).lockFs;
    const records = (locker as unknown as { records: Map<string, { mtimeMs?: number }> }).records;
    // Find a whole millisecond that this filesystem reads back as .999 below it.
    let when: Date | undefined;
    for (let ms = 1_795_972_018_000; ms < 1_795_972_018_100 && !when; ms++) {
      nodeFs.utimesSync(dir, new Date(ms), new Date(ms));
      if (Math.floor(nodeFs.statSync(dir).mtimeMs) !== ms) when = new Date(ms);
    }
    expect(when, 'no truncating millisecond found on this filesystem').toBeDefined();
    await new Promise<void>((resolve, reject) =>
      lockFs.utimes(dir, when!, when!, (error) => (error ? reject(error) : resolve())),
    );
    expect(records.get(dir)?.mtimeMs).toBe(nodeFs.statSync(dir).mtimeMs);
  });

  it('a holder whose lock was refreshed still owns it', async () => {
    const dir = tempDir();
    const locker = new PoolLocker(nodeFs);
    const lockPath = join(dir, 'p.lock');
    const handle = await locker.acquire('p', join(dir, 'p.json'), lockPath, {
      staleMs: 2000,
      timeoutMs: 5000,
    });
    try {
      const before = nodeFs.statSync(lockPath).mtimeMs;
      // proper-lockfile refreshes every staleMs / 2.
      const until = Date.now() + 3000;
      while (nodeFs.statSync(lockPath).mtimeMs === before && Date.now() < until) {
        await new Promise((r) => setTimeout(r, 50));
      }
      expect(nodeFs.statSync(lockPath).mtimeMs).not.toBe(before);
      await expect(handle.assertOwned()).resolves.toBeUndefined();
    } finally {
      await handle.release();
    }
    expect(nodeFs.existsSync(lockPath)).toBe(false);
  });
});
