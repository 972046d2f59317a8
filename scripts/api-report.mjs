// API report: the public surface of every subpath of the exports map, as the
// TypeScript declarations a user of the built package sees (comments removed,
// exports sorted by name), one file per subpath under api/. A declaration the
// public surface refers to but no subpath exports is listed too, under its own
// heading: changing it changes what users get, even if they cannot name it, and the
// name check (`--count`, test/api-report.test.ts) fails until it is exported or folded away.
//
// `npm run api:update` builds and rewrites api/; test/api-report.test.ts builds
// the same reports from dist/ and fails on any difference, so a change of the
// public surface is always a reviewed change of api/ in the same commit.
//
//   node scripts/api-report.mjs           print which reports differ, exit 1 if any
//   node scripts/api-report.mjs --write   rewrite api/
//   node scripts/api-report.mjs --count   print the number of public names per subpath, exit 1 over the
//                                         limits or when a public signature uses a type no subpath exports
import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join, relative, resolve, sep } from 'node:path';
import ts from 'typescript';

const root = resolve(import.meta.dirname, '..');

/** The subpaths of the exports map with their ESM declaration entry, in map order. */
function entries(pkgRoot) {
  const pkg = JSON.parse(readFileSync(join(pkgRoot, 'package.json'), 'utf8'));
  return Object.keys(pkg.exports)
    .filter((key) => key !== './package.json')
    .map((key) => ({
      specifier: key === '.' ? pkg.name : `${pkg.name}/${key.slice(2)}`,
      report: key === '.' ? 'index.api.md' : `${key.slice(2).replaceAll('/', '-')}.api.md`,
      dts: join(pkgRoot, pkg.exports[key].import.types),
    }));
}

const printer = ts.createPrinter({ removeComments: true, newLine: ts.NewLineKind.LineFeed });

function resolveAlias(checker, symbol) {
  return symbol.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(symbol) : symbol;
}

/** The text of one declaration, without comments, `declare` made explicit for variables. */
function print(decl) {
  const file = decl.getSourceFile();
  if (ts.isVariableDeclaration(decl)) {
    const list = decl.parent;
    const keyword = list.flags & ts.NodeFlags.Const ? 'const' : 'let';
    return `declare ${keyword} ${printer.printNode(ts.EmitHint.Unspecified, decl, file)};`;
  }
  return printer.printNode(ts.EmitHint.Unspecified, decl, file);
}

/** Symbols declared in dist/ that a declaration refers to by name. */
function referencedSymbols(checker, decl, distDir) {
  const found = new Set();
  const visit = (node) => {
    let name;
    if (ts.isTypeReferenceNode(node)) name = node.typeName;
    else if (ts.isExpressionWithTypeArguments(node)) name = node.expression;
    else if (ts.isTypeQueryNode(node)) name = node.exprName;
    else if (ts.isImportTypeNode(node)) name = node.qualifier;
    if (name) {
      // `typeof ErrorCode.X` and `ns.Type` name both the container and the member.
      const names = [];
      for (let part = name; part; part = ts.isQualifiedName(part) ? part.left : undefined) {
        names.push(ts.isQualifiedName(part) ? part.right : part);
      }
      for (const at of names) {
        const symbol = checker.getSymbolAtLocation(at);
        if (!symbol) continue;
        const target = resolveAlias(checker, symbol);
        if (target.flags & (ts.SymbolFlags.TypeParameter | ts.SymbolFlags.Property)) continue;
        const inDist = (target.declarations ?? []).some((d) =>
          resolve(d.getSourceFile().fileName).startsWith(distDir + sep),
        );
        if (inDist) found.add(target);
      }
    }
    ts.forEachChild(node, visit);
  };
  visit(decl);
  return found;
}

function section(name, symbol) {
  const texts = (symbol.declarations ?? []).map(print);
  const declared = symbol.getName();
  const header = declared !== name && declared !== 'default' ? `// exported as ${name}\n` : '';
  return header + texts.join('\n');
}

/**
 * The report of every subpath, keyed by file name under api/. The map's
 * `unnameable` property lists the declarations the public surface refers to
 * that no subpath exports (`subpath: Name`), which a user cannot name.
 * @param {string} [pkgRoot] the package root holding package.json and dist/
 * @returns {Map<string, string> & { unnameable: string[] }}
 */
