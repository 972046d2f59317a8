// Packaging smoke test: pack the tarball, install it into a throwaway project,
// import every subpath of the exports map from ESM and from CJS, and run the
// installed CLI (`npx scaler-primitives --version`, `--help`, one command of
// each group). Run after `npm run build` (npm run check:package does both; the
// test suite runs it from test/package-install.test.ts). The tarball is packed
// with --ignore-scripts, so packing never rebuilds dist/ under a running test.
// Installs are offline where the npm cache allows; the optional NATS peers are
// linked from this repository's node_modules when present.
import { execFileSync } from 'node:child_process';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';

const root = resolve(import.meta.dirname, '..');
const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));
const subpaths = Object.keys(pkg.exports)
  .filter((key) => key !== './package.json')
  .map((key) => (key === '.' ? pkg.name : `${pkg.name}/${key.slice(2)}`));

if (!existsSync(join(root, 'dist', 'index.js'))) {
  console.error('smoke: dist/ is missing: run `npm run build` first');
  process.exit(1);
}

const work = mkdtempSync(join(tmpdir(), 'sp-smoke-'));
try {
  const out = execFileSync(
    'npm',
    ['pack', '--json', '--ignore-scripts', '--pack-destination', work],
    { cwd: root, encoding: 'utf8' },
  );
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

  const dir = join(work, 'project');
  mkdirSync(dir);
  writeFileSync(
    join(dir, 'package.json'),
    JSON.stringify({ name: 'smoke-project', type: 'module', private: true }),
  );
  const install = (offline) =>
    execFileSync(
      'npm',
      [
        'install',
        '--no-audit',
        '--no-fund',
        '--ignore-scripts',
        offline ? '--offline' : '--prefer-offline',
        tarball,
      ],
      { cwd: dir, stdio: ['ignore', 'ignore', offline ? 'ignore' : 'inherit'] },
    );
  try {
    install(true);
  } catch {
    install(false); // something is not in the npm cache yet
  }
  // The NATS adapters need their optional peers to load: link this checkout's
  // copies (they resolve their own dependencies from there), else install them.
  const missing = [];
  for (const name of Object.keys(pkg.peerDependencies ?? {})) {
    const local = join(root, 'node_modules', name);
    if (existsSync(local)) {
      mkdirSync(dirname(join(dir, 'node_modules', name)), { recursive: true });
      symlinkSync(local, join(dir, 'node_modules', name), 'dir');
    } else {
      missing.push(`${name}@${pkg.devDependencies?.[name] ?? pkg.peerDependencies[name]}`);
    }
  }
  if (missing.length > 0) {
    execFileSync('npm', ['install', '--no-audit', '--no-fund', '--prefer-offline', ...missing], {
      cwd: dir,
      stdio: ['ignore', 'ignore', 'inherit'],
    });
  }

  for (const type of ['module', 'commonjs']) {
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
    // .mjs is ESM and .cjs is CommonJS whatever the project's "type".
    const file = join(dir, type === 'module' ? 'smoke.mjs' : 'smoke.cjs');
    writeFileSync(file, checks.join('\n'));
    execFileSync(process.execPath, [file], { cwd: dir, stdio: 'inherit' });
  }

  // The installed CLI, as a user runs it: the version, the help, and one
  // command of each group against files of this run only.
  const ledgerDir = join(work, 'ledger');
  mkdirSync(ledgerDir, { mode: 0o700 });
  const configFile = join(work, 'scalers.json');
  writeFileSync(
    configFile,
    JSON.stringify({
      globalMaxAgents: 2,
      scalers: [
        { name: 'small', type: 'container', maxAgents: 1, labelSets: [{ labels: ['linux'] }] },
      ],
    }),
  );
  const cli = (args) =>
    execFileSync('npx', ['--no-install', 'scaler-primitives', ...args], {
      cwd: dir,
      encoding: 'utf8',
      env: { ...process.env, npm_config_update_notifier: 'false' },
    });
  const expectations = [
    [['--version'], (o) => o.trim() === pkg.version],
    [['--help'], (o) => o.startsWith('Usage: scaler-primitives') && /ledger[\s\S]*caps/.test(o)],
    [['ledger', 'usage', '--dir', ledgerDir, '--json'], (o) => JSON.parse(o).length === 0],
    [['config', 'check', configFile, '--json'], (o) => JSON.parse(o).ok === true],
    [
      ['nft', 'plan', '--agent', 'ci-1', '--iifname', 'tap-ci-1', '--deny-all'],
      (o) =>
        o.startsWith('add table inet scaler_primitives\n') &&
        o.includes('\ncreate chain inet scaler_primitives agent-ci-1-fwd\n'),
    ],
    [
      ['caps', 'encode', '--cpus', '2', '--memory', '4Gi'],
      (o) => o.trim() === '{"cpu_quota":"200%","memory_max":"4G"}',
    ],
  ];
  for (const [args, ok] of expectations) {
    const output = cli(args);
    if (!ok(output)) {
      throw new Error(`npx scaler-primitives ${args.join(' ')} printed:\n${output}`);
    }
    console.log('cli ok', args.join(' '));
  }
  console.log(
    `smoke: ${subpaths.length} subpaths imported from ESM and CJS; the CLI ran ${expectations.length} commands`,
  );
} finally {
  rmSync(work, { recursive: true, force: true });
}
