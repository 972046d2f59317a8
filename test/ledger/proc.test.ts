import * as nodeFs from 'node:fs';
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { LedgerFs } from '../../src/ledger/fs.js';
import { isProcessAlive, readBootId, readProcessStartTime } from '../../src/ledger/proc.js';

afterEach(() => {
  vi.restoreAllMocks();
});

const fakeFs = (files: Record<string, string>) =>
  ({
    readFileSync: (path: string) => {
      if (path in files) return files[path];
      throw Object.assign(new Error('nope'), { code: 'ENOENT' });
    },
  }) as unknown as LedgerFs;

describe('isProcessAlive', () => {
  it('is true for this process and false for a pid that cannot exist', () => {
    expect(isProcessAlive(process.pid)).toBe(true);
    expect(isProcessAlive(0)).toBe(false);
    expect(isProcessAlive(-5)).toBe(false);
    expect(isProcessAlive(2 ** 22 + 1)).toBe(false);
  });

  it.each([
    ['EPERM', true],
    ['ESRCH', false],
  ])('kill(pid, 0) failing with %s means alive=%s', (code, alive) => {
    vi.spyOn(process, 'kill').mockImplementation(() => {
      throw Object.assign(new Error(code), { code });
    });
    expect(isProcessAlive(1234)).toBe(alive);
  });
});

describe('readProcessStartTime', () => {
  it('reads field 22 even when the command name holds spaces and parentheses', () => {
    const fields = Array.from({ length: 50 }, (_, i) => String(i + 3));
    fields[19] = '987654';
    const fs = fakeFs({ '/proc/77/stat': `77 (evil ) (name) ${fields.join(' ')}` });
    expect(readProcessStartTime(fs, 77)).toBe(987654);
    expect(readProcessStartTime(fs, 78)).toBeUndefined();
  });

  it('reads this process’s real start time', () => {
    const start = readProcessStartTime(nodeFs, process.pid);
    expect(Number.isSafeInteger(start)).toBe(true);
    expect(readProcessStartTime(nodeFs, process.pid)).toBe(start);
  });
});

describe('readBootId', () => {
  it('trims the file and falls back when there is none', () => {
    expect(readBootId(fakeFs({ '/proc/sys/kernel/random/boot_id': 'abc\n' }))).toBe('abc');
    expect(readBootId(fakeFs({}))).toBe('unknown-boot');
  });
});
