import * as nodeFs from 'node:fs';
import { mkdirSync, mkdtempSync, rmdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { LockWaker } from '../../src/ledger/file/lock-wake.js';
import type { LedgerFs } from '../../src/ledger/fs.js';

let dir: string;
let waker: LockWaker;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'lock-wake-'));
  waker = new LockWaker(nodeFs);
});
afterEach(() => {
  waker.close();
  rmSync(dir, { recursive: true, force: true });
});

const LOCK = new Set(['p.lock']);

describe('LockWaker (a real fs.watch on a temp directory)', () => {
  it('wakes a sleeper as soon as the entry it waits on is made, long before its timer', async () => {
    const woken = waker.sleep(dir, LOCK, 10_000);
    expect(waker.watching(dir)).toBe(true);
    mkdirSync(join(dir, 'p.lock'));
    expect(await woken).toBe(true);
  });

  it('wakes it when the entry is removed (a released lock, ours or kici’s)', async () => {
    mkdirSync(join(dir, 'p.lock'));
    const woken = waker.sleep(dir, LOCK, 10_000);
    rmdirSync(join(dir, 'p.lock'));
    expect(await woken).toBe(true);
  });

  it('sleeps through changes of other entries and ends on its timer', async () => {
    const slept = waker.sleep(dir, LOCK, 150);
    writeFileSync(join(dir, 'p.json'), '{}');
    mkdirSync(join(dir, 'q.lock'));
    writeFileSync(join(dir, '.q.queue'), 'x');
    expect(await slept).toBe(false);
  });

  it('sleeps through a rewrite in place of the entry (the head refreshing its claim)', async () => {
    writeFileSync(join(dir, '.p.queue'), 'a');
    const slept = waker.sleep(dir, new Set(['.p.queue']), 150);
    writeFileSync(join(dir, '.p.queue'), 'b');
    expect(await slept).toBe(false);
    const woken = waker.sleep(dir, new Set(['.p.queue']), 10_000);
    rmSync(join(dir, '.p.queue'));
    expect(await woken).toBe(true);
  });

  it('shares one watch among sleepers of several pools and wakes only the right one', async () => {
    const p = waker.sleep(dir, LOCK, 10_000);
    let qWoken: boolean | undefined;
    const q = waker.sleep(dir, new Set(['q.lock']), 300).then((value) => {
      qWoken = value;
    });
    mkdirSync(join(dir, 'p.lock'));
    expect(await p).toBe(true);
    expect(qWoken).toBeUndefined();
    await q;
    expect(qWoken).toBe(false);
  });

  it('polls on its timer where no watch can be made (and does not retry the watch)', async () => {
    let calls = 0;
    const noWatch = {
      ...nodeFs,
      watch: () => {
        calls++;
        throw Object.assign(new Error('inotify limit'), { code: 'ENOSPC' });
      },
    } as unknown as LedgerFs;
    const polling = new LockWaker(noWatch);
    const slept = polling.sleep(dir, LOCK, 50);
    mkdirSync(join(dir, 'p.lock'));
    expect(await slept).toBe(false);
    expect(await polling.sleep(dir, LOCK, 10)).toBe(false);
    expect(calls).toBe(1);
    expect(polling.watching(dir)).toBe(false);
    // Without a watch there is nothing to look again for: the timers poll.
    expect(polling.begin(dir)).toBe(false);
    polling.end(dir);
  });

  it('outside a wait, ends its watch with the sleep', async () => {
    const woken = waker.sleep(dir, LOCK, 10_000);
    mkdirSync(join(dir, 'p.lock'));
    expect(await woken).toBe(true);
    expect(waker.watching(dir)).toBe(false);
    expect(await waker.sleep(dir, LOCK, 20)).toBe(false);
    expect(waker.watching(dir)).toBe(false);
  });

  it('keeps the watch from begin to end across sleeps and changes between them, then ends it', async () => {
    expect(waker.begin(dir)).toBe(true);
    expect(waker.watching(dir)).toBe(true);
    const first = waker.sleep(dir, LOCK, 10_000);
    mkdirSync(join(dir, 'p.lock'));
    expect(await first).toBe(true);
    // Awake between two sleeps: changes arrive and the watch stays.
    writeFileSync(join(dir, 'p.json'), '{}');
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(waker.watching(dir)).toBe(true);
    const second = waker.sleep(dir, LOCK, 10_000);
    rmdirSync(join(dir, 'p.lock'));
    expect(await second).toBe(true);
    waker.end(dir);
    expect(waker.watching(dir)).toBe(false);
  });

  it('ends the watch only when the last of several waits ends, and not under a sleeper', async () => {
    // Only the wait that made the watch is told to look again before it sleeps.
    expect(waker.begin(dir)).toBe(true);
    expect(waker.begin(dir)).toBe(false);
    waker.end(dir);
    expect(waker.watching(dir)).toBe(true);
    const sleeping = waker.sleep(dir, LOCK, 10_000);
    waker.end(dir);
    // The sleeper still needs it; it ends when that sleep does.
    expect(waker.watching(dir)).toBe(true);
    mkdirSync(join(dir, 'p.lock'));
    expect(await sleeping).toBe(true);
    expect(waker.watching(dir)).toBe(false);
    // A new wait makes it again.
    expect(waker.begin(dir)).toBe(true);
    expect(waker.watching(dir)).toBe(true);
    waker.end(dir);
  });

  it('close() wakes every sleeper and stops watching', async () => {
    const woken = waker.sleep(dir, LOCK, 10_000);
    waker.close();
    expect(await woken).toBe(true);
    expect(waker.watching(dir)).toBe(false);
  });
});
