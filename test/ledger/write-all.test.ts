/**
 * The write loop every store writes through (`writeAll`): a short count is
 * followed by a write of the rest, a write that makes no progress is an error,
 * and a failing write's error reaches the caller. Then the stores on top of it:
 * FileStateStore and the file ledger given an fs whose writes come back short
 * or fail part way (ENOSPC after the first 4 KiB, as a nearly full tmpfs does)
 * never leave a cut document behind.
 */
import * as nodeFs from 'node:fs';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type AgentStateRecord, FileStateStore } from 'scaler-primitives/manager';
import { afterAll, describe, expect, it } from 'vitest';
import { isStateStoreError } from '../../src/errors/state-store.js';
import { MachineLedger } from '../../src/ledger/file/machine-ledger.js';
import { type LedgerFs, writeAll } from '../../src/ledger/fs.js';

const root = mkdtempSync(join(tmpdir(), 'sp-write-all-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));
let n = 0;
const freshDir = () => join(root, `d${++n}`);

// A writeSync that records every call and writes at most `max` bytes of each into `sink`.
function shortWriter(max: number, results?: number[]) {
  const sink: number[] = [];
  const calls: Array<{ offset: number; length: number }> = [];
  const fs = {
    writeSync(_fd: number, buffer: Uint8Array, offset: number, length: number) {
      calls.push({ offset, length });
      const forced = results?.shift();
      const count = forced ?? Math.min(max, length);
      for (let i = 0; i < Math.max(0, Math.min(count, length)); i++) sink.push(buffer[offset + i]!);
      return count;
    },
  } as unknown as Pick<LedgerFs, 'writeSync'>;
  return { fs, sink, calls };
}

describe('writeAll', () => {
  it('writes the rest after every short count until all bytes are written', () => {
    const text = 'é'.repeat(5000); // 10,000 bytes of UTF-8
    const { fs, sink, calls } = shortWriter(4096);
    writeAll(fs, 3, text);
    expect(Buffer.from(sink).toString('utf8')).toBe(text);
    expect(calls).toEqual([
      { offset: 0, length: 10_000 },
      { offset: 4096, length: 5904 },
      { offset: 8192, length: 1808 },
    ]);
  });

  it('writes nothing for an empty document and makes no call', () => {
    const { fs, calls } = shortWriter(10);
    writeAll(fs, 3, '');
    expect(calls).toEqual([]);
  });

  it('throws EIO instead of looping when a write makes no progress', () => {
    const { fs, calls } = shortWriter(10, [4, 0]);
    expect(() => writeAll(fs, 3, 'x'.repeat(20))).toThrow(
      expect.objectContaining({ code: 'EIO', syscall: 'write' }),
    );
    expect(calls).toHaveLength(2);
    expect(() => writeAll(shortWriter(10, [-1]).fs, 3, 'abc')).toThrow(/made no progress/);
    expect(() => writeAll(shortWriter(10, [7]).fs, 3, 'abc')).toThrow(/returned 7/);
  });

  it('passes the error of a failing write through (ENOSPC after a short count)', () => {
    let call = 0;
    const fs = {
      writeSync: (_fd: number, _b: Uint8Array, _o: number, length: number) => {
        if (call++ === 0) return Math.min(4096, length);
        throw Object.assign(new Error('ENOSPC: no space left on device, write'), {
          code: 'ENOSPC',
        });
      },
    } as unknown as Pick<LedgerFs, 'writeSync'>;
    expect(() => writeAll(fs, 3, 'x'.repeat(8800))).toThrow(
      expect.objectContaining({ code: 'ENOSPC' }),
    );
  });

  it('writes a real file completely', () => {
    const file = join(root, 'real.txt');
    const fd = nodeFs.openSync(file, 'w');
    try {
      writeAll(nodeFs, fd, Buffer.from('abc'));
      writeAll(nodeFs, fd, 'déf\n');
    } finally {
      nodeFs.closeSync(fd);
    }
    expect(readFileSync(file, 'utf8')).toBe('abcdéf\n');
  });
});

// node:fs whose writeSync writes at most 4 KiB per call, and (when `fullAfter`
// is set) fails with ENOSPC once that many bytes were written in total.
function tightFs(options: { fullAfter?: number } = {}) {
  let total = 0;
  let armed = false;
  const fs: LedgerFs = {
    ...nodeFs,
    writeSync: ((fd: number, buffer: Uint8Array, offset: number, length: number) => {
      let count = Math.min(4096, length);
      if (armed && options.fullAfter !== undefined) {
        count = Math.min(count, options.fullAfter - total);
        if (count <= 0) {
          throw Object.assign(new Error('ENOSPC: no space left on device, write'), {
            code: 'ENOSPC',
            errno: -28,
            syscall: 'write',
          });
        }
      }
      const written = nodeFs.writeSync(fd, buffer, offset, count, null);
      total += written;
      return written;
    }) as LedgerFs['writeSync'],
  };
  return {
    fs,
    fill() {
      armed = true;
      total = 0;
    },
  };
}

const record = (agentId: string): AgentStateRecord => ({
  v: 1,
  agentId,
  scaler: 'vm',
  state: 'idle',
  warm: true,
  labels: ['linux'],
  resources: { requests: { cpus: 1, memBytes: 0 }, limits: { cpus: 1 } },
  poolHeld: false,
  spawnSettled: true,
  spawnedAt: 1,
  registeredAt: 2,
  idleSince: 2,
  jobsCompleted: 0,
});

const puts = (count: number, prefix: string) =>
  Array.from({ length: count }, (_, i) => ({
    op: 'put' as const,
    record: record(`${prefix}${i}`),
  }));

describe('stores on short writes', () => {
  it('FileStateStore writes the whole document when every write is short', async () => {
    const { fs } = tightFs();
    const store = new FileStateStore({ dir: freshDir(), fs, fsync: false });
    await store.commit(puts(40, 'a'));
    const text = readFileSync(store.path, 'utf8');
    expect(Buffer.byteLength(text)).toBeGreaterThan(2 * 4096);
    expect(JSON.parse(text).agents).toHaveLength(40);
    expect(await new FileStateStore({ dir: join(store.path, '..'), fs }).load()).toHaveLength(40);
  });

  it('FileStateStore rejects a commit cut by ENOSPC and keeps the previous file', async () => {
    const tight = tightFs({ fullAfter: 4096 });
    const dir = freshDir();
    const store = new FileStateStore({ dir, fs: tight.fs, fsync: false });
    await store.commit(puts(2, 'good'));
    const before = readFileSync(store.path, 'utf8');
    tight.fill();
    const error = await store.commit(puts(20, 'more')).then(
      () => undefined,
      (caught: unknown) => caught,
    );
    expect(isStateStoreError(error)).toBe(true);
    expect(error).toMatchObject({ problem: 'unavailable' });
    expect((error as Error).message).toMatch(/ENOSPC/);
    expect((error as Error).message).toMatch(/previous state is intact/);
    expect(readFileSync(store.path, 'utf8')).toBe(before);
    expect(nodeFs.readdirSync(dir)).toEqual([`${'manager-state'}.json`]);
    const loaded = await new FileStateStore({ dir }).load();
    expect(loaded.map((r) => r.agentId)).toEqual(['good0', 'good1']);
  });

  it('MachineLedger writes a whole pool file through short writes', async () => {
    const { fs } = tightFs();
    const dir = freshDir();
    const ledger = new MachineLedger({ instanceId: 'a', dir, fs, fsync: false });
    ledger.registerPool('p', { maxCpu: 1000 });
    try {
      for (let i = 0; i < 30; i++) {
        await expect(ledger.reserve('p', `agent-with-a-longer-name-${i}`, 1, 0)).resolves.toEqual({
          ok: true,
        });
      }
      const text = readFileSync(join(dir, 'p.json'), 'utf8');
      expect(Buffer.byteLength(text)).toBeGreaterThan(2 * 4096);
      expect(JSON.parse(text).reservations).toHaveLength(30);
    } finally {
      await ledger.close();
    }
  });
});
