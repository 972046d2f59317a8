/**
 * The backend's state directory: one JSON file per agent (`<agentId>.json`)
 * and its log (`<agentId>.log`). The directory is made 0700; a directory that
 * is a symbolic link, owned by another user or writable by others is refused,
 * files are opened with `O_NOFOLLOW` and checked with `fstat` (a link, FIFO or
 * device is never read), and records are written to a temporary file, synced
 * and renamed, so a crash leaves the old record or the new one.
 */
import * as fs from 'node:fs';
import { join, resolve } from 'node:path';
import { BackendError } from '../errors/index.js';
import { effectiveUid } from '../internal/uid.js';

/** What the backend records about one agent it started. */
export interface AgentRecord {
  version: 1;
  agentId: string;
  scaler: string;
  pid: number;
  /** `/proc/<pid>/stat` field 22: with `pid` and `bootId`, names this process only. */
  startTime: number;
  bootId: string;
  command: string[];
  /** Epoch ms. */
  startedAt: number;
}

const MAX_RECORD_BYTES = 64 * 1024;
const AGENT_ID = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;

/** Whether `id` can name an agent's files (no path separators, no leading dot). */
export function isSafeAgentId(id: unknown): id is string {
  return typeof id === 'string' && AGENT_ID.test(id) && !id.includes('..');
}

function refuse(path: string, why: string, cause?: unknown): never {
  throw new BackendError('', `Refusing the process backend's state directory ${path}: ${why}`, {
    cause,
  });
}

/** Create `dir` (0700) if needed and check it is safe; answer its absolute path. */
export function ensureStateDir(dir: string): string {
  const path = resolve(dir);
  try {
    fs.mkdirSync(path, { recursive: true, mode: 0o700 });
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') {
      refuse(path, `it cannot be created (${(error as Error).message}).`, error);
    }
  }
  const stat = fs.lstatSync(path);
  if (stat.isSymbolicLink()) refuse(path, 'it is a symbolic link. Give the real directory.');
  if (!stat.isDirectory()) refuse(path, 'it is not a directory.');
  const me = effectiveUid();
  if (me !== undefined && stat.uid !== me) {
    refuse(path, `it is owned by uid ${stat.uid}, not by this user (uid ${me}).`);
  }
  if ((stat.mode & 0o077) !== 0) {
    // Ours: tighten it rather than refuse (mkdir's mode is masked by the umask only downwards).
    fs.chmodSync(path, 0o700);
  }
  return path;
}

/** Write `record` atomically as `<dir>/<agentId>.json` (mode 0600). */
export function writeRecord(dir: string, record: AgentRecord): void {
  const final = join(dir, `${record.agentId}.json`);
  const temp = join(dir, `.${record.agentId}.json.${process.pid}.tmp`);
  const flags =
    fs.constants.O_WRONLY | fs.constants.O_CREAT | fs.constants.O_TRUNC | fs.constants.O_NOFOLLOW;
  const fd = fs.openSync(temp, flags, 0o600);
  try {
    fs.writeFileSync(fd, `${JSON.stringify(record)}\n`);
    fs.fsyncSync(fd);
  } finally {
    fs.closeSync(fd);
  }
  fs.renameSync(temp, final);
}

/** Read `<dir>/<agentId>.json`; `undefined` when absent, unsafe (a link, not a regular file) or not a record. */
export function readRecord(dir: string, agentId: string): AgentRecord | undefined {
  const path = join(dir, `${agentId}.json`);
  let fd: number;
  try {
    fd = fs.openSync(
      path,
      fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW | fs.constants.O_NONBLOCK,
    );
  } catch {
    return undefined;
  }
  try {
    const stat = fs.fstatSync(fd);
    if (!stat.isFile() || stat.size > MAX_RECORD_BYTES) return undefined;
    const me = effectiveUid();
    if (me !== undefined && stat.uid !== me) return undefined;
    return parseRecord(fs.readFileSync(fd, 'utf8'), agentId);
  } catch {
    return undefined;
  } finally {
    fs.closeSync(fd);
  }
}

function parseRecord(text: string, agentId: string): AgentRecord | undefined {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return undefined;
  }
  if (typeof value !== 'object' || value === null) return undefined;
  const r = value as Record<string, unknown>;
  const ok =
    r.version === 1 &&
    r.agentId === agentId &&
    typeof r.scaler === 'string' &&
    Number.isSafeInteger(r.pid) &&
    (r.pid as number) > 0 &&
    Number.isSafeInteger(r.startTime) &&
    typeof r.bootId === 'string' &&
    Array.isArray(r.command) &&
    r.command.every((a) => typeof a === 'string') &&
    typeof r.startedAt === 'number';
  return ok ? (value as AgentRecord) : undefined;
}

