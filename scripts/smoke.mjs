// Packaging smoke test: pack the tarball, install it into a throwaway project
// as a user does (install scripts not suppressed), and check what a user meets:
// - the installed package.json has no install-time script and `npm install`
//   printed no install-scripts warning;
// - every relative link of the packed README.md and docs/*.md (file and
//   #anchor) resolves inside the package;
// - every file of examples/ is shipped, and the quickstart runs from
//   node_modules/scaler-primitives/examples with tsx (this checkout's);
// - every subpath of the exports map imports from ESM and from CJS;
// - the installed CLI runs (`npx scaler-primitives --version`, `--help`, one
//   command of each group).
// Run after `npm run build` (npm run check:package packs through `attw --pack`,
// whose `prepack` builds; the test suite runs this from
// test/package-install.test.ts). The tarball is packed with --ignore-scripts, so
// packing never rebuilds dist/ under a running test. Installs are offline where
// the npm cache allows; the optional NATS peers are linked from this
// repository's node_modules when present.
import { execFileSync, spawnSync } from 'node:child_process';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative, resolve, sep } from 'node:path';

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
  // Installed as a user installs it: scripts are not suppressed, so npm (11 and
  // later) would warn about any install-time script of the package.
  const install = (offline) =>
    spawnSync(
      'npm',
      [
        'install',
        '--no-audit',
        '--no-fund',
        '--loglevel=warn',
        offline ? '--offline' : '--prefer-offline',
        tarball,
      ],
      { cwd: dir, encoding: 'utf8', env: { ...process.env, npm_config_update_notifier: 'false' } },
    );
  let installed = install(true);
  if (installed.status !== 0) installed = install(false); // something is not in the npm cache yet
  const installLog = `${installed.stdout}${installed.stderr}`;
  if (installed.status !== 0) throw new Error(`npm install of the tarball failed:\n${installLog}`);
  checkInstallScripts(join(dir, 'node_modules', pkg.name), installLog);

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

  checkLinks(join(dir, 'node_modules', pkg.name));
  checkExamples(packed, dir);

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
    `smoke: no install script; links resolve; the quickstart ran; ${subpaths.length} subpaths imported from ESM and CJS; the CLI ran ${expectations.length} commands`,
  );
} finally {
  rmSync(work, { recursive: true, force: true });
}

/** The lifecycle scripts npm runs when a package is installed. */
function installScripts(manifest) {
  return ['preinstall', 'install', 'postinstall', 'prepare', 'prepublish'].filter(
    (name) => manifest.scripts?.[name] !== undefined,
  );
}

/** No install-time script in the installed manifest, and none reported by npm. */
function checkInstallScripts(installedDir, installLog) {
  const manifest = JSON.parse(readFileSync(join(installedDir, 'package.json'), 'utf8'));
  const scripts = installScripts(manifest);
  if (scripts.length > 0) {
    throw new Error(`the published package.json has install-time scripts: ${scripts.join(', ')}`);
  }
  // npm runs `node-gyp rebuild` on install for a package with a binding.gyp.
  if (existsSync(join(installedDir, 'binding.gyp'))) {
    throw new Error('the package ships a binding.gyp: npm would build it on install');
  }
  console.log('manifest ok: no install-time script');
  const warnings = installLog.split('\n').filter((line) => /install-scripts/i.test(line));
  if (warnings.length > 0) {
    throw new Error(`npm install of the tarball warned:\n${warnings.join('\n')}`);
  }
  console.log('install ok: no install-scripts warning');
}

/** GitHub's anchor of a heading: lower case, punctuation dropped, spaces to dashes. */
function slug(heading) {
  return heading
    .replace(/<[^>]*>/g, '')
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{M}\p{N}\p{Pc} -]/gu, '')
    .replace(/ /g, '-');
}

