/**
 * Every ```ts block in README.md and docs/*.md type-checks against the built
 * package, as a user's file would: each block becomes a module in a temp
 * project where `scaler-primitives/...` resolves to this package's dist/
 * (through its exports map), and one `tsc --noEmit` checks them all.
 *
 * A block that continues an earlier one on its page (uses its `fleet`,
 * `manager`...) says so with a hidden prelude in an HTML comment right above
 * the fence, which is checked with it:
 *
 *     <!-- ts-prelude
 *     import { createTestFleet } from 'scaler-primitives/testing';
 *     declare const config: import('scaler-primitives/manager').ScalerConfigInput;
 *     -->
 *
 * `<!-- ts-page-prelude ... -->` applies to every block after it on the page.
 * A block that cannot compile on its own (pseudo-code) is fenced ```ts nocheck
 * and must be listed in NOT_CHECKED below with the reason.
 */
import { execFile } from 'node:child_process';
import { readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureBuilt, root } from '../helpers/built-package.js';
import { createDocProject, tsFenceAt, typeCheck } from '../helpers/doc-project.js';

const _run = promisify(execFile);

/** Blocks fenced ```ts nocheck, as `<file>: <first line of the block>`, and why. */
const NOT_CHECKED: Record<string, string> = {
  'docs/migrating-from-kici.md: // before':
    'before and after: the "before" imports are a kici codebase\'s own files (./scaler/*.js), and both import the same names',
  "docs/observability.md: import { PrometheusExporter } from '@opentelemetry/exporter-prometheus';":
    'the Prometheus exporter is not a dependency of this package, not even for development',
};

interface TsBlock {
  /** `README.md` or `docs/<page>.md`, and the 1-based line of the opening fence. */
  file: string;
  line: number;
  code: string;
  prelude: string;
  nocheck: boolean;
}

/** Every ```ts block of a markdown text, with its hidden prelude. */
function tsBlocks(file: string, text: string): TsBlock[] {
  const lines = text.split('\n');
  const blocks: TsBlock[] = [];
  // A page prelude applies to every block after it on the page.
  let pagePrelude = '';
  for (let i = 0; i < lines.length; i++) {
    if (lines[i]!.startsWith('<!-- ts-page-prelude')) {
      let end = i + 1;
      while (end < lines.length && lines[end]!.trim() !== '-->') end++;
      pagePrelude += `${lines.slice(i + 1, end).join('\n')}\n`;
      i = end;
      continue;
    }
    const fence = tsFenceAt(lines, i);
    if (!fence) continue;
    let prelude = '';
    let k = i - 1;
    while (k >= 0 && lines[k]!.trim() === '') k--;
    if (k >= 0 && lines[k]!.trim() === '-->') {
      const end = k;
      while (k >= 0 && !lines[k]!.includes('<!-- ts-prelude')) k--;
      if (k >= 0 && lines[k]!.startsWith('<!-- ts-prelude')) {
        prelude = lines.slice(k + 1, end).join('\n');
      }
    }
    prelude = `${pagePrelude}${prelude}`.replace(/\n$/, '');
    blocks.push({
      file,
      line: i + 1,
      code: fence.body.join('\n'),
      prelude,
      nocheck: fence.flags.includes('nocheck'),
    });
    i = fence.end;
  }
  return blocks;
}

function pages(): string[] {
  const docs = readdirSync(join(root, 'docs'))
    .filter((f) => f.endsWith('.md'))
    .sort()
    .map((f) => `docs/${f}`);
  return ['README.md', ...docs];
}

const blocks = pages().flatMap((page) => tsBlocks(page, readFileSync(join(root, page), 'utf8')));
let work = '';

beforeAll(async () => {
  await ensureBuilt();
  work = createDocProject('sp-doc-blocks-');
  // `yaml` is the parser the docs suggest for YAML configs; not a dependency, so its shape is declared here.
  writeFileSync(
    join(work, 'ambient.d.ts'),
    "declare module 'yaml' {\n  const YAML: { parse(text: string): any };\n  export default YAML;\n}\n",
  );
}, 300_000);

afterAll(() => {
  if (work) rmSync(work, { recursive: true, force: true });
});

describe('the ts blocks of README.md and docs/*.md', () => {
  it('finds the blocks of every page, and only the listed ones are not checked', () => {
    expect(blocks.length).toBeGreaterThan(20);
    const skipped = blocks
      .filter((b) => b.nocheck)
      .map((b) => `${b.file}: ${b.code.split('\n')[0]!.trim()}`);
    expect(skipped.sort()).toEqual(Object.keys(NOT_CHECKED).sort());
  });

  it('type-check against the built package (tsc --noEmit, strict)', async () => {
    const files: string[] = [];
    const origin = new Map<string, TsBlock>();
    blocks
      .filter((b) => !b.nocheck)
      .forEach((block, n) => {
        const name = `block-${String(n).padStart(3, '0')}.ts`;
        const preludeLines = block.prelude === '' ? 0 : block.prelude.split('\n').length;
        // Line numbers in tsc's output map back to the page: the code starts
        // on the line after the fence.
        const header = `// ${block.file}:${block.line}\n`;
        writeFileSync(
          join(work, name),
          `${header}${block.prelude}${preludeLines ? '\n' : ''}${block.code}\nexport {};\n`,
        );
        files.push(name);
        origin.set(name, { ...block, line: block.line - 1 - preludeLines });
      });
    const result = await typeCheck(work, ['ambient.d.ts', ...files]);
    // block-007.ts(12,5): error TS2304: ... -> docs/testing.md:123: error TS2304: ...
    const problems = result
      .split('\n')
      .filter((line) => line.trim() !== '')
      .map((line) => {
        const m = /^(block-\d+\.ts)\((\d+),(\d+)\): (.*)$/.exec(line);
        const block = m ? origin.get(m[1]!) : undefined;
        return block ? `${block.file}:${block.line + Number(m![2]!)}: ${m![4]}` : line;
      });
    expect(problems).toEqual([]);
  }, 300_000);
});
