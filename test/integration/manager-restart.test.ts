/**
 * The host restart, for real: a host process (ScalerManager, MachineLedger in a
 * temp dir, FileStateStore, agents as detached child processes) is SIGKILLed
 * with agents busy, draining and mid-spawn; a new host process recovers. No
 * agent process runs untracked, the pool holds exactly one row per running
 * agent (now the new process's), every bound job is still bound, the draining
 * agent still drains, and after shutdown nothing runs and nothing is held. Run
 * with the FileStateStore and with the NatsStateStore on a real nats-server.
 */
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { type NatsServer, startNatsServer } from '../helpers/nats-server.js';
import {
  type FixtureProcess,
  finishFixture,
  startFixture,
  stopFixture,
} from '../helpers/processes.js';
import { hasSystem } from '../helpers/system.js';

const started: FixtureProcess[] = [];
const dirs: string[] = [];

afterEach(async () => {
  for (const fixture of started.splice(0)) await stopFixture(fixture);
  for (const dir of dirs.splice(0)) {
    // Kill any agent process a failed run left behind.
    const agents = join(dir, 'agents');
    for (const name of safeList(agents)) {
      try {
        process.kill(Number(readFileSync(join(agents, name), 'utf8')), 'SIGKILL');
      } catch {
        // Gone.
      }
    }
    rmSync(dir, { recursive: true, force: true });
  }
});

function safeList(dir: string): string[] {
  try {
    return readdirSync(dir).filter((name) => name.endsWith('.pid'));
  } catch {
    return [];
  }
}

function host(config: Record<string, unknown>): FixtureProcess {
  const fixture = startFixture('restart-host.ts', [JSON.stringify(config)]);
  started.push(fixture);
  return fixture;
}

async function crashAndRecover(extra: Record<string, unknown>): Promise<void> {
  const root = mkdtempSync(join(tmpdir(), 'sp-restart-'));
  dirs.push(root);
  const base = {
    ledgerDir: join(root, 'ledger'),
    stateDir: join(root, 'state'),
    agentsDir: join(root, 'agents'),
  };
  mkdirSync(base.agentsDir);

  const first = host({ ...base, ...extra, phase: 'crash' });
  const ready = await first.waitFor('ready', 20_000);
  const spawned = ready.spawned as Record<string, string>;
  expect((ready.rows as unknown[]).length).toBe(4);
  first.child.kill('SIGKILL');
  expect((await first.exited).signal).toBe('SIGKILL');
  // Three agent processes outlive the host (busy, draining, mid-spawn); one spawn never started.
  expect(safeList(base.agentsDir)).toHaveLength(3);

  const second = host({ ...base, ...extra, phase: 'recover' });
  const recovered = await second.waitFor('recovered', 20_000);
  const spawning = (recovered.listed as string[]).find(
    (id) => id !== spawned['job-busy'] && id !== spawned['job-drain'],
  )!;
  expect((recovered.recovered as string[]).sort()).toEqual(
    [spawned['job-busy'], spawned['job-drain'], spawning].sort(),
  );
  // The spawn that never started an agent is released.
  expect(recovered.released as string[]).toHaveLength(1);
  // 0 orphans: every agent process that runs is tracked again.
  expect((recovered.listed as string[]).sort()).toEqual((recovered.recovered as string[]).sort());
  // Every row taken over in place (same agent id, the new pid), none left behind, none twice.
  expect((recovered.poolRows as { how: string }[]).map((r) => r.how)).toEqual([
    'adopted',
    'adopted',
    'adopted',
  ]);
  const rows = recovered.rows as { agentId: string; pid: number }[];
  expect(rows.map((r) => r.agentId).sort()).toEqual((recovered.recovered as string[]).sort());
  expect(rows.every((r) => r.pid === second.child.pid)).toBe(true);
  // Every bound job still bound: the mid-spawn agent's pending binding and the busy agent's job.
  expect(recovered.alreadySpawning).toMatchObject({
    kind: 'already-spawning',
    agentId: spawning,
  });
  const bindings = recovered.bindings as Record<string, string | undefined>;
  expect(bindings[spawned['job-busy']!]).toBe('job-busy');
  expect(bindings[spawning]).toBe('job-spawning');
  // The draining agent still drains (and is bound to nothing new).
  expect(recovered.draining).toEqual([spawned['job-drain']]);
  expect(bindings[spawned['job-drain']!]).toBeUndefined();

  const after = await second.waitFor('after', 20_000);
  // Counted once: 3 rows + 1 new fill the 4-core pool; once the drained agent is gone, one fits.
  expect(after.fourth).toMatchObject({ kind: 'spawned' });
  expect(after.full).toMatchObject({ kind: 'at-capacity', limit: { limit: 'pool-cap' } });
  expect(after.fits).toMatchObject({ kind: 'spawned' });
  expect(after.listed as string[]).not.toContain(spawned['job-drain']);
  expect((after.rows as unknown[]).length).toBe(4);

  const done = await finishFixture(second);
  expect(done.rows).toEqual([]);
  expect(done.listed).toEqual([]);
  expect(done.stored).toBe(0);
}

const TITLE =
  'recovers busy, draining and mid-spawn agents: 0 orphans, 0 leaked or double-counted rows, every job still bound';

describe('ScalerManager survives its host being SIGKILLed (FileStateStore, MachineLedger)', () => {
  it(TITLE, () => crashAndRecover({}), 30_000);
});

const natsOk = hasSystem(['nats-server'], 'the restart test with NatsStateStore');

describe.runIf(natsOk)(
  'ScalerManager survives its host being SIGKILLed (NatsStateStore on a real nats-server, MachineLedger)',
  () => {
    let server: NatsServer;
    beforeAll(async () => {
      server = await startNatsServer();
    });
    afterAll(async () => {
      await server?.stop();
    });
    it(TITLE, () => crashAndRecover({ natsUrl: server.url }), 30_000);
  },
);
