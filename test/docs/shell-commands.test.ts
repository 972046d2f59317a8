/**
 * Every shell command shown in README.md and docs/*.md (```sh, ```bash and
 * ```console blocks; `$ ` lines in console blocks) runs here as written, with
 * `scaler-primitives` being this package's built CLI, in a temp directory
 * holding the files the docs name. Where a console block shows output, the
 * output must match (a `...` line stands for any lines, `...` in a line for
 * any text). `nft` commands run inside a throwaway network namespace. The
 * commands that cannot run are listed in NOT_RUN with the reason; a new
 * command in the docs fails this test until it runs or is listed.
 */
import { execFile } from 'node:child_process';
import {
  chmodSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { MachineLedger } from 'scaler-primitives/ledger';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureBuilt, root } from '../helpers/built-package.js';
import { Namespaces } from '../helpers/netns.js';
import { hasSystem } from '../helpers/system.js';

const exec = promisify(execFile);

/** Commands shown in the docs that this test does not run, and why. */
const NOT_RUN: Record<string, string> = {
  'npm install scaler-primitives':
    'reaches the registry; test/package-install.test.ts installs the packed tarball instead',
  'npm ci && npm run demo':
    'npm ci would reinstall this checkout under the running suite; the demo itself runs in test/manager/demo.test.ts',
  'npm ci && npm test': 'this suite is npm test; CI (.ci/run) runs exactly that command',
  'nats-server -js -sd /var/lib/nats':
    "a production server's store under /var/lib; test/helpers/nats-server.ts starts `nats-server -js -sd <temp dir>` for every NATS test",
  'nats-server -js -sd /var/lib/nats -n n1 --cluster_name ledger --cluster nats://0.0.0.0:6222 --routes nats://n1:6222,nats://n2:6222,nats://n3:6222':
    'a three-host cluster (hosts n1, n2, n3)',
  'scaler-primitives ledger top [--dir D] [--interval S] [--count N] [--json]':
    'a synopsis, not a command (it redraws until Ctrl-C); test/cli/ledger-top.test.ts runs each form',
};

// The config files docs/cli.md checks: they produce exactly the output it shows.
const SCALERS = {
  globalMaxAgents: 8,
  machinePools: { 'host-1': { maxCpu: 16, maxMemory: '32Gi' } },
  scalers: [
    {
      name: 'small',
      type: 'container',
      maxAgents: 4,
      machinePool: 'host-1',
      resourceCap: { maxCpu: 4, maxMemory: '8Gi' },
      labelSets: [{ labels: ['linux'] }, { labels: ['linux', 'x64'] }],
      warmPool: { size: 1, idleTimeoutSeconds: 300 },
    },
    {
      name: 'gpu',
      type: 'firecracker',
      maxAgents: 1,
      mandatoryLabels: ['gpu'],
      labelSets: [{ labels: ['linux', 'gpu'] }],
    },
  ],
};
const BROKEN = structuredClone(SCALERS);
BROKEN.scalers[0]!.machinePool = 'host-2';
// A mistyped key beside the cross-field problems: config check reports them all at once.
delete (BROKEN.scalers[0] as { maxAgents?: number }).maxAgents;
Object.assign(BROKEN.scalers[0]!, { maxAgnets: 4 });
BROKEN.scalers[1]!.labelSets = [{ labels: ['linux'] }];

// Ledger commands show rows of other processes (pids, times): their output is
// an illustration, checked by shape only.
const ILLUSTRATIVE = new Set([
  'scaler-primitives ledger ls',
  'scaler-primitives ledger usage --json',
]);

interface ShellCommand {
  page: string;
  line: number;
  command: string;
  /** The output a console block shows, when it shows one. */
  output?: string[];
}

