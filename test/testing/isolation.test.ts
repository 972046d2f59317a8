import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import * as root from 'scaler-primitives';
import { describe, expect, it } from 'vitest';
import { codeOf } from '../helpers/source.js';

const src = join(import.meta.dirname, '..', '..', 'src');
const testing = join(src, 'testing');

function importsOf(file: string): string[] {
  const text = codeOf(readFileSync(file, 'utf8'));
  const specs: string[] = [];
  for (const m of text.matchAll(/(?:^|\n)\s*(?:import|export)\b[^'"]*?from\s+['"]([^'"]+)['"]/g)) {
    specs.push(m[1]!);
  }
  for (const m of text.matchAll(/\bimport\(\s*['"]([^'"]+)['"]\s*\)/g)) specs.push(m[1]!);
  return specs;
}

function resolveTs(from: string, spec: string): string {
  return resolve(dirname(from), spec.replace(/\.js$/, '.ts'));
}

// Every file reachable from an entry through relative imports.
function reachable(entry: string): Set<string> {
  const seen = new Set<string>();
  const stack = [entry];
  while (stack.length > 0) {
    const file = stack.pop()!;
    if (seen.has(file)) continue;
    seen.add(file);
    for (const spec of importsOf(file)) {
      if (spec.startsWith('.')) stack.push(resolveTs(file, spec));
    }
  }
  return seen;
}

function files(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    return statSync(path).isDirectory() ? files(path) : path.endsWith('.ts') ? [path] : [];
  });
}

const entries = [
  join(src, 'index.ts'),
  join(src, 'cli', 'index.ts'),
  ...readdirSync(src).flatMap((name) =>
    [join(src, name, 'index.ts'), join(src, name, 'nats', 'index.ts')].filter(
      (path) => existsSync(path) && !path.startsWith(`${testing}/`),
    ),
  ),
];

describe('scaler-primitives/testing stays apart', () => {
  it('no other entry point (root, every subpath, the CLI) reaches src/testing', () => {
    expect(entries.length).toBeGreaterThan(8);
    for (const entry of entries) {
      const reached = [...reachable(entry)].filter((f) => f.startsWith(`${testing}/`));
      expect({ entry: relative(src, entry), reached }).toEqual({
        entry: relative(src, entry),
        reached: [],
      });
    }
  });

  it('the walk does follow imports (so the check above can fail)', () => {
    const reached = reachable(join(testing, 'index.ts'));
    expect(reached.has(join(testing, 'fleet.ts'))).toBe(true);
    expect(reached.has(join(src, 'manager', 'manager.ts'))).toBe(true);
  });

  it('the root entry re-exports none of the kit', () => {
    for (const name of ['TestClock', 'FakeBackend', 'MemoryPoolLedger', 'createTestFleet']) {
      expect(name in root).toBe(false);
    }
  });

  // The memory ledger shares the ledgers' front end and pool document rules,
  // which no entry point exports: src/ledger is the one module the kit may
  // import by file.
  it('the kit imports no test framework, and other modules (but the ledger) only through their entry points', () => {
    const offenders: string[] = [];
    for (const file of files(testing)) {
      for (const spec of importsOf(file)) {
        const rel = relative(src, resolveTs(file, spec));
        const ok = spec.startsWith('node:')
          ? true
          : spec.startsWith('.')
            ? rel.startsWith('testing/') ||
              rel === 'clock.ts' ||
              rel === 'errors.ts' ||
              rel.startsWith('ledger/') ||
              /^[a-z-]+(\/nats)?\/index\.ts$/.test(rel)
            : false;
        if (!ok) offenders.push(`${relative(src, file)} imports ${spec}`);
      }
    }
    expect(offenders).toEqual([]);
  });
});