export function buildReports(pkgRoot = root) {
  const list = entries(pkgRoot);
  const distDir = resolve(pkgRoot, 'dist');
  const program = ts.createProgram(
    list.map((entry) => entry.dts),
    {
      strict: true,
      target: ts.ScriptTarget.ES2022,
      module: ts.ModuleKind.NodeNext,
      moduleResolution: ts.ModuleResolutionKind.NodeNext,
      types: ['node'],
      skipLibCheck: true,
      noEmit: true,
    },
  );
  const checker = program.getTypeChecker();
  // First the exports of every subpath, so a declaration another subpath exports
  // is named by reference instead of being repeated.
  const exportsOf = list.map((entry) => {
    const file = program.getSourceFile(entry.dts);
    if (!file)
      throw new Error(`api-report: ${relative(pkgRoot, entry.dts)} is missing: build first`);
    const moduleSymbol = checker.getSymbolAtLocation(file);
    return moduleSymbol
      ? checker
          .getExportsOfModule(moduleSymbol)
          .sort((a, b) => a.getName().localeCompare(b.getName()))
      : [];
  });
  // A name is credited to the first subpath module that exports it, the root last.
  const exportedBy = new Map();
  const order = list.map((_, index) => index).sort((a, b) => (a === 0) - (b === 0) || a - b);
  order.forEach((index) => {
    const entry = list[index];
    for (const symbol of exportsOf[index]) {
      const target = resolveAlias(checker, symbol);
      if (!exportedBy.has(target))
        exportedBy.set(target, `${entry.specifier} (${symbol.getName()})`);
    }
  });
  const reports = new Map();
  const unnameable = [];
  list.forEach((entry, index) => {
    const exported = exportsOf[index];
    const publicTargets = new Set(exported.map((symbol) => resolveAlias(checker, symbol)));
    const parts = [];
    const pending = [];
    for (const symbol of exported) {
      const target = resolveAlias(checker, symbol);
      parts.push(section(symbol.getName(), target));
      for (const decl of target.declarations ?? []) pending.push(decl);
    }
    // Declarations reached from the public ones but not exported by this subpath.
    const hidden = new Set();
    while (pending.length > 0) {
      const decl = pending.pop();
      for (const symbol of referencedSymbols(checker, decl, distDir)) {
        if (publicTargets.has(symbol) || hidden.has(symbol)) continue;
        hidden.add(symbol);
        for (const next of symbol.declarations ?? []) pending.push(next);
      }
    }
    const byName = (a, b) => a.getName().localeCompare(b.getName());
    const elsewhere = [...hidden].filter((symbol) => exportedBy.has(symbol)).sort(byName);
    const nowhere = [...hidden].filter((symbol) => !exportedBy.has(symbol)).sort(byName);
    for (const symbol of nowhere) unnameable.push(`${entry.specifier}: ${symbol.getName()}`);
    let text = `# API report: \`${entry.specifier}\`\n\n`;
    text += 'Generated by `npm run api:update` from the built declarations. Do not edit by hand:\n';
    text += 'test/api-report.test.ts fails when the public surface differs from this file.\n\n';
    text += `\`\`\`ts\n${parts.join('\n\n')}\n\`\`\`\n`;
    if (elsewhere.length > 0) {
      text += '\n## Referenced here, exported by another subpath\n\n';
      text += elsewhere
        .map((symbol) => `- \`${symbol.getName()}\`: ${exportedBy.get(symbol)}\n`)
        .join('');
    }
    if (nowhere.length > 0) {
      text += '\n## Referenced here, exported by no subpath (users cannot name these)\n\n';
      text += `\`\`\`ts\n${nowhere.map((symbol) => section(symbol.getName(), symbol)).join('\n\n')}\n\`\`\`\n`;
    }
    reports.set(entry.report, text);
  });
  reports.unnameable = unnameable;
  reports.counts = { ...countNames(list, exportsOf, checker), unnameable };
  return reports;
}

/**
 * How many names each subpath exports, how many distinct names all of them
 * export together, and every declaration exported under two spellings outside
 * `./kici` (the one subpath that keeps kici's names beside ours).
 */
function countNames(list, exportsOf, checker) {
  const perSubpath = {};
  const all = new Set();
  const spellings = new Map();
  list.forEach((entry, index) => {
    perSubpath[entry.specifier] = exportsOf[index].length;
    for (const symbol of exportsOf[index]) {
      all.add(symbol.getName());
      if (entry.specifier.endsWith('/kici')) continue;
      const target = resolveAlias(checker, symbol);
      const names = spellings.get(target) ?? new Set();
      names.add(symbol.getName());
      spellings.set(target, names);
    }
  });
  const aliases = [...spellings.values()]
    .filter((names) => names.size > 1)
    .map((names) => [...names].sort().join(' = '))
    .sort();
  return { perSubpath, total: all.size, aliases };
}

/**
 * The targets the surface is held to (issues 32 and 39): distinct names in all, and per
 * subpath; the root is a short deliberate list, not a module re-exported whole.
 */
export const NAME_LIMITS = {
  total: 250,
  'scaler-primitives': 40,
  'scaler-primitives/ledger': 30,
  'scaler-primitives/manager': 60,
};

