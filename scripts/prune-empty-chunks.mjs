// esbuild's code splitting emits a chunk for a module that several entry points
// import even when that module is nothing but re-exports (src/caps/index.ts,
// src/resources/index.ts): the chunk is empty, and entries import it for
// nothing. After each build, remove every chunk with no code and the bare
// `import './chunk-X.js'` / `require('./chunk-X.cjs')` lines that load it.
import { readdirSync, readFileSync, statSync, unlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

const NO_CODE = /^\s*(['"]use strict['"];?)?\s*$/;

function files(dir) {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    return statSync(path).isDirectory() ? files(path) : [path];
  });
}

/** Remove empty chunks under `dist` and their imports; returns the names removed. */
export function pruneEmptyChunks(dist) {
  const all = files(dist).filter((f) => /\.(c?js)$/.test(f));
  const empty = all.filter(
    (f) => /(^|\/)chunk-[\w-]+\.c?js$/.test(f) && NO_CODE.test(readFileSync(f, 'utf8')),
  );
  if (empty.length === 0) return [];
  const names = empty.map((f) => f.slice(f.lastIndexOf('/') + 1));
  const escaped = names.map((n) => n.replace(/[.]/g, '\\.')).join('|');
  const loader = new RegExp(
    `^(import ['"][./]+(?:${escaped})['"];|require\\(['"][./]+(?:${escaped})['"]\\);)\\n`,
    'gm',
  );
  for (const file of all) {
    if (empty.includes(file)) continue;
    const text = readFileSync(file, 'utf8');
    const pruned = text.replace(loader, '');
    if (pruned !== text) writeFileSync(file, pruned);
  }
  for (const file of empty) unlinkSync(file);
  // Anything still naming a removed chunk would fail at import time: fail the build instead.
  for (const file of all) {
    if (empty.includes(file)) continue;
    const text = readFileSync(file, 'utf8');
    for (const name of names) {
      if (text.includes(name))
        throw new Error(`${file} still refers to the removed empty chunk ${name}`);
    }
  }
  return names;
}