function commandsOf(page: string, text: string): ShellCommand[] {
  const lines = text.split('\n');
  const found: ShellCommand[] = [];
  for (let i = 0; i < lines.length; i++) {
    const open = /^(\s*)```(sh|bash|shell|console)\s*$/.exec(lines[i]!);
    if (!open) continue;
    const body: string[] = [];
    let j = i + 1;
    const indent = open[1]!.length;
    for (; j < lines.length && !/^\s*```\s*$/.test(lines[j]!); j++) {
      body.push(lines[j]!.slice(indent).trimEnd());
    }
    const consoleBlock = open[2] === 'console';
    for (let k = 0; k < body.length; k++) {
      let line = body[k]!;
      if (consoleBlock) {
        if (!line.startsWith('$ ')) continue;
        line = line.slice(2);
      } else if (line === '' || line.startsWith('#')) {
        continue;
      }
      const at = i + 2 + k;
      while (line.endsWith('\\') && k + 1 < body.length) {
        line = `${line.slice(0, -1).trim()} ${body[++k]!.trim()}`;
      }
      const command = line.replace(/\s+#\s.*$/, '').trim();
      const entry: ShellCommand = { page, line: at, command };
      if (consoleBlock) {
        const output: string[] = [];
        while (k + 1 < body.length && !body[k + 1]!.startsWith('$ ')) output.push(body[++k]!);
        while (output.at(-1) === '') output.pop();
        if (output.length > 0) entry.output = output;
      }
      found.push(entry);
    }
    i = j;
  }
  return found;
}

// `<command>` and `<subcommand>` in the usage lines: one of each group.
const GROUPS = [
  ['ledger', 'ls'],
  ['config', 'check'],
  ['nft', 'plan'],
  ['caps', 'encode'],
];
function expand(command: string): string[] {
  if (command.includes('<subcommand>')) {
    return GROUPS.map(([c, s]) => command.replace('<command> <subcommand>', `${c} ${s}`));
  }
  if (command.includes('<command>')) return GROUPS.map(([c]) => command.replace('<command>', c!));
  return [command];
}

function matches(expected: string[], actual: string[]): boolean {
  const re = (line: string) =>
    new RegExp(
      `^${line
        .split('...')
        .map((p) => p.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'))
        .join('.*')}$`,
    );
  const go = (e: number, a: number): boolean => {
    if (e === expected.length) return a === actual.length;
    if (expected[e] === '...') {
      for (let skip = a; skip <= actual.length; skip++) if (go(e + 1, skip)) return true;
      return false;
    }
    return a < actual.length && re(expected[e]!).test(actual[a]!) && go(e + 1, a + 1);
  };
  return go(0, 0);
}

const pages = [
  'README.md',
  ...readdirSync(join(root, 'docs'))
    .filter((f) => f.endsWith('.md'))
    .sort()
    .map((f) => `docs/${f}`),
];
const commands = pages.flatMap((page) => commandsOf(page, readFileSync(join(root, page), 'utf8')));
const runnable = commands.filter((c) => !(c.command in NOT_RUN));
const withNft = runnable.filter((c) => /\|\s*nft\b/.test(c.command));
const plain = runnable.filter((c) => !withNft.includes(c));

let work = '';
let env: NodeJS.ProcessEnv = {};

