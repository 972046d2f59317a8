/**
 * All or nothing across two pools, for real: a host process whose agents
 * reserve in two pools on two MachineLedgers (temp dirs) is SIGKILLed after the
 * first pool granted and before the second answered (a test hook in the worker
 * blocks the second ledger's reserve). A restarted host's recovery leaves no
 * row behind in either pool, whether the agent's record reached the state
 * store or not, and the pools then grant a new agent the same devices.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import {
  type FixtureProcess,
  finishFixture,
  startFixture,
  stopFixture,
} from '../helpers/processes.js';

const started: FixtureProcess[] = [];
const dirs: string[] = [];

afterEach(async () => {
  for (const fixture of started.splice(0)) await stopFixture(fixture);
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

function host(config: Record<string, unknown>): FixtureProcess {
  const fixture = startFixture('two-pool-host.ts', [JSON.stringify(config)]);
  started.push(fixture);
  return fixture;
}

async function killBetweenGrants(stored: boolean): Promise<void> {
  const root = mkdtempSync(join(tmpdir(), 'sp-two-pools-'));
  dirs.push(root);
  const base = {
    gpuDir: join(root, 'gpu-ledger'),
    localDir: join(root, 'local-ledger'),
    stateDir: join(root, 'state'),
    stored,
  };
  const first = host({ ...base, phase: 'crash' });
  const between = await first.waitFor('between-grants', 20_000);
  // The first pool (gpu-box, by name) granted: its row is written, with device ids.
  expect(between.pool).toBe('local');
  expect(between.gpuRows).toEqual([
    { agentId: between.agentId, pid: first.child.pid, devices: { 'nvidia.com/gpu': ['0', '1'] } },
  ]);
  first.child.kill('SIGKILL');
  expect((await first.exited).signal).toBe('SIGKILL');

  const second = host({ ...base, phase: 'recover' });
  const recovered = await second.waitFor('recovered', 20_000);
  // Nothing runs, so nothing is recovered; with a stored record, the agent is released.
  expect(recovered.recovered).toEqual([]);
  expect(recovered.released).toEqual(stored ? [between.agentId] : []);
  expect(recovered.gpuRows).toEqual([]);
  expect(recovered.localRows).toEqual([]);

  // The dead host's devices are free again: a new agent gets them, in both pools.
  const after = await second.waitFor('after', 20_000);
  expect(after.next).toMatchObject({ kind: 'spawned' });
  const id = (after.next as { agentId: string }).agentId;
  expect(after.gpuRows).toEqual([
    { agentId: id, pid: second.child.pid, devices: { 'nvidia.com/gpu': ['0', '1'] } },
  ]);
  expect(after.localRows).toEqual([{ agentId: id, pid: second.child.pid }]);

  const done = await finishFixture(second);
  expect(done.gpuRows).toEqual([]);
  expect(done.localRows).toEqual([]);
  expect(done.stored).toBe(0);
}

describe('a host SIGKILLed between the grants of its two pools', () => {
  it(
    'leaves no row in either pool once a restarted host recovered (the record was stored)',
    () => killBetweenGrants(true),
    40_000,
  );
  it(
    'leaves no row in either pool once a restarted host recovered (no record was stored)',
    () => killBetweenGrants(false),
    40_000,
  );
});
