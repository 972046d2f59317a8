/**
 * Repeated storage-fault spells under the file ledger, for the storage-fault
 * test and `npm run bench -- ledger-spells`: one small tmpfs mounted in a temp
 * directory (root; always unmounted), 4 worker processes
 * (`test/fixtures/ledger/spell-worker.ts`) contending on one pool of 4 CPUs,
 * and a series of spells, each one of: space filled, inodes exhausted, or the
 * filesystem remounted read-only. After each spell clears, the workers pause
 * (calls in flight finish, unsettled calls are settled by one more call) and
 * the pool file is compared with what every worker was told: a row whose
 * caller was not answered ok (or was told it was released) is a stray.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import {
  closeSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
  writeSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type FixtureEvent, type FixtureProcess, startFixture, stopFixture } from './processes.js';

/** The faults a spell can make. */
export const SPELL_KINDS = ['space', 'inodes', 'readonly'] as const;
/** One kind of fault. */
export type SpellKind = (typeof SPELL_KINDS)[number];

/** What one spell showed. */
export interface SpellFigures {
  kind: SpellKind;
  /** Ms from the fault clearing to the first grant after it (undefined: none came). */
  firstGrantMs: number | undefined;
  /** Grants while the fault was in place. */
  grantsDuring: number;
  /** Rows in the pool file that no worker holds, with what their caller was told. */
  strays: Array<{ agentId: string; told: string }>;
  /** Combining files (not inbox directories) left once the workers paused. */
  leftovers: string[];
  /** A worker was SIGKILLed during this spell (its rows go with its lease). */
  killed: string | undefined;
}

/** What a run of spells showed. */
export interface SpellRun {
  spells: SpellFigures[];
  /** Each worker's `done` event (the killed ones excluded). */
  results: FixtureEvent[];
  /** The pool file's rows once every worker released and closed. */
  finalRows: Array<{ agentId: string }>;
  /** Combining files (inbox directories included) left once every worker closed. */
  finalLeftovers: string[];
}

/** Options of {@link runStorageSpells}. */
export interface SpellOptions {
  /** The spells, in order. */
  kinds: readonly SpellKind[];
  /** How long each fault lasts. @default 1000 */
  faultMs?: number;
  /** SIGKILL one worker during these spells (by index) and start a new one after. */
  killDuring?: readonly number[];
  /** Calls in flight per worker. @default 2 */
  lanes?: number;
  /** Each grant is held up to this long. @default 4 */
  holdMs?: number;
  /** The workers' `staleMs` (how soon a killed holder's lock is taken over). */
  staleMs?: number;
  /** Print a line per spell. */
  log?: (line: string) => void;
}

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function until(what: string, check: () => boolean, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline)
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await pause(10);
  }
}

function remount(mount: string, mode: 'ro' | 'rw'): void {
  // A remount read-only fails (EBUSY) while a file is open for writing: retry.
  const started = Date.now();
  for (;;) {
    const result = spawnSync('mount', ['-o', `remount,${mode}`, mount]);
    if (result.status === 0) return;
    if (Date.now() - started > 5000) throw new Error(`remount ${mode} failed: ${result.stderr}`);
  }
}

// Fill the filesystem's space: one file, `fill`, written until ENOSPC. Returns its path.
export function fillSpaceOnce(mount: string): string {
  const file = join(mount, 'fill');
  spawnSync('dd', ['if=/dev/zero', `of=${file}`, 'bs=64k'], { stdio: 'ignore' });
  return file;
}

// Fill the filesystem's space (one file written until ENOSPC), and keep taking
// every page the workers free until stopped: a rename frees the replaced file's
// page, and without this the workers could go on forever in the one page a
// rename left free, never meeting the fault. The returned function stops and
// removes the file.
export function fillSpace(mount: string): () => void {
  const file = fillSpaceOnce(mount);
  const fd = openSync(file, 'a');
  const page = Buffer.alloc(4096);
  const grab = () => {
    for (;;) {
      try {
        writeSync(fd, page);
      } catch {
        return;
      }
    }
  };
  const timer = setInterval(grab, 1);
  return () => {
    clearInterval(timer);
    closeSync(fd);
    rmSync(file);
  };
}

