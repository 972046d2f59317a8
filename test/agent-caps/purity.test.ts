// The codec must stay importable without NATS (an optional peer dependency):
// only zod, the errors module, resource types, the exact-decimal core (which
// imports nothing) and its own files.
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { codeOf } from '../helpers/source.js';

const dir = join(import.meta.dirname, '../../src/agent-caps');
const files = readdirSync(dir).filter((f) => f.endsWith('.ts'));
// ../internal/strict-keys.js is pure and imports only the errors module.
const allowed =
  /^(zod|\.\.\/errors\/index\.js|\.\.\/internal\/strict-keys\.js|\.\.\/resources\/(types|decimal)\.js|\.\/[a-z-]+\.js)$/;

describe('the pure codec', () => {
  it('has files to check, and the check sees their imports', () => {
    expect(files).toEqual(expect.arrayContaining(['index.ts', 'codec.ts', 'grammar.ts']));
    expect(readFileSync(join(dir, 'codec.ts'), 'utf8')).toMatch(/\bfrom\s+'zod'/);
  });

  it.each(files)('%s imports nothing but zod, errors, resource types and its own files', (file) => {
    const source = codeOf(readFileSync(join(dir, file), 'utf8'));
    const specifiers = [...source.matchAll(/\bfrom\s+'([^']+)'/g)].map((m) => m[1]);
    for (const specifier of specifiers) expect(specifier).toMatch(allowed);
  });
});
