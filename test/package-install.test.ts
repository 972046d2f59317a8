/**
 * The package as a user gets it: scripts/smoke.mjs packs the tarball
 * (`npm pack`), installs it into a temp project (offline from the npm cache
 * where it can; the optional NATS peers linked from this checkout), imports
 * every subpath from ESM and CJS, and runs the installed CLI with `npx`:
 * `--version`, `--help` and one command of each group.
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
  it('imports every subpath from ESM and CJS and runs the CLI through npx', async () => {
    const { stdout } = await run(process.execPath, [join(root, 'scripts', 'smoke.mjs')], {
      cwd: root,
      timeout: 240_000,
      maxBuffer: 16 * 1024 * 1024,
    });
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
