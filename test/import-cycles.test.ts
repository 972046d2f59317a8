/**
 * No import cycle in src/ (docs/architecture.md: imports point one way). The check is
 * dependency-cruiser's `no-circular` rule (.dependency-cruiser.cjs), run here as
 * `npm run check:cycles` runs it, so `npm test` fails on any cycle; type-only imports count.
 */
import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';

const root = join(import.meta.dirname, '..');
const cli = join(root, 'node_modules', 'dependency-cruiser', 'bin', 'dependency-cruise.mjs');
const config = join(root, '.dependency-cruiser.cjs');

interface Violation {
  from: string;
  rule: { name: string };
  cycle?: { name: string }[];
}

/** dependency-cruiser's violations over `src` of `cwd`, with this repository's config. */
async function cruise(cwd: string): Promise<{ violations: Violation[]; modules: number }> {
  const { stdout } = (await promisify(execFile)(
    process.execPath,
    [cli, 'src', '--config', config, '--output-type', 'json'],
    { cwd, maxBuffer: 64 * 1024 * 1024 },
  ).catch((error: { stdout?: string }) => {
    // It exits non-zero when it finds violations; the JSON is on stdout all the same.
    if (typeof error.stdout === 'string' && error.stdout.startsWith('{')) return error;
    throw error;
  })) as { stdout: string };
  const result = JSON.parse(stdout) as {
    summary: { violations: Violation[]; totalCruised: number };
  };
  return { violations: result.summary.violations, modules: result.summary.totalCruised };
}

const scratch = mkdtempSync(join(tmpdir(), 'sp-cycles-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

describe('import cycles (dependency-cruiser, .dependency-cruiser.cjs)', () => {
  it('src/ has none', async () => {
    const { violations, modules } = await cruise(root);
    // The whole tree was read (a wrong config would cruise nothing and find no cycle).
    expect(modules).toBeGreaterThan(100);
    const cycles = violations.map(
      (v) =>
        `${v.rule.name}: ${[v.from, ...(v.cycle ?? []).map((step) => step.name)].join(' -> ')}`,
    );
    expect(cycles).toEqual([]);
  }, 120_000);

  it('finds a cycle, also one made only of type imports (a scratch project)', async () => {
    mkdirSync(join(scratch, 'src', 'm'), { recursive: true });
    writeFileSync(
      join(scratch, 'tsconfig.json'),
      JSON.stringify({ compilerOptions: { module: 'NodeNext', moduleResolution: 'NodeNext' } }),
    );
    writeFileSync(
      join(scratch, 'src', 'm', 'a.ts'),
      "import { b } from './b.js';\nexport const a = b + 1;\n",
    );
    writeFileSync(
      join(scratch, 'src', 'm', 'b.ts'),
      "import type { T } from './c.js';\nexport const b: T = 1;\n",
    );
    writeFileSync(
      join(scratch, 'src', 'm', 'c.ts'),
      "import type { a } from './a.js';\nexport type T = typeof a;\n",
    );
    writeFileSync(join(scratch, 'src', 'leaf.ts'), 'export const leaf = 1;\n');
    const { violations, modules } = await cruise(scratch);
    expect(modules).toBe(4);
    expect(violations.length).toBeGreaterThan(0);
    expect(violations.every((v) => v.rule.name === 'no-circular')).toBe(true);
    const files = new Set(
      violations.flatMap((v) => [v.from, ...(v.cycle ?? []).map((s) => s.name)]),
    );
    expect([...files].sort()).toEqual(['src/m/a.ts', 'src/m/b.ts', 'src/m/c.ts']);
  }, 120_000);
});
