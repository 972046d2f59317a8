import { execFile } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';

const run = promisify(execFile);
const root = join(import.meta.dirname, '..');
// Examples that need an outside service say so with a NATS_URL guard; they must
// still exit 0 without it.
// 01-quickstart (the demo) is run and checked by test/manager/demo.test.ts;
// example tests (NN-*.test.ts) run under vitest itself (vitest.config.ts).
const examples = readdirSync(join(root, 'examples')).filter(
  (f) => /^\d\d-.*\.ts$/.test(f) && f !== '01-quickstart.ts' && !f.endsWith('.test.ts'),
);

describe('examples run as they are', () => {
  it('has examples', () => {
    expect(examples.length).toBeGreaterThan(0);
  });

  it.each(examples)('%s exits 0 and prints something', async (file) => {
    const env = { ...process.env };
    delete env.NATS_URL;
    const { stdout } = await run(process.execPath, ['--import', 'tsx', join('examples', file)], {
      cwd: root,
      env,
      timeout: 120_000,
    });
    expect(stdout.trim().length).toBeGreaterThan(0);
  });
});
