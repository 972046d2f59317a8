import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { SpawnRequest } from 'scaler-primitives/manager';
import { type ProcessAgentExit, ProcessBackend } from 'scaler-primitives/process';
import { scalerBackendConformance } from 'scaler-primitives/testing';
import { afterEach, describe, expect, it } from 'vitest';
import { alive, restartThroughManager, until } from '../helpers/process-agents.js';
import { type FixtureProcess, startFixture, stopFixture } from '../helpers/processes.js';

const dirs: string[] = [];
const backends: ProcessBackend[] = [];
const fixtures: FixtureProcess[] = [];

function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'process-backend-'));
  dirs.push(dir);
  return dir;
}

function backend(options: ConstructorParameters<typeof ProcessBackend>[0]): ProcessBackend {
  const made = new ProcessBackend(options);
  backends.push(made);
  return made;
}

afterEach(async () => {
  for (const fixture of fixtures.splice(0)) await stopFixture(fixture);
  for (const made of backends.splice(0)) await made.shutdown().catch(() => {});
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

function request(agentId: string, extra: Partial<SpawnRequest> = {}): SpawnRequest {
  return {
    agentId,
    scaler: 'proc',
    jobId: `job-${agentId}`,
    warm: false,
    labels: ['proc', 'linux'],
    labelSetIndex: 0,
    mandatoryLabels: [],
    resources: { requests: { cpus: 1, memBytes: 2 ** 30 }, limits: { cpus: 2, memBytes: 2 ** 31 } },
    emit: () => {},
    ...extra,
  };
}

describe('ProcessBackend keeps the ScalerBackend contract', () => {
  for (const check of scalerBackendConformance(() =>
    backend({ dir: tempDir(), command: ['sleep', '300'], graceMs: 2000 }),
  )) {
    it(check.name, check.run, 60_000);
  }
});

describe('ProcessBackend across a controller restart', () => {
  it('a new instance over the same directory lists the 4 agents of a SIGKILLed controller; destroy ends one group, grandchild included', async () => {
    const dir = tempDir();
    // Each agent starts a grandchild in its group and records its pid; both ignore SIGTERM,
    // so destroy must escalate to SIGKILL of the whole group. An agent exits on its own
    // with the code written to <id>.stop (ending its grandchild first).
    const script = `trap '' TERM; sleep 300 & g=$!; echo $g > "${dir}/$1.grandchild"; while [ ! -e "${dir}/$1.stop" ]; do sleep 0.1; done; kill -9 $g; exit $(cat "${dir}/$1.stop")`;
    const ids = ['a1', 'a2', 'a3', 'a4'];
    process.env.AGENT_SCRIPT = script; // the fixture inherits this process's env
    const controller = startFixture('process-controller.ts', [dir, ids.join(',')]);
    fixtures.push(controller);
    const started = await controller.waitFor('started', 60_000);
    expect((started.ids as string[]).sort()).toEqual(ids);
    controller.child.kill('SIGKILL');
    await controller.exited;

    const exits: ProcessAgentExit[] = [];
    const next = backend({
      dir,
      command: ['false'],
      graceMs: 300,
      watchIntervalMs: 50,
      onExit: (exit) => exits.push(exit),
    });
    expect((await next.list()).sort()).toEqual(ids);

    const record = JSON.parse(readFileSync(join(dir, 'a2.json'), 'utf8')) as { pid: number };
    await until('the grandchild pid file', () => {
      try {
        return readFileSync(join(dir, 'a2.grandchild'), 'utf8').trim() !== '';
      } catch {
        return false;
      }
    });
    const grandchild = Number(readFileSync(join(dir, 'a2.grandchild'), 'utf8'));
    expect(alive(record.pid)).toBe(true);
    expect(alive(grandchild)).toBe(true);

    await next.destroy('a2');
    expect(alive(record.pid)).toBe(false);
    expect(alive(grandchild)).toBe(false);
    expect((await next.list()).sort()).toEqual(['a1', 'a3', 'a4']);
    await next.destroy('a2'); // idempotent
    expect(exits).toEqual([]); // a destroyed agent is not reported as exiting on its own

    // The others exit on their own: the new instance, which did not start them, reports
    // each with its exit code, without being asked.
    writeFileSync(join(dir, 'a3.stop'), '3');
    writeFileSync(join(dir, 'a4.stop'), '44');
    await until('two exit reports', () => exits.length >= 2);
    expect(exits.sort((x, y) => x.agentId.localeCompare(y.agentId))).toEqual([
      { agentId: 'a3', scaler: 'proc', exitCode: 3, signal: null, adopted: true },
      { agentId: 'a4', scaler: 'proc', exitCode: 44, signal: null, adopted: true },
    ]);
    expect(await next.list()).toEqual(['a1']);
  }, 90_000);

  it('a record whose pid is alive with another start time is not an agent, and destroy never signals it', async () => {
    const dir = tempDir();
    // Its own group leader, so a wrong signal to the group of `pid` would reach it.
    const stranger = spawn('sleep', ['300'], { stdio: 'ignore', detached: true });
    try {
      const pid = stranger.pid!;
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      const startTime = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19]);
      const first = backend({ dir, command: ['sleep', '300'] });
      await first.spawn(request('real'));
      const bootId = (
        JSON.parse(readFileSync(join(dir, 'real.json'), 'utf8')) as { bootId: string }
      ).bootId;
      const record = {
        version: 1,
        agentId: 'stale',
        scaler: 'proc',
        pid,
        startTime: startTime + 1,
        bootId,
        command: ['sleep', '300'],
        startedAt: 0,
      };
      writeFileSync(join(dir, 'stale.json'), JSON.stringify(record), { mode: 0o600 });
      // The same record with the right start time would be listed (so the test can fail).
      writeFileSync(
        join(dir, 'same.json'),
        JSON.stringify({ ...record, agentId: 'same', startTime }),
        {
          mode: 0o600,
        },
      );
      const exits: ProcessAgentExit[] = [];
      const second = backend({ dir, command: ['sleep', '300'], onExit: (e) => exits.push(e) });
      expect((await second.list()).sort()).toEqual(['real', 'same']);
      await second.destroy('stale');
      // Right pid and start time, but recorded on another boot: not ours either (written
      // after list(), which would forget it, so that destroy meets it).
      writeFileSync(
        join(dir, 'otherboot.json'),
        JSON.stringify({ ...record, agentId: 'otherboot', startTime, bootId: 'another-boot' }),
        { mode: 0o600 },
      );
      await second.destroy('otherboot');
      expect(alive(pid)).toBe(true);
      expect(exits.map((e) => e.agentId)).toEqual(['stale']);
      expect(exits[0]).toMatchObject({ adopted: true, exitCode: null });
      // Forget 'same' without killing the test's own process.
      rmSync(join(dir, 'same.json'));
    } finally {
      stranger.kill('SIGKILL');
    }
  }, 60_000);
});

