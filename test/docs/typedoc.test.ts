/**
 * `npm run docs` (typedoc) builds with no warnings: typedoc.json treats every
 * warning (an undocumented export, a broken {@link}, a type used but not
 * exported) as an error. CI runs README's test command (`npm test`), so the
 * check lives here; `--emit none` validates without writing the site.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';

const root = join(import.meta.dirname, '..', '..');

/** typedoc with this repository's typedoc.json, and any arguments after it. */
function typedoc(...args: string[]): Promise<{ code: number; output: string }> {
  return promisify(execFile)(
    process.execPath,
    [join(root, 'node_modules', 'typedoc', 'bin', 'typedoc'), '--emit', 'none', ...args],
    { cwd: root, maxBuffer: 16 * 1024 * 1024, timeout: 280_000 },
  ).then(
    ({ stdout, stderr }) => ({ code: 0, output: `${stdout}${stderr}` }),
    (error: { code: number; stdout: string; stderr: string }) => ({
      code: error.code,
      output: `${error.stdout}${error.stderr}`,
    }),
  );
}

const scratch = mkdtempSync(join(tmpdir(), 'sp-typedoc-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

describe('the API docs (typedoc)', () => {
  it('build with no warning: every export documented, every link resolved', async () => {
    const result = await typedoc();
    expect(result.output).not.toMatch(/\[(warning|error)\]/);
    expect(result.code).toBe(0);
  }, 300_000);

  it('require a comment on every exported function and class, not on every property', async () => {
    writeFileSync(
      join(scratch, 'tsconfig.json'),
      JSON.stringify({
        compilerOptions: {
          strict: true,
          module: 'NodeNext',
          moduleResolution: 'NodeNext',
          types: [],
        },
        files: ['documented.ts', 'undocumented.ts'],
      }),
    );
    // A documented function whose options interface has an undocumented property: accepted.
    writeFileSync(
      join(scratch, 'documented.ts'),
      '/** Options. */\nexport interface Options {\n  size?: number;\n}\n' +
        '/**\n * The size.\n * @param options - The options.\n */\n' +
        'export function size(options: Options): number {\n  return options.size ?? 0;\n}\n',
    );
    writeFileSync(
      join(scratch, 'undocumented.ts'),
      'export function bare(): number {\n  return 1;\n}\n',
    );
    const tsconfig = join(scratch, 'tsconfig.json');
    const good = await typedoc(
      '--tsconfig',
      tsconfig,
      '--entryPoints',
      join(scratch, 'documented.ts'),
    );
    expect(good.output).not.toMatch(/\[(warning|error)\]/);
    expect(good.code).toBe(0);
    const bad = await typedoc(
      '--tsconfig',
      tsconfig,
      '--entryPoints',
      join(scratch, 'undocumented.ts'),
    );
    expect(bad.output).toMatch(/\[warning\]\S* bare .*does not have any documentation/);
    expect(bad.code).not.toBe(0);
  }, 300_000);
});
