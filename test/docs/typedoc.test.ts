/**
 * `npm run docs` (typedoc) builds with no warnings: typedoc.json treats every
 * warning (an undocumented export, a broken {@link}, a type used but not
 * exported) as an error. CI runs README's test command (`npm test`), so the
 * check lives here; `--emit none` validates without writing the site.
 */
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';

const root = join(import.meta.dirname, '..', '..');

describe('the API docs (typedoc)', () => {
  it('build with no warning: every export documented, every link resolved', async () => {
    const result = await promisify(execFile)(
      process.execPath,
      [join(root, 'node_modules', 'typedoc', 'bin', 'typedoc'), '--emit', 'none'],
      { cwd: root, maxBuffer: 16 * 1024 * 1024, timeout: 280_000 },
    ).then(
      ({ stdout, stderr }) => ({ code: 0, output: `${stdout}${stderr}` }),
      (error: { code: number; stdout: string; stderr: string }) => ({
        code: error.code,
        output: `${error.stdout}${error.stderr}`,
      }),
    );
    expect(result.output).not.toMatch(/\[(warning|error)\]/);
    expect(result.code).toBe(0);
  }, 300_000);
});