describe('ProcessBackend runs the command it is given', () => {
  it('fills argv placeholders and sets the documented env (devices, lease)', async () => {
    const dir = tempDir();
    const out = join(dir, 'out');
    const made = backend({
      dir,
      command: [
        '/bin/sh',
        '-c',
        'printf "%s|%s|%s|%s|%s|%s|%s|%s" "$1" "$2" "$3" "$4" "$CUDA_VISIBLE_DEVICES" "$SCALER_AGENT_ID" "$EXTRA" "$SCALER_LEASE" > "$OUT"; sleep 300',
        'wrapper',
        '--id={agentId}',
        '--cpus={cpus}',
        '--memory={memoryBytes}',
        '--gpus={gpus}',
      ],
      env: { OUT: out, EXTRA: 'x y' },
    });
    await made.spawn(
      request('w1', {
        devices: { 'nvidia.com/gpu': ['1', '3'] },
        leases: [
          { location: { kind: 'file', path: '/run/lease' }, leaseMs: 10_000, marginMs: 2_000 },
        ],
      }),
    );
    await until('the wrapper output', () => {
      try {
        return readFileSync(out, 'utf8').includes('|');
      } catch {
        return false;
      }
    });
    const [id, cpus, mem, gpus, cuda, envId, extra, lease] = readFileSync(out, 'utf8').split('|');
    expect([id, cpus, mem, gpus, cuda, envId, extra]).toEqual([
      '--id=w1',
      '--cpus=2',
      `--memory=${2 ** 31}`,
      '--gpus=1,3',
      '1,3',
      'w1',
      'x y',
    ]);
    expect(JSON.parse(lease!)).toMatchObject({ location: { kind: 'file', path: '/run/lease' } });
  }, 60_000);

  it('chooses the command by scaler, and leaves out the lease and the controller env when told', async () => {
    const dir = tempDir();
    const out = join(dir, 'out');
    process.env.PROCESS_BACKEND_TEST_MARK = 'from-controller';
    try {
      const made = backend({
        dir,
        command: {
          proc: [
            '/bin/sh',
            '-c',
            // biome-ignore lint/suspicious/noTemplateCurlyInString: shell parameter expansion
            'printf "%s|%s|%s" "$1" "${SCALER_LEASE-unset}" "${PROCESS_BACKEND_TEST_MARK-unset}" > "$OUT"; sleep 300',
            'wrapper',
            '{scaler}',
          ],
        },
        env: { OUT: out, PATH: process.env.PATH ?? '/usr/bin:/bin' },
        passLeases: false,
        extendEnv: false,
      });
      const leases = [
        {
          location: { kind: 'file' as const, path: '/run/lease' },
          leaseMs: 10_000,
          marginMs: 2_000,
        },
      ];
      await made.spawn(request('s1', { leases }));
      await until('the wrapper output', () => {
        try {
          return readFileSync(out, 'utf8').includes('|');
        } catch {
          return false;
        }
      });
      expect(readFileSync(out, 'utf8')).toBe('proc|unset|unset');
      await expect(made.spawn(request('s2', { scaler: 'gpu' }))).rejects.toThrow(
        /no command for scaler `gpu`/,
      );
    } finally {
      delete process.env.PROCESS_BACKEND_TEST_MARK;
    }
  }, 60_000);

  it('reports an agent that exits on its own with its exit code, and forgets it', async () => {
    const dir = tempDir();
    const exits: ProcessAgentExit[] = [];
    const made = backend({
      dir,
      command: ['/bin/sh', '-c', 'echo hello from $SCALER_AGENT_ID; exit 7'],
      onExit: (exit) => exits.push(exit),
    });
    await made.spawn(request('e1'));
    await until('the exit report', () => exits.length > 0);
    expect(exits).toEqual([
      { agentId: 'e1', scaler: 'proc', exitCode: 7, signal: null, adopted: false },
    ]);
    expect(await made.list()).toEqual([]);
    expect(readFileSync(join(dir, 'e1.log'), 'utf8')).toBe('hello from e1\n');
  }, 60_000);

  it('close() hands the directory over: agents keep running, their exits are left for the next instance', async () => {
    const dir = tempDir();
    const go = join(dir, 'go');
    const command = (r: SpawnRequest) =>
      r.agentId === 'short'
        ? ['/bin/sh', '-c', `while [ ! -e ${go} ]; do sleep 0.05; done; exit 7`]
        : ['sleep', '300'];
    const firstExits: ProcessAgentExit[] = [];
    const first = backend({
      dir,
      command,
      watchIntervalMs: 50,
      onExit: (exit) => firstExits.push(exit),
    });
    await first.spawn(request('long'));
    const short = await first.spawn(request('short'));
    first.close();
    first.close();
    await expect(first.spawn(request('third'))).rejects.toThrow(/is closed; create a new one/);
    writeFileSync(go, '');
    const pid = (short as { context: { pid: number } }).context.pid;
    await until('the short agent to exit', () => !alive(pid));
    // Ten watch intervals and the child's exit handler: a closed instance reports nothing.
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(firstExits).toEqual([]);
    expect(await first.list()).toEqual(['long']);
    expect(firstExits).toEqual([]);

    const nextExits: ProcessAgentExit[] = [];
    const next = backend({ dir, command, onExit: (exit) => nextExits.push(exit) });
    expect(await next.list()).toEqual(['long']);
    expect(nextExits).toEqual([
      { agentId: 'short', scaler: 'proc', exitCode: 7, signal: null, adopted: true },
    ]);
    await next.destroy('long');
    expect(await next.list()).toEqual([]);
  }, 60_000);

  it('caps the log file', async () => {
    const dir = tempDir();
    const made = backend({
      dir,
      command: ['/bin/sh', '-c', 'head -c 300000 /dev/zero | tr "\\0" x; sleep 300'],
      maxLogBytes: 4096,
      watchIntervalMs: 20,
    });
    await made.spawn(request('l1'));
    await until('the log rotated', () => {
      try {
        return readFileSync(join(dir, 'l1.log.1'), 'utf8').length > 0;
      } catch {
        return false;
      }
    });
    await until('the log capped', () => readFileSync(join(dir, 'l1.log'), 'utf8').length <= 4096);
    expect(readFileSync(join(dir, 'l1.log.1'), 'utf8').length).toBeLessThanOrEqual(4096);
  }, 60_000);

  it('refuses bad options and requests with errors naming the value', async () => {
    const dir = tempDir();
    expect(() => new ProcessBackend({ dir, command: 'sleep 300' as never })).toThrow(
      /`command` to be an argv array/,
    );
    expect(() => new ProcessBackend({ dir, command: ['sleep', '{cores}'] })).toThrow(
      /Unknown placeholder `\{cores\}`/,
    );
    expect(() => new ProcessBackend({ dir, command: ['sleep'], bogus: 1 } as never)).toThrow(
      /Unknown ProcessBackend option `bogus`/,
    );
    expect(() => new ProcessBackend({ dir, command: ['sleep'], graceMs: -1 })).toThrow(
      /`graceMs` to be a number from 0 to 2147483647, got `-1`/,
    );
    // Longer than a Node timer holds: setInterval would fire every millisecond.
    expect(() => new ProcessBackend({ dir, command: ['sleep'], watchIntervalMs: 2 ** 31 })).toThrow(
      /`watchIntervalMs` to be a number from 10 to 2147483647, got `2147483648`/,
    );
    const made = backend({ dir, command: ['sleep', '300'] });
    await expect(made.spawn(request('../escape'))).rejects.toThrow(/Expected `agentId`/);
    const missing = backend({ dir, command: ['/nonexistent/agent'] });
    await expect(missing.spawn(request('m1'))).rejects.toThrow(/Could not start agent m1/);
    expect(await missing.list()).toEqual([]);
  }, 60_000);
});

describe('ProcessBackend under a ScalerManager that is SIGKILLed and restarted', () => {
  it('the new controller recovers the 4 agents, destroys one with its grandchild, and hears the others exit with their codes', async () => {
    await restartThroughManager(tempDir(), fixtures);
  }, 120_000);
});