/** The anchors of a markdown file's headings (outside code fences), numbered as GitHub does. */
function anchors(text) {
  const seen = new Map();
  let fence;
  for (const line of text.split('\n')) {
    const marker = /^\s*(```|~~~)/.exec(line)?.[1];
    if (marker !== undefined && (fence === undefined || fence === marker)) {
      fence = fence === undefined ? marker : undefined;
      continue;
    }
    const heading = fence === undefined ? /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(line) : null;
    if (!heading) continue;
    const base = slug(heading[1]);
    const count = seen.get(base) ?? 0;
    seen.set(base, count + 1);
    if (count > 0) seen.set(`${base}-${count}`, 1);
  }
  return new Set(seen.keys());
}

/** The link targets of a markdown file, outside code fences and code spans. */
function linkTargets(text) {
  const targets = [];
  let fence;
  for (const [index, line] of text.split('\n').entries()) {
    const marker = /^\s*(```|~~~)/.exec(line)?.[1];
    if (marker !== undefined && (fence === undefined || fence === marker)) {
      fence = fence === undefined ? marker : undefined;
      continue;
    }
    if (fence !== undefined) continue;
    const prose = line.replace(/(`+)[\s\S]*?\1/g, '');
    for (const match of prose.matchAll(/\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)) {
      targets.push({ line: index + 1, target: match[1] });
    }
    for (const match of prose.matchAll(/^\s*\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)/g)) {
      targets.push({ line: index + 1, target: match[1] });
    }
    for (const match of prose.matchAll(/\b(?:href|src)="([^"]+)"/g)) {
      targets.push({ line: index + 1, target: match[1] });
    }
  }
  return targets;
}

/** Every relative link of the packed README.md and docs/*.md resolves inside the package. */
function checkLinks(installedDir) {
  const pages = [
    'README.md',
    ...readdirSync(join(installedDir, 'docs'))
      .filter((name) => name.endsWith('.md'))
      .map((name) => `docs/${name}`),
  ];
  const broken = [];
  let count = 0;
  for (const page of pages) {
    const file = join(installedDir, page);
    const text = readFileSync(file, 'utf8');
    for (const { line, target } of linkTargets(text)) {
      if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue; // https:, mailto:
      count++;
      const where = `${page}:${line}: ${target}`;
      const [path, anchor] = target.split('#', 2);
      const resolved = path === '' ? file : resolve(dirname(file), decodeURIComponent(path));
      const inside = relative(installedDir, resolved);
      if (inside.startsWith(`..${sep}`) || inside === '..') {
        broken.push(`${where} (outside the package)`);
      } else if (!existsSync(resolved)) {
        broken.push(`${where} (not in the package)`);
      } else if (anchor !== undefined && resolved.endsWith('.md')) {
        if (!anchors(readFileSync(resolved, 'utf8')).has(anchor)) {
          broken.push(`${where} (no such heading)`);
        }
      }
    }
  }
  if (broken.length > 0) {
    throw new Error(`links of the packed docs that do not resolve:\n${broken.join('\n')}`);
  }
  console.log(`links ok: ${count} relative links in ${pages.length} pages`);
}

/** Every file of examples/ is packed, and the quickstart runs from the installed package. */
function checkExamples(packed, projectDir) {
  const shipped = new Set(packed.files.map((file) => file.path));
  const files = readdirSync(join(root, 'examples'));
  const missing = files.filter((name) => !shipped.has(`examples/${name}`));
  if (missing.length > 0) {
    throw new Error(`examples the package does not ship: ${missing.join(', ')}`);
  }
  console.log(`examples ok: all ${files.length} files of examples/ shipped`);
  const env = { ...process.env };
  delete env.NATS_URL;
  const example = join('node_modules', pkg.name, 'examples', '01-quickstart.ts');
  const output = execFileSync(join(root, 'node_modules', '.bin', 'tsx'), [example], {
    cwd: projectDir,
    encoding: 'utf8',
    env,
    timeout: 120_000,
  });
  if (!/after shutdown: 0 agents tracked, pool holds 0 CPU/.test(output)) {
    throw new Error(`tsx ${example} printed:\n${output}`);
  }
  console.log(`example ok: tsx ${example}`);
}
