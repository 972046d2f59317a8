/**
 * The package as a user gets it: scripts/smoke.mjs packs the tarball
 * (`npm pack`) and installs it into a temp project (offline from the npm cache
 * where it can, install scripts not suppressed; the optional NATS peers linked
 * from this checkout). It checks that the installed package.json has no
 * install-time script and that `npm install` printed no install-scripts
 * warning, resolves every relative link (file and anchor) of the packed
 * README.md and docs/*.md inside the package, runs the quickstart from
 * `node_modules/scaler-primitives/examples` with tsx, imports every subpath
 * from ESM and CJS, and runs the installed CLI with `npx`: `--version`,
 * `--help` and one command of each group. One pack and one install for all.
 */
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { beforeAll, describe, expect, it } from 'vitest';
import { ensureBuilt, root } from './helpers/built-package.js';

const run = promisify(execFile);
const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));

beforeAll(ensureBuilt, 300_000);

describe('the packed tarball, installed', () => {
  it('installs with no install script, resolves its links, runs an example and every subpath, and runs the CLI through npx', async () => {
    const { stdout } = await run(process.execPath, [join(root, 'scripts', 'smoke.mjs')], {
      cwd: root,
      timeout: 240_000,
      maxBuffer: 16 * 1024 * 1024,
    });
    expect(stdout).toMatch(/^manifest ok: no install-time script$/m);
    expect(stdout).toMatch(/^install ok: no install-scripts warning$/m);
    expect(stdout).toMatch(/^links ok: [1-9]\d* relative links in [1-9]\d* pages$/m);
    expect(stdout).toMatch(/^examples ok: all [1-9]\d* files of examples\/ shipped$/m);
    expect(stdout).toMatch(
      /^example ok: tsx node_modules\/scaler-primitives\/examples\/01-quickstart\.ts$/m,
    );
    const subpaths = Object.keys(pkg.exports)
      .filter((key) => key !== './package.json')
      .map((key) => (key === '.' ? pkg.name : `${pkg.name}/${key.slice(2)}`));
    for (const spec of subpaths) {
      expect(stdout).toMatch(new RegExp(`^esm ok ${spec} \\d+$`, 'm'));
      expect(stdout).toMatch(new RegExp(`^cjs ok ${spec} \\d+$`, 'm'));
    }
    expect(stdout).toContain('cjs ok: no other subpath loads the test kit');
    for (const command of [
      '--version',
      '--help',
      'ledger usage',
      'config check',
      'nft plan',
      'caps encode',
    ]) {
      expect(stdout).toMatch(new RegExp(`^cli ok ${command.replace(/-/g, '\\-')}`, 'm'));
    }
  }, 300_000);
});
