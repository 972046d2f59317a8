import { readFileSync } from 'node:fs';
import { defineConfig } from 'tsup';
// @ts-expect-error: a plain .mjs build script without types
import { pruneEmptyChunks } from './scripts/prune-empty-chunks.mjs';

// The exports map in package.json is the one list of public modules: every
// subpath `./x/y` is built from `src/x/y/index.ts`, and `.` from `src/index.ts`.
const pkg = JSON.parse(readFileSync(new URL('./package.json', import.meta.url), 'utf8')) as {
  exports: Record<string, unknown>;
};
const entry: Record<string, string> = {};
for (const subpath of Object.keys(pkg.exports)) {
  if (subpath === './package.json') continue;
  const name = subpath === '.' ? 'index' : `${subpath.slice(2)}/index`;
  entry[name] = `src/${name}.ts`;
}
// The operator CLI (package.json `bin`): built from src/cli/index.ts, shebang kept.
const libraryEntry = { ...entry };
entry['cli/index'] = 'src/cli/index.ts';

export default defineConfig({
  entry,
  format: ['esm', 'cjs'],
  // The CLI is a program, not an API: no declarations for it.
  dts: { entry: libraryEntry },
  splitting: true,
  // No source maps in the package: they were two thirds of its size, and the
  // unminified output reads as it is.
  sourcemap: false,
  clean: true,
  target: 'node20',
  platform: 'node',
  treeshake: true,
  // Every emitted file has content (see scripts/prune-empty-chunks.mjs).
  onSuccess: async () => {
    pruneEmptyChunks('dist');
  },
});