beforeAll(async () => {
  await ensureBuilt();
  work = mkdtempSync(join(tmpdir(), 'sp-doc-commands-'));
  const bin = join(work, 'bin');
  mkdirSync(bin);
  // `scaler-primitives` (and `npx scaler-primitives`) is this package's built CLI.
  writeFileSync(
    join(bin, 'scaler-primitives'),
    `#!/bin/sh\nexec ${JSON.stringify(process.execPath)} ${JSON.stringify(join(root, 'dist', 'cli', 'index.js'))} "$@"\n`,
  );
  writeFileSync(join(bin, 'npx'), '#!/bin/sh\nexec "$@"\n');
  chmodSync(join(bin, 'scaler-primitives'), 0o755);
  chmodSync(join(bin, 'npx'), 0o755);
  writeFileSync(join(work, 'scalers.json'), JSON.stringify(SCALERS, null, 2));
  writeFileSync(join(work, 'broken.json'), JSON.stringify(BROKEN, null, 2));
  // A ledger with the pool and agent the docs name.
  const dir = join(work, 'ledger');
  mkdirSync(dir, { mode: 0o700 });
  const ledger = new MachineLedger({ instanceId: 'orchestrator-a', dir });
  ledger.registerPool('build-host', { maxCpu: 16, maxMemoryBytes: 64 * 2 ** 30 });
  await ledger.reserve('build-host', 'agent-7f3a', 2, 4 * 2 ** 30);
  await ledger.close();
  env = { ...process.env, PATH: `${bin}:${process.env.PATH}`, SCALER_PRIMITIVES_LEDGER_DIR: dir };
}, 300_000);

afterAll(() => {
  if (work) rmSync(work, { recursive: true, force: true });
});

async function sh(command: string, ns?: string) {
  const argv = ns ? ['ip', ['netns', 'exec', ns, 'sh', '-c', command]] : ['sh', ['-c', command]];
  try {
    const { stdout, stderr } = await exec(argv[0] as string, argv[1] as string[], {
      cwd: work,
      env,
    });
    return { code: 0, stdout, stderr };
  } catch (error) {
    const e = error as { code: number; stdout: string; stderr: string };
    return { code: e.code, stdout: e.stdout, stderr: e.stderr };
  }
}

describe('the shell commands in README.md and docs/*.md', () => {
  it('are found, and the ones not run are exactly the listed ones', () => {
    expect(commands.length).toBeGreaterThan(15);
    const shown = new Set(commands.map((c) => c.command));
    expect(Object.keys(NOT_RUN).filter((c) => !shown.has(c))).toEqual([]);
  });

  it.each(plain.map((c) => [`${c.page}:${c.line}`, c] as const))(
    '%s runs as shown',
    async (_where, shown) => {
      for (const command of expand(shown.command)) {
        const result = await sh(command);
        // A terminal shows both streams (a problem report goes to stderr).
        const lines = `${result.stdout}${result.stderr}`.replace(/\n$/, '').split('\n');
        if (shown.output !== undefined && !ILLUSTRATIVE.has(shown.command)) {
          // A documented problem report exits 1; everything else 0.
          expect(result.code, result.stderr).toBe(shown.output[0]!.includes('problem') ? 1 : 0);
          if (!matches(shown.output, lines)) expect(lines).toEqual(shown.output);
        } else if (shown.command.endsWith('--json')) {
          expect(result.code, result.stderr).toBe(0);
          const json = JSON.parse(result.stdout);
          if (shown.output !== undefined) {
            const keys = (v: unknown) => Object.keys((Array.isArray(v) ? v[0] : v) ?? {}).sort();
            expect(keys(json)).toEqual(keys(JSON.parse(shown.output.join('\n'))));
          }
        } else {
          expect(result.code, `${command}: ${result.stderr}`).toBe(0);
          // The columns are those shown (widths follow the rows).
          const words = (line: string | undefined) => (line ?? '').trim().split(/\s+/);
          if (shown.output !== undefined) expect(words(lines[0])).toEqual(words(shown.output[0]));
        }
      }
    },
  );

  describe.runIf(withNft.length > 0 && hasSystem(['nft', 'ip', 'root'], 'docs: nft commands'))(
    'nft commands, in a throwaway network namespace',
    () => {
      const spaces = new Namespaces('spdoc');
      afterAll(() => spaces.cleanup());
      it.each(withNft.map((c) => [`${c.page}:${c.line}`, c] as const))(
        '%s runs as shown',
        async (_where, shown) => {
          const ns = spaces.add(`c${shown.line}`);
          const result = await sh(shown.command, ns);
          expect(result.code, result.stderr).toBe(0);
        },
      );
    },
  );
});
