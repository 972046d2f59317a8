/**
 * The `limits: 'systemd-run'` wrapper of the process backend. The rendered
 * prefix is pure logic, checked against agent-caps for several resources. This
 * machine runs no systemd, so systemd-run itself is never run here: the spawn
 * test puts a stand-in named `systemd-run` first in PATH that records its argv
 * and runs the command after `--`, which checks only what the backend runs.
 */
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { capsFromResources, renderDropIn } from 'scaler-primitives/agent-caps';
import { ProcessBackend } from 'scaler-primitives/process';
import type { ResourceLimits } from 'scaler-primitives/resources';
import { afterEach, describe, expect, it } from 'vitest';
import { limitsPrefix } from '../../src/process/limits.js';
import { readWhenWritten } from '../helpers/process-agents.js';

const GiB = 2 ** 30;
const dirs: string[] = [];
const backends: ProcessBackend[] = [];

afterEach(async () => {
  for (const made of backends.splice(0)) await made.shutdown().catch(() => {});
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

const cases: Array<[string, ResourceLimits, string[]]> = [
  ['4 cores and 8 GiB', { cpus: 4, memBytes: 8 * GiB }, ['CPUQuota=400%', 'MemoryMax=8G']],
  [
    '1.5 cores and 1.5 GiB',
    { cpus: 1.5, memBytes: 1.5 * GiB },
    ['CPUQuota=150%', 'MemoryMax=1536M'],
  ],
  ['a fraction of a percent rounds up', { cpus: 1.234 }, ['CPUQuota=124%']],
  ['0.1 cores, no float noise', { cpus: 0.1 }, ['CPUQuota=10%']],
  ['bytes that no unit divides', { memBytes: 1000 }, ['MemoryMax=1000']],
  [
    'a GPU count sets no property',
    { cpus: 2, extended: { 'nvidia.com/gpu': 1 } },
    ['CPUQuota=200%'],
  ],
  ['no limit set', {}, []],
];

describe("limits: 'systemd-run' renders the agent's limits as agent-caps does", () => {
  it.each(cases)('%s', (_, limits, expected) => {
    const prefix = limitsPrefix('systemd-run', limits);
    expect(prefix).toEqual([
      'systemd-run',
      '--scope',
      '--quiet',
      ...expected.flatMap((p) => ['-p', p]),
      '--',
    ]);
    // The same assignments as the drop-in agent-caps renders for these limits.
    const dropIn = renderDropIn(capsFromResources(limits), { section: 'Scope' });
    const properties = prefix.filter((_, i) => prefix[i - 1] === '-p');
    expect(properties.map((p) => `${p}\n`).join('')).toBe(dropIn.replace(/^\[Scope\]\n/, ''));
  });

  it('refuses another wrapper, naming the accepted one', () => {
    const dir = mkdtempSync(join(tmpdir(), 'process-limits-'));
    dirs.push(dir);
    expect(
      () => new ProcessBackend({ dir, command: ['sleep', '300'], limits: 'systemd' as never }),
    ).toThrow("Expected `limits` to be 'systemd-run' or undefined, got `systemd`");
  });

  it('the backend runs the prefix before the command (a systemd-run stand-in, not systemd)', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'process-limits-'));
    dirs.push(dir);
    const bin = join(dir, 'bin');
    const out = join(dir, 'argv');
    mkdirSync(bin);
    writeFileSync(
      join(bin, 'systemd-run'),
      `#!/bin/sh\nprintf '%s\\n' "$@" > "${out}.tmp" && mv "${out}.tmp" "${out}"\nwhile [ "$1" != -- ]; do shift; done\nshift\nexec "$@"\n`,
    );
    chmodSync(join(bin, 'systemd-run'), 0o755);
    const backend = new ProcessBackend({
      dir: join(dir, 'agents'),
      command: ['sleep', '300'],
      limits: 'systemd-run',
      env: { PATH: `${bin}:${process.env.PATH ?? '/usr/bin:/bin'}` },
    });
    backends.push(backend);
    await backend.spawn({
      agentId: 'c1',
      scaler: 'proc',
      warm: true,
      labels: ['proc'],
      labelSetIndex: 0,
      mandatoryLabels: [],
      resources: {
        requests: { cpus: 1, memBytes: GiB },
        limits: { cpus: 2.5, memBytes: 3 * GiB },
      },
      emit: () => {},
    });
    expect((await readWhenWritten(out)).split('\n')).toEqual([
      '--scope',
      '--quiet',
      '-p',
      'CPUQuota=250%',
      '-p',
      'MemoryMax=3G',
      '--',
      'sleep',
      '300',
    ]);
    const record = JSON.parse(readFileSync(join(dir, 'agents', 'c1.json'), 'utf8')) as {
      command: string[];
    };
    expect(record.command[0]).toBe('systemd-run');
    expect(await backend.list()).toEqual(['c1']);
  }, 60_000);
});
