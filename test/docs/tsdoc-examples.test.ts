/**
 * The TSDoc examples are part of the API docs, so they are held to what the
 * README's blocks are held to (test/docs/ts-blocks.test.ts):
 *
 * 1. Every class and function a subpath of package.json `exports` exports has
 *    an `@example` in its TSDoc, except the names in NOT_YET below (a list that
 *    only shrinks: a listed name that has an example fails the test). Plain data
 *    interfaces, types and constants need none.
 * 2. Every ```ts block inside an `@example` of a public declaration (an export
 *    or a member of one) type-checks against the BUILT package, strict, as its
 *    own module in a temp project where `scaler-primitives/...` resolves
 *    through the exports map to dist/. One `tsc --noEmit` checks them all.
 *
 * The convention: an example is complete. It imports what it uses from
 * `scaler-primitives/...` (by the subpath a user would), and takes the values
 * it is given as `declare const ledger: MachineLedger;` lines, which say
 * honestly what the example assumes. No hidden prelude. Top-level `await` is
 * fine (each block is an ES module). A block that cannot compile on its own is
 * fenced ```ts nocheck and listed in NOT_CHECKED with the reason.
 *
 * Examples on declarations no subpath exports cannot import what they show,
 * so they are not type-checked (they are read with the source).
 */
import { execFile } from 'node:child_process';
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { promisify } from 'node:util';
import ts from 'typescript';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureBuilt, root } from '../helpers/built-package.js';
import { createDocProject, tsFenceAt, typeCheck } from '../helpers/doc-project.js';

const _run = promisify(execFile);

/**
 * Public exports that have no `@example` yet. Only shrinks: the test fails
 * when a listed name has one (remove it then) or when a name is missing from
 * this list and has none.
 */
const NOT_YET: readonly string[] = [];

/**
 * Examples that do not type-check yet, as `<file>: <declaration>`. Only
 * shrinks: a listed example that type-checks fails the test (remove it then).
 * Most are incomplete (no imports, undeclared values) rather than wrong.
 */
const NOT_YET_CHECKED: readonly string[] = [];

/** Example blocks fenced ```ts nocheck, as `<file>: <declaration>`, and why. */
const NOT_CHECKED: Record<string, string> = {};

/** The src entry point of every subpath of package.json `exports`. */
function entryPoints(): string[] {
  const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as {
    exports: Record<string, unknown>;
  };
  return Object.keys(pkg.exports)
    .filter((key) => key !== './package.json')
    .map((key) => join(root, key === '.' ? 'src/index.ts' : `src/${key.slice(2)}/index.ts`));
}

interface ExampleBlock {
  /** `src/...ts`, the declaration the example belongs to, 1-based line of the fence. */
  file: string;
  owner: string;
  line: number;
  code: string;
  nocheck: boolean;
  /** Whether the declaration (or the one it is a member of) is exported by a subpath. */
  isPublic: boolean;
}

/** The name a reader knows a declaration by: `Name` or `Owner.member`. */
function ownerName(node: ts.Node): string {
  const parts: string[] = [];
  for (let at: ts.Node | undefined = node; at && !ts.isSourceFile(at); at = at.parent) {
    let name: ts.Node | undefined;
    if (ts.isVariableDeclaration(at)) continue; // named by its statement
    if (ts.isVariableStatement(at)) name = at.declarationList.declarations[0]?.name;
    else if ('name' in at) name = (at as { name?: ts.Node }).name;
    if (name && (ts.isIdentifier(name) || ts.isStringLiteral(name) || ts.isPrivateIdentifier(name)))
      parts.unshift(name.text);
    else if (ts.isConstructorDeclaration(at)) parts.unshift('constructor');
  }
  return parts.join('.') || '<anonymous>';
}

/** The ```ts blocks of one `@example` tag, from the raw comment text. */
function blocksOfTag(
  source: ts.SourceFile,
  tag: ts.JSDocTag,
): Omit<ExampleBlock, 'owner' | 'isPublic'>[] {
  const file = relative(root, source.fileName);
  const firstLine = source.getLineAndCharacterOfPosition(tag.getStart(source)).line;
  const lines = source.text
    .slice(tag.getStart(source), tag.end)
    .split('\n')
    .map((line, i) => (i === 0 ? line : line.replace(/^\s*\*( |$)/, '')));
  const blocks: Omit<ExampleBlock, 'owner' | 'isPublic'>[] = [];
  for (let i = 0; i < lines.length; i++) {
    const fence = tsFenceAt(lines, i);
    if (!fence) continue;
    blocks.push({
      file,
      line: firstLine + i + 1,
      code: fence.body.join('\n').replace(/\*\/$/, ''),
      nocheck: fence.flags.includes('nocheck'),
    });
    i = fence.end;
  }
  return blocks;
}

function exampleTags(node: ts.Node): ts.JSDocTag[] {
  return ts
    .getJSDocCommentsAndTags(node)
    .flatMap((doc) => (ts.isJSDoc(doc) ? [...(doc.tags ?? [])] : [doc]))
    .filter((tag) => tag.tagName.text === 'example');
}

