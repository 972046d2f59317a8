/**
 * A node:fs for the ledgers' `fs` option whose writes fail with EROFS while
 * `state.down` is true: a read-only spell or a storage outage, without root
 * tricks (as root, chmod does not stop writes).
 */
import * as nodeFs from 'node:fs';
import type { LedgerFs } from '../../src/ledger/fs.js';

/** node:fs whose writes fail with EROFS while `down` is true. */
export function faultyFs(state: { down: boolean }): LedgerFs {
  const { O_WRONLY, O_RDWR, O_CREAT } = nodeFs.constants;
  const erofs = (what: string) =>
    Object.assign(new Error(`EROFS: read-only file system, ${what}`), {
      code: 'EROFS',
      errno: -30,
      syscall: what,
    });
  const writes = new Set([
    'futimesSync',
    'utimesSync',
    'lutimesSync',
    'writeFileSync',
    'writeSync',
    'renameSync',
    'mkdirSync',
    'unlinkSync',
    'rmdirSync',
    'rmSync',
    'ftruncateSync',
    'fsyncSync',
    'linkSync',
    'symlinkSync',
  ]);
  const wrapped: Record<string, unknown> = { ...nodeFs };
  for (const name of writes) {
    const real = (nodeFs as unknown as Record<string, (...args: unknown[]) => unknown>)[name];
    if (typeof real !== 'function') continue;
    wrapped[name] = (...args: unknown[]) => {
      if (state.down) throw erofs(name);
      return real.apply(nodeFs, args);
    };
  }
  wrapped.openSync = (path: nodeFs.PathLike, flags?: nodeFs.OpenMode, mode?: nodeFs.Mode) => {
    const writing =
      typeof flags === 'number'
        ? (flags & (O_WRONLY | O_RDWR | O_CREAT)) !== 0
        : flags !== undefined && flags !== 'r' && flags !== 'rs';
    if (state.down && writing) throw erofs('open');
    return nodeFs.openSync(path, flags ?? 'r', mode);
  };
  const promises: Record<string, unknown> = { ...nodeFs.promises };
  for (const name of ['writeFile', 'rename', 'mkdir', 'unlink', 'rmdir', 'rm', 'utimes', 'open']) {
    const real = (nodeFs.promises as unknown as Record<string, (...args: unknown[]) => unknown>)[
      name
    ];
    if (typeof real !== 'function') continue;
    promises[name] = async (...args: unknown[]) => {
      if (state.down && (name !== 'open' || (args[1] !== undefined && args[1] !== 'r'))) {
        throw erofs(name);
      }
      return real.apply(nodeFs.promises, args);
    };
  }
  wrapped.promises = promises;
  return wrapped as unknown as LedgerFs;
}
