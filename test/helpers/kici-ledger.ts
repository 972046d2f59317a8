/**
 * The kici orchestrator's own MachineLedger, for side-by-side benchmarks and
 * mixed-fleet tests. It is fetched at run time from the published package
 * (`npm pack @kici-dev/orchestrator@<version>` into a temp dir), never
 * committed, vendored or shipped: the package is AGPL and only ever runs here
 * as a separate program we compare against.
 *
 * The package bundles everything into `dist/server.js` and does not export the
 * ledger, so the module's region (`//#region src/scaler/machine-ledger.ts` ..
 * `//#endregion`) is cut out into a small ES module with the imports it uses
 * and a silent logger.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** The kici orchestrator version the tests and benchmarks compare against. */
export const KICI_VERSION = '0.9.1';

const REGION_START = '//#region src/scaler/machine-ledger.ts';
const REGION_END = '//#endregion';

/** The unpacked package directory (`.../package`), fetched once per machine into the temp dir. */
export function kiciPackageDir(version = KICI_VERSION): string {
  const cache = join(tmpdir(), `scaler-primitives-kici-${version}`);
  const dir = join(cache, 'package');
  if (existsSync(join(dir, 'dist', 'server.js'))) return dir;
  const staging = `${cache}.${process.pid}.tmp`;
  mkdirSync(staging, { recursive: true });
  const name = execFileSync(
    'npm',
    ['pack', `@kici-dev/orchestrator@${version}`, '--silent', '--pack-destination', staging],
    { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] },
  )
    .trim()
    .split('\n')
    .pop();
  if (!name) throw new Error(`npm pack @kici-dev/orchestrator@${version} printed no file name`);
  execFileSync('tar', ['xzf', join(staging, name), '-C', staging]);
  mkdirSync(cache, { recursive: true });
  try {
    renameSync(join(staging, 'package'), dir);
  } catch (error) {
    // Another process unpacked it first.
    if (!existsSync(join(dir, 'dist', 'server.js'))) throw error;
  }
  return dir;
}

/**
 * Write (once) and return the path of an ES module that exports kici's
 * `MachineLedger` class and its `resolveLedgerDir`, cut from the published bundle.
 */
export function kiciLedgerModule(version = KICI_VERSION): string {
  const dir = kiciPackageDir(version);
  const out = join(dir, 'kici-machine-ledger.mjs');
  if (existsSync(out)) return out;
  const bundle = readFileSync(join(dir, 'dist', 'server.js'), 'utf8');
  const start = bundle.indexOf(REGION_START);
  if (start < 0) throw new Error(`kici ${version}: no ${REGION_START} in dist/server.js`);
  const end = bundle.indexOf(REGION_END, start + REGION_START.length);
  if (end < 0) throw new Error(`kici ${version}: the machine-ledger region does not end`);
  const region = bundle.slice(start, end);
  const module = [
    `// Cut at run time from @kici-dev/orchestrator@${version} dist/server.js (AGPL-3.0-only). Not part of scaler-primitives.`,
    `import { readFileSync } from 'node:fs';`,
    `import { mkdir, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';`,
    `import { homedir, tmpdir } from 'node:os';`,
    `import { join } from 'node:path';`,
    `import { setTimeout as setTimeout$1 } from 'node:timers/promises';`,
    `const __esmMin = (fn, res) => () => (fn && (res = fn((fn = 0))), res);`,
    `const createLogger = () => ({ info() {}, warn() {}, error() {}, debug() {} });`,
    region,
    'init_machine_ledger();',
    'export { MachineLedger, resolveLedgerDir };',
    '',
  ].join('\n');
  const temp = `${out}.${process.pid}.tmp`;
  writeFileSync(temp, module);
  renameSync(temp, out);
  return out;
}
