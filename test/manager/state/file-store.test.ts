/**
 * FileStateStore's file hygiene: a corrupt, linked, foreign-writable or
 * oversized file is refused and left as it is; a second writer is detected;
 * temp files a killed writer left are swept; options are strict.
 */
import {
  chmodSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type AgentStateRecord, FileStateStore } from 'scaler-primitives/manager';
import { afterAll, describe, expect, it } from 'vitest';
import { isStateStoreError } from '../../../src/errors/state-store.js';

const root = mkdtempSync(join(tmpdir(), 'sp-state-file-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));
let n = 0;
const freshDir = () => join(root, `d${++n}`);

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

async function problemOf(run: () => Promise<unknown>): Promise<string> {
  try {
    await run();
  } catch (error) {
    if (isStateStoreError(error)) return error.problem;
    throw error;
  }
  throw new Error('expected a rejection');
}

describe('FileStateStore', () => {
  it('writes one JSON document atomically with a growing revision', async () => {
    const dir = freshDir();
    const store = new FileStateStore({ dir });
    await store.commit([{ op: 'put', record: record('a') }]);
    await store.commit([{ op: 'put', record: record('b') }]);
    const doc = JSON.parse(readFileSync(store.path, 'utf8'));
    expect(doc).toMatchObject({ version: 1, revision: 2 });
    expect(doc.agents.map((r: AgentStateRecord) => r.agentId)).toEqual(['a', 'b']);
    expect(readdirSync(dir)).toEqual(['manager-state.json']);
  });

  it('refuses a corrupt file and never resets it', async () => {
    for (const text of [
      '{not json',
      '{"version":1,"revision":1,"agents":[{"agentId":"x"}]}',
      '{"version":2,"revision":1,"agents":[]}',
    ]) {
      const dir = freshDir();
      const first = new FileStateStore({ dir });
      await first.commit([{ op: 'put', record: record('a') }]);
      writeFileSync(first.path, text);
      const store = new FileStateStore({ dir });
      expect(await problemOf(() => store.load())).toBe('corrupt');
      expect(await problemOf(() => store.commit([{ op: 'put', record: record('b') }]))).toBe(
        'corrupt',
      );
      expect(readFileSync(first.path, 'utf8')).toBe(text);
    }
  });

  it('refuses a symbolic link, a file others can write, and a file over maxFileBytes', async () => {
    const dir = freshDir();
    const store = new FileStateStore({ dir });
    await store.commit([{ op: 'put', record: record('a') }]);
    const target = join(root, `elsewhere-${n}.json`);
    writeFileSync(target, readFileSync(store.path));
    rmSync(store.path);
    symlinkSync(target, store.path);
    expect(await problemOf(() => new FileStateStore({ dir }).load())).toBe('unsafe-file');
    rmSync(store.path);
    writeFileSync(store.path, readFileSync(target), { mode: 0o666 });
    chmodSync(store.path, 0o666);
    expect(await problemOf(() => new FileStateStore({ dir }).load())).toBe('unsafe-file');
    chmodSync(store.path, 0o600);
    expect(
      await problemOf(() =>
        new FileStateStore({ dir, maxFileBytes: 1024 }).commit(
          Array.from({ length: 10 }, (_, i) => ({
            op: 'put' as const,
            record: record(`agent-${i}`),
          })),
        ),
      ),
    ).toBe('too-large');
    // Nothing was written by the refused commit.
    expect((await new FileStateStore({ dir }).load()).map((r) => r.agentId)).toEqual(['a']);
  });

  it('refuses to overwrite a file another writer changed', async () => {
    const dir = freshDir();
    const one = new FileStateStore({ dir });
    const two = new FileStateStore({ dir });
    await one.commit([{ op: 'put', record: record('a') }]);
    await two.commit([{ op: 'put', record: record('b') }]);
    expect(await problemOf(() => one.commit([{ op: 'put', record: record('c') }]))).toBe(
      'conflict',
    );
    expect((await new FileStateStore({ dir }).load()).map((r) => r.agentId).sort()).toEqual([
      'a',
      'b',
    ]);
  });

  it('sweeps temp files a killed writer left, on load', async () => {
    const dir = freshDir();
    const store = new FileStateStore({ dir });
    await store.commit([{ op: 'put', record: record('a') }]);
    writeFileSync(join(dir, '.manager-state.json.abcdef.tmp'), '{');
    await new FileStateStore({ dir }).load();
    expect(readdirSync(dir)).toEqual(['manager-state.json']);
  });

  it('takes strict options', () => {
    expect(() => new FileStateStore({ dir: root, extra: 1 } as never)).toThrow(
      /Unknown FileStateStore option/,
    );
    expect(() => new FileStateStore({ dir: '' })).toThrow(/dir/);
    expect(() => new FileStateStore({ dir: root, name: '../x' })).toThrow(/name/);
    expect(() => new FileStateStore({ dir: root, maxFileBytes: 10 })).toThrow(/maxFileBytes/);
  });
});
