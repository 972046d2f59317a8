// Packaging smoke test: pack the tarball, install it into a throwaway ESM
// project and a throwaway CJS project, and import every subpath of the exports
// map from each. Run after `npm run build` (npm run check:package does both).
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';

const root = resolve(import.meta.dirname, '..');
const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));
const subpaths = Object.keys(pkg.exports)
  .filter((key) => key !== './package.json')
  .map((key) => (key === '.' ? pkg.name : `${pkg.name}/${key.slice(2)}`));

const work = mkdtempSync(join(tmpdir(), 'sp-smoke-'));
try {
  const out = execFileSync('npm', ['pack', '--json', '--pack-destination', work], {
    cwd: root,
    encoding: 'utf8',
  });
  const packed = JSON.parse(out)[0];
  const tarball = join(work, packed.filename);
  // Every shipped file has content: no empty chunks, no declaration file without declarations.
  const hollow = packed.files
    .map((file) => file.path)
    .filter((path) => /\.(c?js|d\.c?ts)$/.test(path))
    .filter((path) => {
      const code = readFileSync(join(root, path), 'utf8')
        .replace(/\/\*[\s\S]*?\*\//g, '')
        .replace(/^\s*\/\/.*$/gm, '')
        .replace(/^#!.*$/m, '')
        .replace(/['"]use strict['"];?/g, '');
      return code.trim() === '';
    });
  if (hollow.length > 0)
    throw new Error(`the package ships files with no content: ${hollow.join(', ')}`);
  // The NATS adapters need their optional peers to load.
  const peers = Object.keys(pkg.peerDependencies ?? {}).map(
    (name) => `${name}@${pkg.devDependencies?.[name] ?? pkg.peerDependencies[name]}`,
  );

  for (const type of ['module', 'commonjs']) {
    const dir = join(work, type);
    mkdirSync(dir);
    writeFileSync(
      join(dir, 'package.json'),
      JSON.stringify({ name: `smoke-${type}`, type, private: true }),
    );
    execFileSync(
      'npm',
      ['install', '--no-audit', '--no-fund', '--prefer-offline', tarball, ...peers],
      {
        cwd: dir,
        stdio: ['ignore', 'ignore', 'inherit'],
      },
    );
    const checks = subpaths.map((spec) =>
      type === 'module'
        ? `{ const m = await import(${JSON.stringify(spec)}); if (Object.keys(m).length === 0) throw new Error('empty: ${spec}'); console.log('esm ok', ${JSON.stringify(spec)}, Object.keys(m).length); }`
        : `{ const m = require(${JSON.stringify(spec)}); if (Object.keys(m).length === 0) throw new Error('empty: ${spec}'); console.log('cjs ok', ${JSON.stringify(spec)}, Object.keys(m).length); }`,
    );
    if (type === 'commonjs') {
      // The test kit loads only through its own subpath: require every other
      // one first and look for the kit's file among the loaded modules.
      const others = subpaths.filter((spec) => spec !== `${pkg.name}/testing`);
      checks.unshift(
        `{ for (const spec of ${JSON.stringify(others)}) require(spec); const kit = Object.keys(require.cache).filter((f) => /[\\/]dist[\\/]testing[\\/]/.test(f)); if (kit.length > 0) throw new Error('another subpath loaded the test kit: ' + kit.join(', ')); console.log('cjs ok: no other subpath loads the test kit'); }`,
        `{ const t = require(${JSON.stringify(`${pkg.name}/testing`)}); for (const name of ['TestClock', 'FakeBackend', 'MemoryPoolLedger', 'createTestFleet', 'poolLedgerConformance']) if (typeof t[name] !== 'function') throw new Error('testing lacks ' + name); if ('TestClock' in require(${JSON.stringify(pkg.name)})) throw new Error('the root entry re-exports the test kit'); console.log('cjs ok: the test kit and only there'); }`,
      );
    }
    const file = join(dir, type === 'module' ? 'smoke.mjs' : 'smoke.cjs');
    writeFileSync(file, checks.join('\n'));
    execFileSync(process.execPath, [file], { cwd: dir, stdio: 'inherit' });
  }
  console.log(`smoke: ${subpaths.length} subpaths imported from ESM and CJS`);
} finally {
  rmSync(work, { recursive: true, force: true });
}
