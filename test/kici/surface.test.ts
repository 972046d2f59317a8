import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import * as root from 'scaler-primitives';
import * as kici from 'scaler-primitives/kici';
import { describe, expect, it } from 'vitest';

const src = join(import.meta.dirname, '../../src');

function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) =>
    entry.isDirectory()
      ? sources(join(dir, entry.name))
      : entry.name.endsWith('.ts')
        ? [join(dir, entry.name)]
        : [],
  );
}

const importsOf = (file: string) =>
  [...readFileSync(file, 'utf8').matchAll(/^(?:import|export)[^;]*?from '([^']+)'/gm)].map(
    (m) => m[1]!,
  );

describe('scaler-primitives/kici surface', () => {
  it('is not re-exported by the root entry', () => {
    for (const name of ['toScalerConfig', 'parseKiciMemory', 'ensureKiciTable', 'kiciAgentId']) {
      expect(name in root, name).toBe(false);
    }
    // Its MachineLedger is the adapter, not the core class the root exports.
    expect(kici.MachineLedger).not.toBe(root.MachineLedger);
  });

  it('imports only the core modules (their entry points or, for shared internals, their files)', () => {
    expect(importsOf(join(src, 'kici', 'machine-ledger.ts'))).toContain('../ledger/index.js');
    for (const file of sources(join(src, 'kici'))) {
      for (const spec of importsOf(file)) {
        const allowed =
          spec.startsWith('node:') ||
          spec.startsWith('./') ||
          spec === '../errors/index.js' ||
          /^\.\.\/(ledger|nftables|resources|manager)\/([a-z-]+\/)?[a-z-]+\.js$/.test(spec);
        expect(allowed, `${file}: ${spec}`).toBe(true);
      }
    }
  });

  it('is imported by nothing in src', () => {
    for (const file of sources(src).filter((f) => !f.startsWith(join(src, 'kici')))) {
      expect(
        importsOf(file).some((spec) => spec.includes('/kici/') || spec === './kici/index.js'),
        file,
      ).toBe(false);
    }
  });
});
