/**
 * A throwaway TypeScript project in which code shown to users (docs blocks,
 * TSDoc examples) is type-checked as a user's own file would be: the package
 * resolves by name through its exports map to the built dist/, beside the
 * dependencies and peers an example may import.
 */
import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { root } from './built-package.js';

const run = promisify(execFile);

/** What a shown example may import besides the package (vitest: the conformance suites). */
const LINKED = ['@nats-io', '@opentelemetry', 'zod', 'execa', 'croner', 'vitest', '@vitest'];

/** Make the project in a new temp directory and return its path (build dist/ first). */
export function createDocProject(prefix: string): string {
  const work = mkdtempSync(join(tmpdir(), prefix));
  mkdirSync(join(work, 'node_modules', '@types'), { recursive: true });
  symlinkSync(root, join(work, 'node_modules', 'scaler-primitives'), 'dir');
  symlinkSync(
    join(root, 'node_modules', '@types', 'node'),
    join(work, 'node_modules', '@types', 'node'),
    'dir',
  );
  for (const name of LINKED) {
    try {
      symlinkSync(join(root, 'node_modules', name), join(work, 'node_modules', name), 'dir');
    } catch {}
  }
  writeFileSync(
    join(work, 'package.json'),
    JSON.stringify({ name: 'doc-project', type: 'module', private: true }),
  );
  return work;
}

/**
 * One strict `tsc --noEmit` over `files` (names inside `work`): its output,
 * `''` when everything type-checks.
 */
export async function typeCheck(work: string, files: readonly string[]): Promise<string> {
  writeFileSync(
    join(work, 'tsconfig.json'),
    JSON.stringify({
      compilerOptions: {
        target: 'ES2022',
        lib: ['ES2023'],
        module: 'NodeNext',
        moduleResolution: 'NodeNext',
        types: ['node'],
        strict: true,
        noEmit: true,
        skipLibCheck: true,
      },
      files,
    }),
  );
  const tsc = join(root, 'node_modules', 'typescript', 'bin', 'tsc');
  return run(process.execPath, [tsc, '-p', work, '--pretty', 'false'], {
    cwd: work,
    maxBuffer: 16 * 1024 * 1024,
  }).then(
    () => '',
    (error: { stdout?: string }) => error.stdout ?? String(error),
  );
}

/** A ```ts fenced block found in text lines. */
export interface TsFence {
  /** The block's lines, without the fence's own indent. */
  body: string[];
  /** The words after the language (`nocheck`, ...). */
  flags: string[];
  /** The index of the closing fence (or the end). */
  end: number;
}

/** The ```ts (or ```typescript) block opening at `lines[i]`, or undefined when none opens there. */
export function tsFenceAt(lines: readonly string[], i: number): TsFence | undefined {
  const open = /^(\s*)```(ts|typescript)(?:\s+(.*))?\s*$/.exec(lines[i]!);
  if (!open) return undefined;
  const indent = open[1]!.length;
  const body: string[] = [];
  let end = i + 1;
  for (; end < lines.length && !/^\s*```\s*$/.test(lines[end]!); end++)
    body.push(lines[end]!.slice(indent));
  return { body, flags: (open[3] ?? '').split(/\s+/), end };
}