/**
 * Lines describing where the counts exceed {@link NAME_LIMITS}, a declaration has two
 * spellings, or a public signature uses a type no subpath exports (a user cannot name it:
 * export it from the subpath that owns it, or simplify the signature).
 */
export function countProblems(counts) {
  const problems = [];
  for (const name of counts.unnameable ?? [])
    problems.push(`exported by no subpath, yet used by a public signature: ${name}`);
  if (counts.total > NAME_LIMITS.total)
    problems.push(`${counts.total} distinct public names, at most ${NAME_LIMITS.total}`);
  for (const [specifier, count] of Object.entries(counts.perSubpath)) {
    const limit = NAME_LIMITS[specifier];
    if (limit !== undefined && count > limit)
      problems.push(`${specifier} exports ${count} names, at most ${limit}`);
  }
  for (const alias of counts.aliases) problems.push(`one declaration, two names: ${alias}`);
  return problems;
}

/** The counts as a table, as `npm run api:count` prints them. */
export function formatCounts(counts) {
  const rows = Object.entries(counts.perSubpath).map(([specifier, count]) => {
    const limit = NAME_LIMITS[specifier];
    return `| \`${specifier}\` | ${count} | ${limit ?? ''} |`;
  });
  return [
    '| subpath | names | at most |',
    '|---|---|---|',
    ...rows,
    `| distinct names, all subpaths | ${counts.total} | ${NAME_LIMITS.total} |`,
    `| types exported by no subpath | ${counts.unnameable?.length ?? 0} | 0 |`,
  ].join('\n');
}

/**
 * Type errors in the published declaration files themselves, checked without
 * `skipLibCheck` as a user's strict project with `skipLibCheck: false` would
 * (a bundler that drops an import leaves a name no user can compile).
 * @param {string} [pkgRoot] the package root holding dist/
 * @returns {string[]} one line per error: `dist/<file>:<line>: <message>`
 */
export function declarationErrors(pkgRoot = root) {
  const distDir = resolve(pkgRoot, 'dist');
  const files = readdirSync(distDir, { recursive: true, encoding: 'utf8' })
    .filter((name) => name.endsWith('.d.ts') || name.endsWith('.d.cts'))
    .map((name) => join(distDir, name));
  const program = ts.createProgram(files, {
    strict: true,
    target: ts.ScriptTarget.ES2022,
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
    types: ['node'],
    skipLibCheck: false,
    noEmit: true,
  });
  const errors = [];
  for (const file of program.getSourceFiles()) {
    if (!resolve(file.fileName).startsWith(distDir + sep)) continue;
    for (const diagnostic of program.getSemanticDiagnostics(file)) {
      const { line } = file.getLineAndCharacterOfPosition(diagnostic.start ?? 0);
      const message = ts.flattenDiagnosticMessageText(diagnostic.messageText, ' ');
      errors.push(
        `${relative(pkgRoot, file.fileName)}:${line + 1}: TS${diagnostic.code} ${message}`,
      );
    }
  }
  return errors;
}

/**
 * Compare built reports with the files under api/.
 * @returns {string[]} one line per report that is missing, stale or extra
 */
export function staleReports(reports, apiDir = join(root, 'api')) {
  const problems = [];
  let onDisk = [];
  try {
    onDisk = readdirSync(apiDir).filter((name) => name.endsWith('.api.md'));
  } catch {
    // No api/ yet: every report is missing.
  }
  for (const [name, text] of reports) {
    let current;
    try {
      current = readFileSync(join(apiDir, name), 'utf8');
    } catch {
      problems.push(`api/${name} is missing`);
      continue;
    }
    if (current !== text) problems.push(`api/${name} differs from the built declarations`);
  }
  for (const name of onDisk) {
    if (!reports.has(name)) problems.push(`api/${name} has no subpath in the exports map`);
  }
  return problems;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const reports = buildReports();
  const apiDir = join(root, 'api');
  if (process.argv.includes('--count')) {
    console.log(formatCounts(reports.counts));
    const problems = countProblems(reports.counts);
    for (const line of problems) console.error(`api-count: ${line}`);
    process.exit(problems.length > 0 ? 1 : 0);
  }
  if (process.argv.includes('--write')) {
    rmSync(apiDir, { recursive: true, force: true });
    mkdirSync(apiDir, { recursive: true });
    for (const [name, text] of reports) writeFileSync(join(apiDir, name), text);
    console.log(`api-report: wrote ${reports.size} reports to api/`);
  } else {
    const problems = staleReports(reports, apiDir);
    for (const line of problems) console.error(`api-report: ${line}`);
    if (problems.length > 0) {
      console.error(
        'api-report: if the change is intended, run `npm run api:update` and commit api/',
      );
      process.exit(1);
    }
    console.log(`api-report: ${reports.size} reports match api/`);
  }
}
