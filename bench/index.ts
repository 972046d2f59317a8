/**
 * `npm run bench`: runs every `bench/*.bench.ts` (or those named on the command
 * line, e.g. `npm run bench -- caps`) and prints their tables. Always exits 0:
 * figures are for the closing notes, not pass/fail.
 */
import { readdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { type BenchTable, renderTable } from './lib.js';

const here = dirname(fileURLToPath(import.meta.url));
const only = process.argv.slice(2);
const files = readdirSync(here)
  .filter((f) => f.endsWith('.bench.ts'))
  .filter((f) => only.length === 0 || only.some((name) => f.startsWith(name)))
  .sort();

console.log(
  `# scaler-primitives benchmark (node ${process.version}, ${new Date().toISOString()})\n`,
);
for (const file of files) {
  try {
    const mod = (await import(pathToFileURL(join(here, file)).href)) as {
      default: () => Promise<BenchTable[]>;
    };
    for (const table of await mod.default()) console.log(`${renderTable(table)}\n`);
  } catch (error) {
    console.log(`## ${file}\n\nfailed: ${error instanceof Error ? error.stack : String(error)}\n`);
  }
}
process.exit(0);