/** Read the sources once: which exports lack an example, and every example block. */
function survey(): {
  missing: string[];
  total: number;
  blocks: ExampleBlock[];
  unfenced: string[];
} {
  const entries = entryPoints();
  const program = ts.createProgram(entries, {
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
    target: ts.ScriptTarget.ES2022,
    strict: true,
    noEmit: true,
    types: ['node'],
  });
  const checker = program.getTypeChecker();
  const publicNodes = new Set<ts.Node>();
  const seen = new Set<ts.Symbol>();
  const missing: string[] = [];
  for (const entry of entries) {
    const module = checker.getSymbolAtLocation(program.getSourceFile(entry)!)!;
    for (const exported of checker.getExportsOfModule(module)) {
      const symbol =
        exported.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(exported) : exported;
      if (seen.has(symbol)) continue;
      seen.add(symbol);
      const decls = (symbol.declarations ?? []).map((d) =>
        ts.isVariableDeclaration(d) ? d.parent.parent : d,
      );
      for (const d of decls) publicNodes.add(d);
      const callable = decls.some((d) => ts.isClassDeclaration(d) || ts.isFunctionDeclaration(d));
      if (callable && !decls.some((d) => exampleTags(d).length > 0)) missing.push(symbol.getName());
    }
  }
  const blocks: ExampleBlock[] = [];
  const unfenced: string[] = [];
  const isPublic = (node: ts.Node): boolean => {
    for (let at: ts.Node | undefined = node; at; at = at.parent)
      if (publicNodes.has(at)) return true;
    return false;
  };
  const srcDir = join(root, 'src');
  for (const source of program.getSourceFiles()) {
    if (!source.fileName.startsWith(`${srcDir}/`)) continue;
    // A tag is reported for the node it documents and again for some nodes
    // inside it (a variable statement's declaration and initializer): take it
    // once, for the outermost node, which is visited first.
    const taken = new Set<ts.JSDocTag>();
    const visit = (node: ts.Node): void => {
      for (const tag of exampleTags(node)) {
        if (taken.has(tag)) continue;
        taken.add(tag);
        const found = blocksOfTag(source, tag);
        const where = { owner: ownerName(node), isPublic: isPublic(node) };
        if (found.length === 0 && where.isPublic)
          unfenced.push(`${relative(root, source.fileName)}: ${where.owner}`);
        for (const block of found) blocks.push({ ...block, ...where });
      }
      ts.forEachChild(node, visit);
    };
    visit(source);
  }
  return { missing, total: seen.size, blocks, unfenced };
}

const { missing, total, blocks, unfenced } = survey();
const key = (b: ExampleBlock): string => `${b.file}: ${b.owner}`;
let work = '';

beforeAll(async () => {
  await ensureBuilt();
  work = createDocProject('sp-tsdoc-examples-');
}, 300_000);

afterAll(() => {
  if (work) rmSync(work, { recursive: true, force: true });
});

describe('the TSDoc examples', () => {
  it('every public class and function has an @example, except the NOT_YET names', () => {
    expect(total).toBeGreaterThan(100);
    const unlisted = missing.filter((name) => !NOT_YET.includes(name));
    const listedButPresent = NOT_YET.filter((name) => !missing.includes(name));
    expect({ unlisted, listedButPresent }).toEqual({ unlisted: [], listedButPresent: [] });
  });

  it('finds a ```ts block in every public example, and only the listed ones are fenced nocheck', () => {
    expect(unfenced).toEqual([]);
    const skipped = blocks.filter((b) => b.isPublic && b.nocheck).map(key);
    expect(skipped.sort()).toEqual(Object.keys(NOT_CHECKED).sort());
  });

  it('type-check against the built package, each as its own module (tsc --noEmit, strict)', async () => {
    const files: string[] = [];
    const origin = new Map<string, ExampleBlock>();
    blocks
      .filter((b) => b.isPublic && !b.nocheck)
      .forEach((block, n) => {
        const name = `example-${String(n).padStart(3, '0')}.ts`;
        // Line 1 is a header: line 2 of the file is the block's first line.
        writeFileSync(join(work, name), `// ${key(block)}\n${block.code}\nexport {};\n`);
        files.push(name);
        origin.set(name, block);
      });
    const result = await typeCheck(work, files);
    // example-007.ts(3,5): error TS2304: ... -> src/ledger/fit.ts:42 (checkFit): error TS2304: ...
    const failing = new Set<string>();
    const problems = result
      .split('\n')
      .filter((line) => line.trim() !== '')
      .flatMap((line) => {
        const m = /^(example-\d+\.ts)\((\d+),(\d+)\): (.*)$/.exec(line);
        const block = m ? origin.get(m[1]!) : undefined;
        if (!block) return [line];
        failing.add(key(block));
        if (NOT_YET_CHECKED.includes(key(block))) return [];
        return [`${block.file}:${block.line + Number(m![2]!) - 1} (${block.owner}): ${m![4]}`];
      });
    const listedButPassing = NOT_YET_CHECKED.filter((k) => !failing.has(k));
    expect({ problems, listedButPassing }).toEqual({ problems: [], listedButPassing: [] });
  }, 300_000);
});