// Start a fault of `kind` on `mount`; returns the function that clears it.
function startFault(kind: SpellKind, mount: string): () => void {
  if (kind === 'space') {
    return fillSpace(mount);
  }
  if (kind === 'readonly') {
    remount(mount, 'ro');
    return () => remount(mount, 'rw');
  }
  // Every free inode taken, and every inode the workers free taken again.
  const dir = join(mount, 'inodes');
  mkdirSync(dir);
  let made = 0;
  const grab = () => {
    for (;;) {
      try {
        writeFileSync(join(dir, String(made)), '');
        made++;
      } catch {
        return;
      }
    }
  };
  grab();
  const timer = setInterval(grab, 1);
  return () => {
    clearInterval(timer);
    rmSync(dir, { recursive: true, force: true });
  };
}

// The files (and, with `dirs`, the directories) under a combining directory.
function combineFiles(combine: string, dirs: boolean): string[] {
  if (!existsSync(combine)) return [];
  return readdirSync(combine, { recursive: true, withFileTypes: true })
    .filter((entry) => dirs || entry.isFile())
    .map((entry) => join(entry.parentPath, entry.name).slice(combine.length + 1));
}

/**
 * Run `options.kinds` spells against 4 contending worker processes on one
 * tmpfs, and return what each showed. Throws when the workers stop answering.
 */
