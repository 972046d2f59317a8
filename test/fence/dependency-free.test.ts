/**
 * An agent imports scaler-primitives/fence on its own: everything the entry
 * point loads at run time is this package's own code and Node builtins
 * (type-only imports load nothing).
 */
import { readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { codeOf } from '../helpers/source.js';

const src = join(import.meta.dirname, '..', '..', 'src');

/** Runtime import specifiers of a file (not `import type`, not `export type`). */
function runtimeImports(file: string): string[] {
  const text = codeOf(readFileSync(file, 'utf8'));
  const specs: string[] = [];
  for (const m of text.matchAll(
    /(?:^|\n)\s*(import|export)\s+(type\s+)?[^'"]*?from\s+['"]([^'"]+)['"]/g,
  )) {
    if (m[2] === undefined) specs.push(m[3]!);
  }
  for (const m of text.matchAll(/\bimport\(\s*['"]([^'"]+)['"]\s*\)/g)) specs.push(m[1]!);
  return specs;
}

describe('scaler-primitives/fence is dependency-free', () => {
  it('loads only its own code and node builtins, and little of it', () => {
    const seen = new Set<string>();
    const outside: string[] = [];
    const stack = [join(src, 'fence', 'index.ts')];
    while (stack.length > 0) {
      const file = stack.pop()!;
      if (seen.has(file)) continue;
      seen.add(file);
      for (const spec of runtimeImports(file)) {
        if (spec.startsWith('.')) stack.push(resolve(dirname(file), spec.replace(/\.js$/, '.ts')));
        else if (!spec.startsWith('node:')) outside.push(`${relative(src, file)}: ${spec}`);
      }
    }
    expect(outside).toEqual([]);
    const files = [...seen].map((file) => relative(src, file)).sort();
    // The fence, the clock seam, the strict-key checks and the error classes.
    expect(files.filter((f) => !f.startsWith('fence/') && !f.startsWith('errors'))).toEqual([
      'clock.ts',
      'internal/strict-keys.ts',
    ]);
  });

  it('scaler-primitives/fence/nats loads the fence, the errors and nats.js only', () => {
    const seen = new Set<string>();
    const outside = new Set<string>();
    const stack = [join(src, 'fence', 'nats', 'index.ts')];
    while (stack.length > 0) {
      const file = stack.pop()!;
      if (seen.has(file)) continue;
      seen.add(file);
      for (const spec of runtimeImports(file)) {
        if (spec.startsWith('.')) stack.push(resolve(dirname(file), spec.replace(/\.js$/, '.ts')));
        else if (!spec.startsWith('node:')) outside.add(spec);
      }
    }
    expect([...outside].sort()).toEqual(['@nats-io/kv', '@nats-io/transport-node']);
    const files = [...seen].map((file) => relative(src, file)).sort();
    expect(files.filter((f) => !f.startsWith('fence/') && !f.startsWith('errors'))).toEqual([
      'clock.ts',
      'internal/strict-keys.ts',
    ]);
    expect(files).toContain('fence/nats/watch.ts'); // the walk went through the adapter
  });

  it('the scan sees a runtime import (so it can fail)', () => {
    const probe = join(import.meta.dirname, 'dependency-free.test.ts');
    expect(runtimeImports(probe)).toContain('vitest');
  });
});
