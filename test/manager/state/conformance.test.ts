/**
 * stateStoreConformance against every store we ship (memory, file on a temp
 * dir) and against deliberately broken stores, each of which must fail a check.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  type AgentStateRecord,
  FileStateStore,
  MemoryStateStore,
  type StateChange,
  type StateStore,
} from 'scaler-primitives/manager';
import { type MakeStateStore, stateStoreConformance } from 'scaler-primitives/testing';
import { afterAll, describe, expect, it } from 'vitest';

function memoryMaker(): MakeStateStore {
  const stores = new Map<string, MemoryStateStore>();
  return ({ key, fresh }) => {
    if (fresh || !stores.has(key)) stores.set(key, new MemoryStateStore());
    return stores.get(key)!;
  };
}

describe('stateStoreConformance: MemoryStateStore', () => {
  for (const check of stateStoreConformance(memoryMaker())) it(check.name, check.run);
});

describe('stateStoreConformance: FileStateStore (temp dir, fsync on)', () => {
  const root = mkdtempSync(join(tmpdir(), 'sp-state-conf-'));
  afterAll(() => rmSync(root, { recursive: true, force: true }));
  for (const check of stateStoreConformance(
    ({ key }) => new FileStateStore({ dir: join(root, key) }),
  )) {
    it(check.name, check.run);
  }
});

// Broken on purpose: each must fail at least one check.
class ForgetfulStore implements StateStore {
  readonly #inner = new MemoryStateStore();
  load(): Promise<AgentStateRecord[]> {
    return this.#inner.load();
  }
  // Applies only the first change of a batch.
  commit(changes: readonly StateChange[]): Promise<void> {
    return this.#inner.commit(changes.slice(0, 1));
  }
}

class TrustingStore implements StateStore {
  readonly #records = new Map<string, AgentStateRecord>();
  async load(): Promise<AgentStateRecord[]> {
    return [...this.#records.values()];
  }
  // Validates nothing, and hands out its own objects.
  async commit(changes: readonly StateChange[]): Promise<void> {
    for (const change of changes) {
      if (change.op === 'put') this.#records.set(change.record.agentId, change.record);
      else this.#records.delete(change.agentId);
    }
  }
}

describe('stateStoreConformance catches broken stores', () => {
  for (const [name, make] of [
    ['applies only the first change of a commit', () => new ForgetfulStore()],
    ['validates nothing and shares its objects', () => new TrustingStore()],
  ] as const) {
    it(`a store that ${name} fails at least one check`, async () => {
      const stores = new Map<string, StateStore>();
      const failures: string[] = [];
      for (const check of stateStoreConformance(({ key, fresh }) => {
        if (fresh || !stores.has(key)) stores.set(key, make());
        return stores.get(key)!;
      })) {
        await check.run().catch(() => failures.push(check.name));
      }
      expect(failures.length).toBeGreaterThan(0);
    });
  }
});