export async function runStorageSpells(options: SpellOptions): Promise<SpellRun> {
  const faultMs = options.faultMs ?? 1000;
  const log =
    options.log ?? (process.env.DEBUG_SPELLS ? (line: string) => console.log(line) : undefined);
  const mount = mkdtempSync(join(tmpdir(), 'ledger-spells-'));
  execFileSync('mount', ['-t', 'tmpfs', '-o', 'mode=0700,size=1m,nr_inodes=200', 'tmpfs', mount]);
  const running: FixtureProcess[] = [];
  const goFile = join(tmpdir(), `ledger-spells-go-${process.pid}-${Date.now()}`);
  try {
    const dir = join(mount, 'ledger');
    mkdirSync(dir, { mode: 0o700 });
    const start = (instanceId: string, name: string) => {
      const fixture = startFixture('ledger/spell-worker.ts', [
        JSON.stringify({
          dir,
          pool: 'p',
          cap: { maxCpu: 4 },
          instanceId,
          agentPrefix: name,
          cpus: 1,
          lanes: options.lanes ?? 2,
          holdMs: options.holdMs ?? 4,
          ...(options.staleMs === undefined ? {} : { staleMs: options.staleMs }),
          goFile,
        }),
      ]);
      running.push(fixture);
      return fixture;
    };
    let workers = Array.from({ length: 4 }, (_, i) => start(`w${i}`, `w${i}`));
    await Promise.all(workers.map((w) => w.waitFor('ready', 60_000)));
    writeFileSync(goFile, '');
    await pause(500);
    const spells: SpellFigures[] = [];
    let restarts = 0;
    const names = workers.map((_, i) => `w${i}`);
    // Workers SIGKILLed: their rows stay until their lease expires.
    const dead = new Set<string>();
    for (const [index, kind] of options.kinds.entries()) {
      const before = workers.map((w) => w.events.length);
      const clear = startFault(kind, mount);
      const faultReady = Date.now();
      let killed: string | undefined;
      if (options.killDuring?.includes(index)) {
        await pause(faultMs / 2);
        const victim = workers[index % workers.length]!;
        victim.child.kill('SIGKILL');
        await victim.exited;
        killed = names[index % workers.length]!;
        dead.add(killed);
        await pause(faultMs / 2);
      } else {
        await pause(faultMs);
      }
      clear();
      const cleared = Date.now();
      if (killed !== undefined) {
        // The same instance comes back (a restart): the dead process's rows are stale at once for it.
        const slot = index % workers.length;
        const name = `w${slot}r${++restarts}`;
        const fresh = start(`w${slot}`, name);
        names[index % workers.length] = name;
        workers = workers.map((w, i) => (i === index % workers.length ? fresh : w));
        before[index % workers.length] = 0;
        await fresh.waitFor('ready', 60_000);
      }
      // Let grants resume, then pause every worker and compare the file with their answers.
      await until(
        `a grant after spell ${index} cleared`,
        () =>
          workers.some((w) =>
            w.events.some((e) => e.event === 'grant' && (e.at as number) >= cleared),
          ),
        20_000,
      );
      await pause(500);
      for (const w of workers) w.child.kill('SIGUSR1');
      const pausedEvents = await Promise.all(
        workers.map(async (w, i) => {
          await until(
            `worker ${i} to pause after spell ${index}`,
            () => w.events.slice(before[i]).some((e) => e.event === 'paused'),
            60_000,
          );
          return w.events.slice(before[i]).find((e) => e.event === 'paused')!;
        }),
      );
      // Every worker is idle now: one more call each deals with what the
      // others' last cycles left for it.
      const swept = workers.map((w) => w.events.length);
      for (const w of workers) w.child.kill('SIGUSR2');
      await Promise.all(
        workers.map((w, i) =>
          until(
            `worker ${i} to sweep after spell ${index}`,
            () => w.events.slice(swept[i]).some((e) => e.event === 'swept'),
            60_000,
          ),
        ),
      );
      const doc = JSON.parse(readFileSync(join(dir, 'p.json'), 'utf8')) as {
        reservations: Array<{ agentId: string }>;
      };
      const heldAll = new Set(pausedEvents.flatMap((e) => e.held as string[]));
      const told = Object.assign({}, ...pausedEvents.map((e) => e.failed as object)) as Record<
        string,
        string
      >;
      const strays = doc.reservations
        .filter((row) => !heldAll.has(row.agentId) && !dead.has(row.agentId.split('-')[0]!))
        .map((row) => ({ agentId: row.agentId, told: told[row.agentId] ?? 'released or unknown' }));
      const combine = join(dir, '.p.combine');
      const leftovers = combineFiles(combine, false);
      const grants = pausedEvents.flatMap((e) => e.grants as number[]).sort((a, b) => a - b);
      const first = grants.find((at) => at >= cleared);
      const figures: SpellFigures = {
        kind,
        firstGrantMs: first === undefined ? undefined : first - cleared,
        grantsDuring: grants.filter((at) => at > faultReady && at < cleared).length,
        strays,
        leftovers,
        killed,
      };
      spells.push(figures);
      log?.(`spell ${index} ${JSON.stringify(figures)}`);
      if (process.env.DEBUG_SPELLS) {
        log?.(`codes so far: ${JSON.stringify(pausedEvents.map((e) => e.codes))}`);
        for (const name of leftovers) {
          try {
            log?.(`${name}: ${readFileSync(join(combine, name), 'utf8').slice(0, 600)}`);
          } catch {}
        }
      }
      const marks = workers.map((w) => w.events.length);
      for (const w of workers) w.child.kill('SIGUSR1');
      await Promise.all(
        workers.map((w, i) =>
          until(
            `worker ${i} to resume`,
            () => w.events.slice(marks[i]).some((e) => e.event === 'resumed'),
            30_000,
          ),
        ),
      );
      await pause(300);
    }
    for (const w of workers) w.child.kill('SIGTERM');
    const results = await Promise.all(
      workers.map(async (w) => {
        const exit = await w.exited;
        if (exit.code !== 0) throw new Error(`a worker exited with ${exit.code}: ${w.stderr()}`);
        // Its last (long) line may still be on its way.
        const out = w.child.stdout!;
        if (!out.readableEnded) await new Promise((resolve) => out.once('end', resolve));
        const done = w.events.find((e) => e.event === 'done');
        if (done === undefined) throw new Error(`a worker printed no done event: ${w.stderr()}`);
        return done;
      }),
    );
    const finalRows = (
      JSON.parse(readFileSync(join(dir, 'p.json'), 'utf8')) as {
        reservations: Array<{ agentId: string }>;
      }
    ).reservations.filter((row) => !dead.has(row.agentId.split('-')[0]!));
    return {
      spells,
      results,
      finalRows,
      finalLeftovers: combineFiles(join(dir, '.p.combine'), true),
    };
  } finally {
    await Promise.all(running.map((p) => stopFixture(p)));
    rmSync(goFile, { force: true });
    spawnSync('umount', ['-l', mount]);
    rmSync(mount, { recursive: true, force: true });
  }
}
