/**
 * Helpers of the process backend's tests: whether a pid runs (as `/proc` says,
 * a zombie is not running), waiting for a condition, and the scenario both the
 * plain and the wrapped command go through: a ScalerManager with a real
 * MachineLedger, a FileStateStore and a ProcessBackend
 * (test/fixtures/process-manager-host.ts) starts 4 agents and is SIGKILLed; a
 * new controller recovers them, destroys one (its group, grandchild included),
 * and hears the others exit on their own with their codes.
 */
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect } from 'vitest';
import { type FixtureProcess, startFixture } from './processes.js';

/** Whether a pid is alive and not a zombie. */
export function alive(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const state = stat.slice(stat.lastIndexOf(')') + 2).split(' ')[0];
    return state !== 'Z' && state !== 'X';
  } catch {
    return false;
  }
}

/** The pids of the live (not zombie) processes of process group `pgid`. */
export function groupMembers(pgid: number): number[] {
  return readdirSync('/proc')
    .filter((name) => /^\d+$/.test(name))
    .filter((name) => {
      try {
        const stat = readFileSync(`/proc/${name}/stat`, 'utf8');
        const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
        return Number(fields[2]) === pgid && fields[0] !== 'Z' && fields[0] !== 'X';
      } catch {
        return false;
      }
    })
    .map(Number);
}

/** Resolve once `condition()` holds; reject naming `what` (a string, or a function giving it then) after `ms`. */
export async function until(
  what: string | (() => string),
  condition: () => boolean,
  ms = 30_000,
): Promise<void> {
  for (let waited = 0; !condition(); waited += 50) {
    if (waited > ms) {
      throw new Error(
        `timed out after ${ms} ms waiting for ${typeof what === 'function' ? what() : what}`,
      );
    }
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** The trimmed content of `path` once it has some. */
export async function readWhenWritten(path: string): Promise<string> {
  const read = () => {
    try {
      return readFileSync(path, 'utf8').trim();
    } catch {
      return '';
    }
  };
  await until(path, () => read() !== '');
  return read();
}

/** What {@link restartThroughManager} saw. */
export interface ManagerRestartRun {
  /** The backend's state directory (records, logs, the agents' marker files). */
  agentsDir: string;
  /** The 4 agents, sorted. */
  agents: string[];
  /** The agent the new controller destroyed. */
  victim: string;
  /** The others, in the order they were told to exit (with codes 10, 11, 12). */
  others: string[];
}

/**
 * The SIGKILLed-controller scenario, asserting as it goes: 4 agents started,
 * all recovered by the new controller (`recoverState()`) and listed by its new
 * backend; the victim's group (wrapper, agent and a grandchild ignoring
 * SIGTERM) gone after `destroy`; the others' own exits reported by `onExit`
 * with their codes and `adopted: true`. With `wrapper`, every agent runs
 * through that command (test/fixtures/fake-docker.mjs).
 */
export async function restartThroughManager(
  root: string,
  fixtures: FixtureProcess[],
  wrapper?: string,
): Promise<ManagerRestartRun> {
  const agentsDir = join(root, 'agents');
  const host = (phase: 'fill' | 'restart') =>
    startFixture('process-manager-host.ts', [
      JSON.stringify({
        phase,
        ledgerDir: join(root, 'ledger'),
        stateDir: join(root, 'state'),
        agentsDir,
        ...(wrapper ? { wrapper } : {}),
      }),
    ]);
  const first = host('fill');
  fixtures.push(first);
  const ready = await first.waitFor('ready', 60_000);
  const agents = (ready.agents as string[]).sort();
  expect(agents).toHaveLength(4);
  first.child.kill('SIGKILL');
  await first.exited;

  const second = host('restart');
  fixtures.push(second);
  const recovered = await second.waitFor('recovered', 60_000);
  expect((recovered.recovered as string[]).sort()).toEqual(agents);
  expect((recovered.listed as string[]).sort()).toEqual(agents);

  // The restarted controller destroys one agent: its group, grandchild included, is gone.
  const [victim, ...others] = agents as [string, ...string[]];
  const pid = (
    JSON.parse(readFileSync(join(agentsDir, `${victim}.json`), 'utf8')) as { pid: number }
  ).pid;
  const grandchild = Number(await readWhenWritten(join(agentsDir, `${victim}.grandchild`)));
  expect(alive(pid) && alive(grandchild)).toBe(true);
  expect(groupMembers(pid)).toContain(grandchild);
  writeFileSync(join(agentsDir, 'destroy'), victim);
  await second.waitFor('destroyed', 60_000);
  expect(alive(pid)).toBe(false);
  expect(alive(grandchild)).toBe(false);
  expect(groupMembers(pid)).toEqual([]);

  for (const [i, agentId] of others.entries()) {
    writeFileSync(join(agentsDir, `${agentId}.stop`), String(10 + i));
  }
  await until(
    'three exit events',
    () => second.events.filter((e) => e.event === 'exit').length >= 3,
  );
  const exits = second.events
    .filter((e) => e.event === 'exit')
    .map((e) => [e.agentId, e.exitCode, e.adopted])
    .sort();
  expect(exits).toEqual(others.map((agentId, i) => [agentId, 10 + i, true]));
  return { agentsDir, agents, victim, others };
}
