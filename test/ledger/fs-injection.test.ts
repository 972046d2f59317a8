import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { codeOf } from '../helpers/source.js';

// STYLE.md 6: the ledger reaches the filesystem only through the injected
// `LedgerFs`. Only fs.ts may import node:fs.
const srcDir = join(import.meta.dirname, '../../src/ledger');
const files = readdirSync(srcDir, { recursive: true, encoding: 'utf8' })
  .filter((f) => f.endsWith('.ts'))
  .sort();

describe('ledger sources route fs through the injected object', () => {
  it('finds the sources', () => {
    expect(files).toContain(join('file', 'machine-ledger.ts'));
    expect(files).toContain('fs.ts');
  });

  it.each(files.filter((f) => f !== 'fs.ts'))('%s does not import node:fs or fs', (file) => {
    // Code only: a TSDoc example may show a user passing `node:fs` in.
    const text = codeOf(readFileSync(join(srcDir, file), 'utf8'));
    expect(text).not.toMatch(/from\s+['"](node:)?fs(\/promises)?['"]/);
    expect(text).not.toMatch(/require\(\s*['"](node:)?fs/);
    expect(text).not.toMatch(/import\(\s*['"](node:)?fs/);
  });

  it('no ledger source loads proper-lockfile: the lock protocol is ours (file/lock.ts) and uses the injected fs', () => {
    for (const file of files) {
      const text = readFileSync(join(srcDir, file), 'utf8');
      expect(text, file).not.toMatch(/['"]proper-lockfile['"]/);
    }
    const lock = readFileSync(join(srcDir, 'file', 'lock.ts'), 'utf8');
    expect(lock).toMatch(/this\.#fs\.mkdirSync\(/);
  });
});
