/**
 * The process backend with a command that wraps the agent, as `docker run`
 * does: test/fixtures/fake-docker.mjs parses `--name {agentId} --cpus {cpus}
 * --memory {memoryBytes}`, `-e NAME` and an image, checks that its env agrees
 * with its argv, runs the agent in the foreground with only the env the `-e`
 * options pass, and exits with the agent's code. The SIGKILLed-controller
 * scenario runs through it unchanged, and the argv and env each agent got are
 * read back from its log.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { SpawnRequest } from 'scaler-primitives/manager';
import { type ProcessAgentExit, ProcessBackend } from 'scaler-primitives/process';
import { afterEach, describe, expect, it } from 'vitest';
import { restartThroughManager, until } from '../helpers/process-agents.js';
import { type FixtureProcess, stopFixture } from '../helpers/processes.js';

const fakeDocker = join(import.meta.dirname, '..', 'fixtures', 'fake-docker.mjs');
const dirs: string[] = [];
const backends: ProcessBackend[] = [];
const fixtures: FixtureProcess[] = [];

function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'process-wrapped-'));
  dirs.push(dir);
  return dir;
}

afterEach(async () => {
  for (const fixture of fixtures.splice(0)) await stopFixture(fixture);
  for (const made of backends.splice(0)) await made.shutdown().catch(() => {});
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

/** The line fake-docker printed to the agent's log: what it parsed from its argv and env. */
function dockerLine(agentsDir: string, agentId: string): Record<string, unknown> {
  const log = readFileSync(join(agentsDir, `${agentId}.log`), 'utf8');
  const line = log.split('\n').find((l) => l.startsWith('fake-docker '));
  expect(line, `${agentId}.log:\n${log}`).toBeDefined();
  return JSON.parse(line!.slice('fake-docker '.length)) as Record<string, unknown>;
}

describe('ProcessBackend through a wrapping command (a docker run stand-in)', () => {
  it('a SIGKILLed controller restarts, recovers the 4 wrapped agents, destroys one group and hears the others exit with their codes', async () => {
    const root = tempDir();
    const run = await restartThroughManager(root, fixtures, fakeDocker);
    for (const agentId of run.agents) {
      const docker = dockerLine(run.agentsDir, agentId);
      expect(docker).toMatchObject({
        rm: true,
        name: agentId,
        cpus: '1',
        memory: String(256 * 2 ** 20),
        env: ['SCALER_AGENT_ID', 'SCALER_LEASE'],
        image: 'scaler-test/agent:1',
        scaler: 'proc',
        containerEnv: ['PATH', 'SCALER_AGENT_ID', 'SCALER_LEASE'],
      });
      expect((docker.command as string[]).slice(0, 2)).toEqual(['/bin/sh', '-c']);
      expect((docker.command as string[]).slice(-2)).toEqual(['agent', agentId]);
      expect(docker.jobId).toMatch(/^job-\d$/);
      // Inside the "container": the id passed by -e, and nothing the -e options did not name.
      const log = readFileSync(join(run.agentsDir, `${agentId}.log`), 'utf8');
      expect(log).toContain(
        `agent ${agentId} sees SCALER_AGENT_ID=${agentId} SCALER_SCALER=unset\n`,
      );
    }
  }, 180_000);

  it('the stand-in refuses an env that disagrees with its argv, and the backend reports its exit code', async () => {
    const dir = tempDir();
    const exits: ProcessAgentExit[] = [];
    const backend = new ProcessBackend({
      dir,
      // --cpus is written out as 3 while the backend's SCALER_CPUS says 2.
      command: [
        fakeDocker,
        'run',
        '--name',
        '{agentId}',
        '--cpus',
        '3',
        '--memory',
        '{memoryBytes}',
        'scaler-test/agent:1',
        'sleep',
        '300',
      ],
      passLeases: false,
      onExit: (exit) => exits.push(exit),
    });
    backends.push(backend);
    const request: SpawnRequest = {
      agentId: 'w1',
      scaler: 'proc',
      warm: true,
      labels: ['proc'],
      labelSetIndex: 0,
      mandatoryLabels: [],
      resources: { requests: { cpus: 1, memBytes: 2 ** 30 }, limits: { cpus: 2 } },
      emit: () => {},
    };
    await backend.spawn(request);
    await until('the exit report', () => exits.length > 0);
    expect(exits).toEqual([
      { agentId: 'w1', scaler: 'proc', exitCode: 125, signal: null, adopted: false },
    ]);
    expect(readFileSync(join(dir, 'w1.log'), 'utf8')).toMatch(
      /^fake-docker: env disagrees with the argv or is missing: SCALER_CPUS=2 SCALER_LEASE=undefined\n$/,
    );
  }, 60_000);
});