/** The agent ids that have a record file in `dir`. */
export function listRecordIds(dir: string): string[] {
  return fs
    .readdirSync(dir)
    .filter((name) => name.endsWith('.json') && !name.startsWith('.'))
    .map((name) => name.slice(0, -'.json'.length))
    .filter(isSafeAgentId);
}

/** Remove `<dir>/<agentId>.json`; absent is fine. */
export function removeRecord(dir: string, agentId: string): void {
  try {
    fs.unlinkSync(join(dir, `${agentId}.json`));
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
  }
}

/** Open `<dir>/<agentId>.log` for appending (0600, never through a link): the agent's stdout and stderr. */
export function openLog(dir: string, agentId: string): number {
  return fs.openSync(
    join(dir, `${agentId}.log`),
    fs.constants.O_WRONLY | fs.constants.O_CREAT | fs.constants.O_APPEND | fs.constants.O_NOFOLLOW,
    0o600,
  );
}

/**
 * Keep `<dir>/<agentId>.log` under `maxBytes`: when larger, its content moves
 * to `<agentId>.log.1` (replacing the previous one) and the log is emptied in
 * place (the agent writes with `O_APPEND`, so it goes on at the new end).
 * Lines written between the copy and the truncation are lost.
 */
export function capLog(dir: string, agentId: string, maxBytes: number): void {
  const path = join(dir, `${agentId}.log`);
  let fd: number;
  try {
    fd = fs.openSync(path, fs.constants.O_RDWR | fs.constants.O_NOFOLLOW | fs.constants.O_NONBLOCK);
  } catch {
    return;
  }
  try {
    const stat = fs.fstatSync(fd);
    if (!stat.isFile() || stat.size <= maxBytes) return;
    const keep = Math.min(stat.size, maxBytes);
    const buffer = Buffer.alloc(keep);
    const read = fs.readSync(fd, buffer, 0, keep, stat.size - keep);
    const old = join(dir, `.${agentId}.log.1.${process.pid}.tmp`);
    fs.writeFileSync(old, buffer.subarray(0, read), { mode: 0o600, flag: 'w' });
    fs.renameSync(old, `${path}.1`);
    fs.ftruncateSync(fd, 0);
  } finally {
    fs.closeSync(fd);
  }
}

/**
 * The exit code the agent's wrapper shell wrote to `<dir>/<agentId>.exit`
 * when the agent ended, then remove the file; `null` when there is none (the
 * wrapper was killed, or never ran).
 */
export function takeExitCode(dir: string, agentId: string): number | null {
  const path = join(dir, `${agentId}.exit`);
  let code: number | null = null;
  try {
    const fd = fs.openSync(
      path,
      fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW | fs.constants.O_NONBLOCK,
    );
    try {
      const stat = fs.fstatSync(fd);
      if (stat.isFile() && stat.size <= 16) {
        const value = Number(fs.readFileSync(fd, 'utf8').trim());
        if (Number.isInteger(value) && value >= 0 && value <= 255) code = value;
      }
    } finally {
      fs.closeSync(fd);
    }
  } catch {
    return null;
  }
  try {
    fs.unlinkSync(path);
  } catch {
    // Gone already.
  }
  return code;
}

/** The path of the file the agent's wrapper shell writes its exit code to. */
export function exitFilePath(dir: string, agentId: string): string {
  return join(dir, `${agentId}.exit`);
}

/**
 * Whether `program` can be run: an executable file at that path when it holds
 * a `/` (relative to `cwd`), otherwise in one of the `PATH` directories.
 */
export function findProgram(
  program: string,
  path: string | undefined,
  cwd: string | undefined,
): boolean {
  const executable = (file: string) => {
    try {
      fs.accessSync(file, fs.constants.X_OK);
      return fs.statSync(file).isFile();
    } catch {
      return false;
    }
  };
  const base = cwd ?? process.cwd();
  if (program.includes('/')) return executable(resolve(base, program));
  return (path ?? '')
    .split(':')
    .some((dir) => dir !== '' && executable(resolve(base, dir, program)));
}
