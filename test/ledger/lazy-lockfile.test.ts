import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';

const run = promisify(execFile);
const root = join(import.meta.dirname, '..', '..');

describe('importing the package', () => {
  it('installs no signal handlers, neither on import nor on the first lock', async () => {
    const script = `
      const before = process.listenerCount('SIGINT');
      const sp = await import('./src/index.ts');
      const afterImport = process.listenerCount('SIGINT');
      const { mkdtempSync } = await import('node:fs');
      const { tmpdir } = await import('node:os');
      const dir = mkdtempSync(tmpdir() + '/sp-lazy-');
      const ledger = new sp.MachineLedger({ dir, instanceId: 'lazy' });
      ledger.registerPool('p', { maxCpu: 1 });
      await ledger.tryReserve('p', 'a', 0.5, 0);
      const afterLock = process.listenerCount('SIGINT');
      await ledger.close();
      console.log(JSON.stringify({ before, afterImport, afterLock }));
    `;
    const { stdout } = await run(
      process.execPath,
      ['--import', 'tsx', '--input-type=module', '-e', script],
      { cwd: root },
    );
    const counts = JSON.parse(stdout.trim().split('\n').at(-1)!);
    expect(counts.afterImport).toBe(counts.before);
    // The lock is a plain mkdir protocol: no exit hook (proper-lockfile's signal-exit) is installed.
    expect(counts.afterLock).toBe(counts.before);
  });
});
