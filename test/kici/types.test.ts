/**
 * The adapter's exports are assignable to kici's declarations: the seed (0.1.1) .d.ts in
 * /work/shared/seeds (or $KICI_SEED_DTS) and `@kici-dev/orchestrator@0.9.1`'s
 * dist/scaler/*.d.ts fetched at run time. A small .ts file is type-checked with the repo's
 * compiler settings; one deliberate mismatch must be reported, so the check can fail.
 */
import { execFileSync } from 'node:child_process';
import {
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { kiciPackageDir } from '../helpers/kici-ledger.js';

const root = join(import.meta.dirname, '../..');
const seedFile =
  process.env.KICI_SEED_DTS ?? '/work/shared/seeds/kici-orchestrator-scaler.d.ts.txt';

// The seed is a diff listing: `package/dist/scaler/<name>.d.ts`, a hunk header, then `+` lines.
function seedDeclarations(text: string): Map<string, string> {
  const files = new Map<string, string>();
  let current: string | undefined;
  let lines: string[] = [];
  const flush = () => {
    if (current) files.set(current, `${lines.join('\n')}\n`);
  };
  for (const line of text.split('\n')) {
    const header = /^package\/dist\/scaler\/([\w-]+\.d\.ts)$/.exec(line.trim());
    if (header) {
      flush();
      current = header[1];
      lines = [];
    } else if (current && line.startsWith('+')) {
      lines.push(line.slice(1));
    }
  }
  flush();
  return files;
}

// What the seed's declarations import from './types.js' (not part of the seed listing):
// the 0.1.1 cap and the network policy fields its nftables module reads.
const SEED_TYPES = `export interface ResourceCap { maxCpu?: number; maxMemoryBytes?: number; }
export interface NetworkPolicy { allowlist?: string[]; denyAll?: boolean; }
export type ScalerBackend = unknown; export type ScalerConfig = unknown; export type ScaleResult = unknown;
export type ScalerEvent = unknown; export type ValidationResult = unknown;
`;

const CHECK = (adapter: string) => `
import * as ours from '${adapter}';
import type { MachineLedger as SeedLedger } from './seed/machine-ledger.js';
import type * as seedNft from './seed/nftables.js';
import type { ResourceCap as SeedCap } from './seed/types.js';
import type { MachineLedger as KiciLedger } from './v091/machine-ledger.js';
import type { ScalerConfig as KiciConfig } from './v091/types.js';

type Public<T> = Pick<T, keyof T>;

// MachineLedger: constructor and every public member, seed and 0.9.1.
export const seedLedger: new (opts: ConstructorParameters<typeof SeedLedger>[0]) => Public<SeedLedger> =
  ours.MachineLedger;
export const kiciLedger: new (opts: ConstructorParameters<typeof KiciLedger>[0]) => Public<KiciLedger> =
  ours.MachineLedger;
export const cap = (c: SeedCap): Parameters<ours.MachineLedger['registerPool']>[1] => c;

// The seed's nftables functions, argument for argument.
export const validate: typeof seedNft.validateNftablesAvailability = ours.validateNftablesAvailability;
export const ensure: typeof seedNft.ensureKiciTable = ours.ensureKiciTable;
export const add: typeof seedNft.addIsolationRules = ours.addIsolationRules;
export const remove: typeof seedNft.removeIsolationRules = ours.removeIsolationRules;
export const parse: typeof seedNft.parseRuleHandles = ours.parseRuleHandles;
export const mode = (m: seedNft.NftMatchMode): ours.NftMatchMode => m;
export const nftOptions = (o: seedNft.NftOptions): ours.KiciNftOptions => o;

// kici 0.9.1's parsed scaler config is accepted by toScalerConfig.
export const config = (c: KiciConfig) => ours.toScalerConfig(c);
`;

// A mismatch the same compiler run must report, so the check cannot pass vacuously: a class
// without releaseAllForInstance is not kici's MachineLedger.
const BAD = `
import type { MachineLedger as KiciLedger } from './v091/machine-ledger.js';
type Public<T> = Pick<T, keyof T>;
class Partial {
  constructor(_opts: { explicitDir?: string; instanceId: string }) {}
  registerPool(): void {}
}
export const bad: new (opts: ConstructorParameters<typeof KiciLedger>[0]) => Public<KiciLedger> = Partial;
`;

// The seed lives beside the repository, not in it: without it (a fresh clone elsewhere) the
// check is skipped with one line, as system tests are.
const haveSeed = existsSync(seedFile);
if (!haveSeed) {
  const line = `kici type compatibility: no seed declarations at ${seedFile} (set KICI_SEED_DTS)`;
  if (process.env.SCALER_PRIMITIVES_REQUIRE_SYSTEM === '1') {
    throw new Error(`SCALER_PRIMITIVES_REQUIRE_SYSTEM=1 but ${line}`);
  }
  console.warn(`skipped: ${line}`);
}

describe.runIf(haveSeed)('type compatibility with kici’s declarations', () => {
  const dir = mkdtempSync(join(tmpdir(), 'sp-kici-types-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('the seed listing holds the declarations the check needs', () => {
    const files = seedDeclarations(readFileSync(seedFile, 'utf8'));
    expect([...files.keys()].sort()).toEqual(
      expect.arrayContaining(['machine-ledger.d.ts', 'nftables.d.ts']),
    );
  });

  // One compiler run over the adapter and the core modules it reaches: slow on a loaded machine.
  it('tsc accepts the adapter where kici’s types are expected (and rejects a mismatch)', {
    timeout: 240_000,
  }, () => {
    mkdirSync(join(dir, 'seed'));
    mkdirSync(join(dir, 'v091'));
    for (const [name, text] of seedDeclarations(readFileSync(seedFile, 'utf8'))) {
      writeFileSync(join(dir, 'seed', name), text);
    }
    writeFileSync(join(dir, 'seed', 'types.d.ts'), SEED_TYPES);
    const kici = join(kiciPackageDir(), 'dist', 'scaler');
    for (const name of ['machine-ledger.d.ts', 'types.d.ts']) {
      expect(existsSync(join(kici, name))).toBe(true);
      copyFileSync(join(kici, name), join(dir, 'v091', name));
    }
    writeFileSync(join(dir, 'package.json'), '{ "type": "module" }\n');
    writeFileSync(join(dir, 'check.ts'), CHECK(join(root, 'src', 'kici', 'index.js')));
    writeFileSync(join(dir, 'bad.ts'), BAD);
    writeFileSync(
      join(dir, 'tsconfig.json'),
      JSON.stringify({
        extends: join(root, 'tsconfig.json'),
        compilerOptions: { typeRoots: [join(root, 'node_modules', '@types')], noEmit: true },
        include: ['check.ts', 'bad.ts'],
      }),
    );
    let output = '';
    try {
      execFileSync(process.execPath, [join(root, 'node_modules/typescript/bin/tsc'), '-p', dir], {
        encoding: 'utf8',
        stdio: ['ignore', 'pipe', 'pipe'],
      });
    } catch (error) {
      output = String((error as { stdout?: string }).stdout ?? error);
    }
    // Exactly one error, in bad.ts on the deliberately wrong line; none in check.ts.
    const errors = output.split('\n').filter((line) => /error TS\d+/.test(line));
    const badLine = BAD.split('\n').findIndex((l) => l.startsWith('export const bad')) + 1;
    expect(errors.filter((line) => line.includes('check.ts'))).toEqual([]);
    expect(errors).toHaveLength(1);
    expect(errors[0]).toContain(`bad.ts(${badLine},`);
  });
});
