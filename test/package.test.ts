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

  it('has no install-time script: npm pack and publish build first (prepack)', () => {
    for (const name of ['preinstall', 'install', 'postinstall', 'prepare', 'prepublish']) {
      expect(pkg.scripts, name).not.toHaveProperty(name);
    }
    expect(existsSync(join(root, 'binding.gyp'))).toBe(false);
    expect(pkg.scripts.prepack).toMatch(/^tsup\b/);
  });

  it('ships every example by a pattern, so a new one is shipped too', () => {
    const patterns = (pkg.files as string[]).map(
      (pattern) =>
        new RegExp(`^${pattern.replace(/[.+?^${}()|[\]\\]/g, '\\$&').replace(/\*/g, '[^/]*')}$`),
    );
    const files = readdirSync(join(root, 'examples'));
    expect(files.length).toBeGreaterThan(0);
    for (const file of files) {
      expect(
        patterns.some((re) => re.test(`examples/${file}`)),
        `examples/${file}`,
      ).toBe(true);
    }
    const examplePatterns = pkg.files.filter((pattern: string) => pattern.startsWith('examples'));
    expect(examplePatterns.length).toBeGreaterThan(0);
    for (const pattern of examplePatterns) expect(pattern).toContain('*');
  });

  it('has examples that import the package by name, as a user does, and nothing of this repository', () => {
    const subpaths = new Set(
      Object.keys(pkg.exports)
        .filter((key) => key !== './package.json')
        .map((key) => (key === '.' ? pkg.name : `${pkg.name}/${key.slice(2)}`)),
    );
    // What a user installs beside the package to run an example: its optional peers
    // and the tools the examples name (tsx runs them, vitest the example test).
    const installable = new Set([
      ...Object.keys(pkg.peerDependencies),
      ...Object.keys(pkg.devDependencies),
    ]);
    let packageImports = 0;
    for (const file of readdirSync(join(root, 'examples'))) {
      const text = readFileSync(join(root, 'examples', file), 'utf8');
      const specifiers = [
        ...text.matchAll(/^\s*(?:import|export)\b[^'"]*?\bfrom\s*['"]([^'"]+)['"]/gm),
        ...text.matchAll(/^\s*import\s*['"]([^'"]+)['"]/gm),
        ...text.matchAll(/\bimport\(\s*['"]([^'"]+)['"]\s*\)/g),
      ].map((match) => match[1]!);
      expect(specifiers.length, file).toBeGreaterThan(0);
      for (const spec of specifiers) {
        if (spec.startsWith('node:')) continue;
        if (spec === pkg.name || spec.startsWith(`${pkg.name}/`)) {
          expect(subpaths.has(spec), `${file}: ${spec} is not a subpath of the package`).toBe(true);
          packageImports++;
          continue;
        }
        const name = spec.startsWith('@')
          ? spec.split('/').slice(0, 2).join('/')
          : spec.split('/')[0]!;
        expect(installable.has(name), `${file} imports ${spec}`).toBe(true);
      }
    }
    expect(packageImports).toBeGreaterThanOrEqual(readdirSync(join(root, 'examples')).length);
  });
});
