import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

const root = join(import.meta.dirname, '..');
const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));

// Every module folder with an index.ts (and its nats/ adapter) is a public subpath.
function modules(): string[] {
  const found: string[] = [];
  for (const entry of readdirSync(join(root, 'src'), { withFileTypes: true })) {
    if (!entry.isDirectory() || ['cli', 'internal'].includes(entry.name)) continue;
    if (existsSync(join(root, 'src', entry.name, 'index.ts'))) found.push(entry.name);
    if (existsSync(join(root, 'src', entry.name, 'nats', 'index.ts'))) {
      found.push(`${entry.name}/nats`);
    }
  }
  return found.sort();
}

describe('package.json', () => {
  it('exports every module, types first, for import and require', () => {
    const subpaths = Object.keys(pkg.exports)
      .filter((k) => k !== '.' && k !== './package.json')
      .map((k) => k.slice(2))
      .sort();
    expect(subpaths).toEqual(modules());
    for (const [key, value] of Object.entries<Record<string, Record<string, string>>>(
      pkg.exports,
    )) {
      if (key === './package.json') continue;
      const base = key === '.' ? './dist/index' : `./dist/${key.slice(2)}/index`;
      expect(value).toEqual({
        import: { types: `${base}.d.ts`, default: `${base}.js` },
        require: { types: `${base}.d.cts`, default: `${base}.cjs` },
      });
      expect(Object.keys(value.import!)[0]).toBe('types');
      expect(Object.keys(value.require!)[0]).toBe('types');
    }
  });

  it('maps every subpath for TypeScript node10 resolution too', () => {
    expect(Object.keys(pkg.typesVersions['*']).sort()).toEqual(modules());
  });

  it('is side-effect free, ships only its files, and keeps NATS and OpenTelemetry optional', () => {
    expect(pkg.sideEffects).toBe(false);
    expect(pkg.files).toEqual(expect.arrayContaining(['dist', 'README.md', 'LICENSE']));
    expect(Object.keys(pkg.dependencies).sort()).toEqual(['croner', 'execa', 'zod']);
    for (const name of Object.keys(pkg.peerDependencies)) {
      expect(name.startsWith('@nats-io/') || name === '@opentelemetry/api').toBe(true);
      expect(pkg.peerDependenciesMeta[name].optional).toBe(true);
    }
    expect(pkg.license).toBe('Apache-2.0');
    expect(pkg.engines.node).toBe('>=20');
  });
});
