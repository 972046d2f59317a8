/**
 * Importing any subpath installs no signal handler, and neither does taking,
 * using and releasing the ledger lock, nor closing the ledger: the host keeps
 * full control of its own shutdown (proper-lockfile, now replaced, installed
 * `signal-exit` handlers on the first lock that stayed after `close()`).
 */
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';

const run = promisify(execFile);
const root = join(import.meta.dirname, '..', '..');

describe('signal handlers', () => {
  it('none for SIGINT, SIGTERM or SIGHUP after importing every subpath, locking and closing', async () => {
    const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));
    const entries = Object.keys(pkg.exports)
      .filter((subpath) => subpath !== './package.json')
      .map((subpath) =>
        subpath === '.' ? './src/index.ts' : `./src/${subpath.slice(2)}/index.ts`,
      );
    expect(entries.length).toBeGreaterThanOrEqual(10);
    const script = `
      const signals = ['SIGINT', 'SIGTERM', 'SIGHUP'];
      const count = () => Object.fromEntries(signals.map((s) => [s, process.listeners(s).length]));
      const before = count();
      const modules = [];
      for (const entry of ${JSON.stringify(entries)}) modules.push(await import(entry));
      const afterImport = count();
      const { MachineLedger } = modules[0];
      const { mkdtempSync, rmSync } = await import('node:fs');
      const { tmpdir } = await import('node:os');
      const dir = mkdtempSync(tmpdir() + '/sp-signals-');
      const ledger = new MachineLedger({ dir, instanceId: 'signals' });
      ledger.registerPool('p', { maxCpu: 2 });
      ledger.start(1000);
      await ledger.reserve('p', 'a', 1, 0);
      await ledger.release('p', 'a');
      await ledger.reapStale('p');
      const afterLock = count();
      ledger.stop();
      await ledger.releaseAllForInstance();
      await ledger.close();
      const afterClose = count();
      rmSync(dir, { recursive: true, force: true });
      console.log(JSON.stringify({ loaded: modules.length, before, afterImport, afterLock, afterClose }));
    `;
    const { stdout } = await run(
      process.execPath,
      ['--import', 'tsx', '--input-type=module', '-e', script],
      { cwd: root },
    );
    const result = JSON.parse(stdout.trim().split('\n').at(-1)!);
    const none = { SIGINT: 0, SIGTERM: 0, SIGHUP: 0 };
    expect(result.loaded).toBe(entries.length);
    expect(result.before).toEqual(none);
    expect(result.afterImport).toEqual(none);
    expect(result.afterLock).toEqual(none);
    expect(result.afterClose).toEqual(none);
  });
});
