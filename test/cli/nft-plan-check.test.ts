/**
 * The documented check of a rendered plan works as written: every
 * `scaler-primitives nft plan ... | nft -c -f -` line of the docs and of `nft plan --help`
 * is taken from the text and run as a shell pipeline, unchanged, against the real `nft`
 * in a network namespace this test creates (empty ruleset: no table) and deletes.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { main } from '../../src/cli/main.js';
import { Namespaces } from '../helpers/netns.js';
import { hasSystem } from '../helpers/system.js';

const root = join(import.meta.dirname, '../..');
const CHECK = /^\s*(scaler-primitives nft plan [^\n|`]*\| nft -c -f -)\s*$/gm;

function documented(text: string): string[] {
  return [...text.matchAll(CHECK)].map((m) => m[1]!);
}

async function helpText(): Promise<string> {
  let out = '';
  const io = {
    out: (text: string) => {
      out += text;
    },
    err: () => {},
    env: {},
  };
  await main(['nft', 'plan', '--help'], io);
  return out;
}

const docs = ['cli.md', 'nftables.md', 'security.md', 'migrating-from-kici.md'];

describe('the documented check lines', () => {
  it('each doc and the help show the check', async () => {
    for (const doc of docs) {
      expect(documented(readFileSync(join(root, 'docs', doc), 'utf8')), doc).not.toEqual([]);
    }
    expect(documented(await helpText())).toHaveLength(1);
  });
});

const ok = hasSystem(['nft', 'ip', 'root'], 'nft plan | nft -c -f - in a namespace');

describe.runIf(ok)('nft plan | nft -c -f -, as documented, in an empty namespace', () => {
  const namespaces = new Namespaces('sp-cli-doc');
  // `scaler-primitives` on PATH: the CLI from this tree, as the installed bin runs it.
  const bin = mkdtempSync(join(tmpdir(), 'sp-cli-bin-'));
  writeFileSync(
    join(bin, 'scaler-primitives'),
    `#!/bin/sh\nexec ${JSON.stringify(process.execPath)} --import tsx ${JSON.stringify(join(root, 'src/cli/index.ts'))} "$@"\n`,
  );
  chmodSync(join(bin, 'scaler-primitives'), 0o755);
  afterAll(() => {
    namespaces.cleanup();
    rmSync(bin, { recursive: true, force: true });
  });

  function shell(ns: string, line: string) {
    return spawnSync('ip', ['netns', 'exec', ns, 'sh', '-c', line], {
      cwd: root,
      encoding: 'utf8',
      env: { ...process.env, PATH: `${bin}:${process.env.PATH}` },
    });
  }

  function ruleset(ns: string): string {
    return execFileSync('ip', ['netns', 'exec', ns, 'nft', 'list', 'ruleset'], {
      encoding: 'utf8',
    });
  }

  it('every documented line passes, and changes nothing', async () => {
    const lines = [
      ...docs.flatMap((doc) => documented(readFileSync(join(root, 'docs', doc), 'utf8'))),
      ...documented(await helpText()),
    ];
    expect(lines.length).toBeGreaterThanOrEqual(5);
    for (const [i, line] of [...new Set(lines)].entries()) {
      const ns = namespaces.add(`doc${i}`);
      expect(ruleset(ns)).toBe('');
      // The plan alone: printed, and it declares its table (an empty plan would pass too).
      const plan = shell(ns, line.replace(/\s*\| nft -c -f -$/, ''));
      expect(plan.status, `${line}\n${plan.stderr}`).toBe(0);
      expect(plan.stdout).toMatch(/^add table (inet|ip) \w+\n/);
      // The line exactly as documented.
      const check = shell(ns, line);
      expect(check.stderr, line).toBe('');
      expect(check.status, line).toBe(0);
      expect(ruleset(ns)).toBe('');
    }
  }, 180_000); // two CLI processes per documented line

  it('the agent part alone needs the table: refused on an empty host, accepted after it', () => {
    const ns = namespaces.add('agent-only');
    const agentOnly =
      'scaler-primitives nft plan --agent ci-42 --iifname tap-ci-42 --agent-only | nft -c -f -';
    const refused = shell(ns, agentOnly);
    expect(refused.status).toBe(1);
    expect(refused.stderr).toContain('No such file or directory');
    // Apply only the skeleton (the plan's lines before the agent's first chain).
    const skeleton = shell(
      ns,
      "scaler-primitives nft plan --agent ci-0 --iifname tap-ci-0 | sed '/^create chain/,$d' | nft -f -",
    );
    expect(skeleton.status, skeleton.stderr).toBe(0);
    expect(ruleset(ns)).toContain('table inet scaler_primitives');
    const accepted = shell(ns, agentOnly);
    expect(accepted.stderr).toBe('');
    expect(accepted.status).toBe(0);
  });
});
